-- index.lua: list a record in its id's index, for the admin API (Buckets,
-- Reset), when the registry of kinds (kinds.lua) is full. Sent by the client
-- when a check's record is new, or when its expiry passes into a new index
-- epoch (docs/redis.md): never on every check.
--
-- KEYS[1]  the id's index, a hash: one field "A:SCALE" per record
-- ARGV     the field, its value (the time the record was created or
--          refreshed, Unix ms), the least TTL in ms the index must have
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 0
