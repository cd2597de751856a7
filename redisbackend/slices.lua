-- slices.lua: one decision of the sliding window counters (algo.SlicesCheck),
-- atomically.
--
-- KEYS[1]  the hash of (id, slices, scale, slice count): one field per
--          slice, named by its number floor(t/w) in decimal, holding the
--          allowed hits counted in it, and m = the time of the last change
-- KEYS[2]  the id's index hash: one field "ALGO:SCALE:N" per hash
-- ARGV     scale, limit, hits, now ("" = Redis TIME), index field, TTL slack
--          in ms, deadline ("" = none), slice count N
--
-- The window is the current slice k = floor(now/w), w = ceil(scale/N), and
-- the N-1 before it. The fields of slices before k-N+1 have left it for
-- good and are deleted; hits are allowed iff the window's hits plus hits
-- stay within the limit, and then added to slice k's field. Returns
--   {now, NUM, HITS, NUM, HITS, ...}
-- the window's slices before the decision, from which the client computes
-- the decision with algo.SlicesCheck (the same sum decides here).
--
-- Arithmetic: slice numbers and times are below 2^53, and the sum of N
-- fields, each at most a limit (< 2^32), is below 2^42: doubles are exact.
if redis.replicate_commands then redis.replicate_commands() end
local key, idx = KEYS[1], KEYS[2]
local scale, limit, hits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local n = tonumber(ARGV[8])
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[4])
end
-- The deadline rule (see check.lua).
if ARGV[7] ~= '' and now > tonumber(ARGV[7]) then
  return redis.error_reply('DEADLINE script ran after the caller\'s deadline, nothing counted')
end
local function int(x) return string.format('%d', x) end

-- Never rewind: a clock behind the last change decides at that change.
local last = redis.call('HGET', key, 'm')
if last and tonumber(last) > now then now = tonumber(last) end
local w = math.floor((scale + n - 1) / n)
local k = math.floor(now / w)
if k * w > now then k = k - 1 elseif (k + 1) * w <= now then k = k + 1 end
local lo = k - n + 1

local all = redis.call('HGETALL', key)
local out, gone, sum = {int(now)}, {}, 0
for i = 1, #all, 2 do
  local f = all[i]
  if f ~= 'm' then
    local num, c = tonumber(f), tonumber(all[i + 1])
    if num == nil or c == nil or num < lo then
      table.insert(gone, f)
    elseif num <= k then
      sum = sum + c
      table.insert(out, f)
      table.insert(out, all[i + 1])
    end
  end
end
for i = 1, #gone, 1000 do
  redis.call('HDEL', key, unpack(gone, i, math.min(i + 999, #gone)))
end
if hits == 0 or sum + hits > limit then return out end

redis.call('HINCRBY', key, int(k), int(hits))
redis.call('HSET', key, 'm', int(now))
-- Kept until slice k, the newest, leaves the window.
local ttl = (k + n) * w - now + tonumber(ARGV[6])
redis.call('PEXPIRE', key, int(ttl))
redis.call('HSET', idx, ARGV[5], '1')
if redis.call('PTTL', idx) < ttl then redis.call('PEXPIRE', idx, int(ttl)) end
return out
