-- check.lua: one rate-limit decision, atomically.
--
-- KEYS[1]  the record hash of (id, algo, scale): fields c, cr, m (the current
--          record: count, created, modified) and pc, pcr, pm (sliding only:
--          the previous window's record)
-- KEYS[2]  the id's index hash: one field "ALGO:SCALE" per record hash
-- ARGV     algo ("f", "s", "t"), scale, limit, hits, now ("" = Redis TIME),
--          index field
--
-- Returns the state before the decision, as strings, for the client to
-- compute the decision with the same pure function the memory backend uses:
--   {now, c, cr, m, pc, pcr, pm}
-- The script applies the state change itself, so that the decision and the
-- write are one atomic step.
--
-- Arithmetic: Lua numbers are doubles, exact for integers below 2^53. Every
-- input is below 2^42 (times, scales, limits, hits); the fixed counter, which
-- can grow past 2^53, is added with HINCRBY (exact int64, saturated).
local key, idx = KEYS[1], KEYS[2]
local algo = ARGV[1]
local scale, limit, hits = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now
if ARGV[5] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[5])
end
local function int(x) return string.format('%d', x) end
local function bucket(t)
  local b = math.floor(t / scale)
  if b * scale > t then b = b - 1 elseif (b + 1) * scale <= t then b = b + 1 end
  return b
end

local st = redis.call('HMGET', key, 'c', 'cr', 'm', 'pc', 'pcr', 'pm')
local out = {int(now), st[1], st[2], st[3], st[4], st[5], st[6]}
if hits == 0 then return out end

local b = bucket(now)
local expireAt -- the end of the last window that can read what is written

-- fixed-window counting into the current window; rotate keeps the previous
-- window (sliding reads it).
local function count(rotate)
  local cr = st[2] and tonumber(st[2])
  if cr and bucket(cr) == b then
    local r = redis.pcall('HINCRBY', key, 'c', int(hits))
    if type(r) == 'table' and r.err then
      redis.call('HSET', key, 'c', '9223372036854775807')
    end
    redis.call('HSET', key, 'm', int(now))
  elseif rotate and cr and bucket(cr) == b - 1 then
    redis.call('HSET', key, 'pc', st[1], 'pcr', st[2], 'pm', st[3],
      'c', int(hits), 'cr', int(now), 'm', int(now))
  else
    redis.call('DEL', key)
    redis.call('HSET', key, 'c', int(hits), 'cr', int(now), 'm', int(now))
  end
end

if algo == 'f' then
  count(false)
  expireAt = (b + 1) * scale
elseif algo == 's' then
  -- placeholder until algo.Sliding lands: decides as fixed
  count(true)
  expireAt = (b + 2) * scale
else
  -- placeholder until algo.Token lands: decides as fixed
  count(false)
  expireAt = (b + 1) * scale
end

local ttl = expireAt - now
if ttl < 1 then ttl = 1 end
redis.call('PEXPIRE', key, int(ttl))
redis.call('HSET', idx, ARGV[6], '1')
if redis.call('PTTL', idx) < ttl then redis.call('PEXPIRE', idx, int(ttl)) end
return out
