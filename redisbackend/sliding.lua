-- sliding.lua: one sliding-window check (algo.Sliding), atomically.
--
-- KEYS[1]  the record: 6 doubles, little-endian (struct '<dddddd'): the
--          current window's count, modified and created times, then the
--          previous window's (count 0: none). A record's window is
--          floor(created/scale).
-- ARGV[1]  6 doubles, little-endian: scale, limit, hits, now (-1: Redis's
--          TIME), deadline (-1: none), TTL slack in ms (the calling
--          convention of every check script: docs/redis.md)
--
-- Returns the record as it was before the check (nil: none), after the time
-- decided at (8 bytes, packed alike) when that was Redis's TIME. The client
-- decides from it with algo.Sliding, and knows from the decision what the
-- script wrote; the script applies the change that function makes, so the
-- decision and the write are one atomic step.
--
-- Arithmetic: Lua numbers are doubles, exact for integers below 2^53. Every
-- input is below 2^40, so floor(now/scale) is exact; the products compared
-- reach 2^71 and are compared exactly (two limbs) when both pass 2^53.
--
-- Cost: every redis.call, every number turned into a string and every table
-- returned costs Redis about as much as a command, so the script makes two
-- calls (GET, then SET or, within a window, SETRANGE of the count and
-- modified time, which keeps the TTL), packs its numbers rather than
-- formatting them, and returns the string it read.
local v = redis.call('GET', key)
local floor = math.floor
local c, m, cr, pc, pm, pcr = 0, 0, 0, 0, 0, 0
if v then
  c, m, cr, pc, pm, pcr = struct.unpack('<dddddd', v)
  -- Never rewind: a clock behind the record's last change decides at it.
  if m > now then now = m end
end
local out = v
if timed then out = struct.pack('<d', now) .. (v or '') end
if hits == 0 then return out end
local b = floor(now / scale)
local cb -- the stored current record's window
local cur, prev = 0, 0
if v then
  cb = floor(cr / scale)
  if cb == b then
    cur = c
    if pc > 0 and floor(pcr / scale) == b - 1 then prev = pc end
  elseif cb == b - 1 then
    prev = c
  end
end
-- Allowed iff prev*(scale-e) + (cur+hits)*scale <= limit*scale.
local room = limit - cur - hits
if room < 0 then return out end
if prev > 0 then
  local x, y = prev * (scale - (now - b * scale)), room * scale
  local P = 2 ^ 53
  if x >= P and y >= P then
    -- Both products pass 2^53: compare them exactly as hi*2^40 + lo.
    local function mul(p, q)
      local p1, p0 = floor(p / 2 ^ 20), p % 2 ^ 20
      local q1, q0 = floor(q / 2 ^ 20), q % 2 ^ 20
      local cross = p1 * q0 + p0 * q1
      local lo = p0 * q0 + (cross % 2 ^ 20) * 2 ^ 20
      return p1 * q1 + floor(cross / 2 ^ 20) + floor(lo / 2 ^ 40), lo % 2 ^ 40
    end
    local xh, xl = mul(prev, scale - (now - b * scale))
    local yh, yl = mul(room, scale)
    if xh > yh or (xh == yh and xl > yl) then return out end
  elseif x > y then
    return out
  end
end
-- Allowed: count the hits in the current window.
if cb == b then
  -- The same window: the same expiry; only the count and time change.
  redis.call('SETRANGE', key, '0', struct.pack('<dd', c + hits, now))
  return out
end
-- A new window: the record lives until the end of the next one, the last
-- that reads it.
local ttl = string.format('%d', (b + 2) * scale - now + slack)
if cb == b - 1 then
  redis.call('SET', key, struct.pack('<dddddd', hits, now, now, c, m, cr), 'PX', ttl)
else
  redis.call('SET', key, struct.pack('<dddddd', hits, now, now, 0, 0, 0), 'PX', ttl)
end
return out
