-- kinds.lua: list a kind of record (an algorithm, a scale, and a slice
-- count for the sliding window counters) in the prefix's registry of kinds,
-- for the admin API (Buckets, Reset): docs/redis.md. Sent by a sidecar the
-- first time it writes a record of the kind, and again about every ten
-- minutes while it does: never on a check's path.
--
-- KEYS[1]  the registry, PREFIX:kinds, a hash: one field "A:SCALE[:SUB]"
--          per kind, whose value is the time (Unix ms, the sidecars'
--          clock) until which records of that kind may live
-- ARGV     the field, its time, the time before which a kind's records are
--          all gone (now less the slack), the most kinds the registry holds
--
-- Returns 1 when the kind is listed until at least ARGV[2], 0 when the
-- registry is full (the sidecar then lists the record in its id's index).
local key, f = KEYS[1], ARGV[1]
local old = tonumber(redis.call('HGET', key, f))
if old then
  if old < tonumber(ARGV[2]) then redis.call('HSET', key, f, ARGV[2]) end
  return 1
end
local most = tonumber(ARGV[4])
if redis.call('HLEN', key) >= most then
  -- Full: forget the kinds whose records have all expired.
  local gone = tonumber(ARGV[3])
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if (tonumber(all[i + 1]) or 0) < gone then redis.call('HDEL', key, all[i]) end
  end
  if redis.call('HLEN', key) >= most then return 0 end
end
redis.call('HSET', key, f, ARGV[2])
return 1
