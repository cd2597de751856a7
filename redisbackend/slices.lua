-- slices.lua: one check of the sliding window counters (algo.SlicesCheck),
-- atomically.
--
-- KEYS[1]  the record of (id, scale, slice count N), one string: 3 doubles,
--          little-endian (struct '<ddd'): base, m, cur; then N-1 unsigned
--          32-bit integers ('<I4'), the hits of slices k-N+1 .. k-1, oldest
--          first. m is the time of the last change and k = floor(m/w) its
--          slice (w = ceil(scale/N)); cur is slice k's hits, and base the sum
--          of the N-1 before it: the window's running sum, so that a check
--          never adds up its slices.
-- ARGV[1]  7 doubles, little-endian: scale, limit, hits, now (-1: Redis's
--          TIME), deadline (-1: none), TTL slack in ms (the calling
--          convention of every check script: docs/redis.md), then N
--
-- Returns the record as it was before the check (nil: none), after the time
-- decided at (8 bytes, packed alike) when that was Redis's TIME. The client
-- decides from it with algo.SlicesCheck, and knows from the decision what
-- the script wrote; the script applies the change that function makes.
--
-- Cost: two redis.calls. Within a slice, an allowed check changes m and cur
-- only (SETRANGE, which keeps the TTL, since the newest slice is the same);
-- the first check of a later slice shifts the slices by string operations,
-- subtracting from base only those that left (usually one), and writes the
-- record with its new TTL (SET PX). A denied check or a peek only reads.
--
-- Arithmetic: every slice holds at most a limit (< 2^32: only allowed hits
-- are counted, and a check is allowed only if the window stays within its
-- limit), so base is below 2^42, and times are below 2^53: doubles are
-- exact.
local n = struct.unpack('<d', ARGV[1], 49)
local v = redis.call('GET', key)
local base, m, cur = 0, 0, 0
if v then
  base, m, cur = struct.unpack('<ddd', v)
  -- Never rewind: a clock behind the record's last change decides at it.
  if m > now then now = m end
end
local out = v
if timed then out = struct.pack('<d', now) .. (v or '') end
if hits == 0 or hits > limit then return out end
local floor = math.floor
local w = floor((scale + n - 1) / n)
local k = floor(now / w)
if k * w > now then k = k - 1 elseif (k + 1) * w <= now then k = k + 1 end
-- d: how many slices the window has moved since the last change; sum: the
-- window's hits at now.
local d, sum = n, 0
if v then
  local km = floor(m / w)
  if km * w > m then km = km - 1 elseif (km + 1) * w <= m then km = km + 1 end
  d = k - km
  if d == 0 then
    sum = base + cur
  elseif d < n then
    -- Slices k-d-N+1 .. k-N have left: the first d stored.
    sum = base + cur
    for i = 0, d - 1 do sum = sum - struct.unpack('<I4', v, 25 + 4 * i) end
  end
end
if sum + hits > limit then return out end
if d == 0 then
  -- The same slice: the same expiry; only m and cur change.
  redis.call('SETRANGE', key, '8', struct.pack('<dd', now, cur + hits))
  return out
end
-- A later slice: the stored slices move back by d, cur among them, and the
-- record lives until slice k leaves the window.
local ttl = string.format('%d', (k + n) * w - now + slack)
if d < n then
  redis.call('SET', key, struct.pack('<ddd', sum, now, hits) .. string.sub(v, 25 + 4 * d) ..
    struct.pack('<I4', cur) .. string.rep('\0', 4 * (d - 1)), 'PX', ttl)
else
  redis.call('SET', key, struct.pack('<ddd', 0, now, hits) .. string.rep('\0', 4 * (n - 1)), 'PX', ttl)
end
return out
