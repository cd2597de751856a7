-- records.lua: list (and for a reset, delete) the record hashes of one id.
--
-- KEYS[1]  the id's index hash: one field "ALGO:SCALE" per record hash
-- ARGV     mode ("list" or "reset"), the id's key prefix (the record hash of
--          field F is prefix..F), scale (reset only: "0" = every scale),
--          now ("" = Redis TIME)
--
-- The record hashes share the index's hash slot (the id's hash tag), so a
-- cluster node holds them all. Returns {now, F, c, cr, m, pc, pcr, pm, d, F, ...}
-- for each record hash listed or deleted; index fields whose hash has expired
-- are dropped on the way.
if redis.replicate_commands then redis.replicate_commands() end -- see check.lua
local idx = KEYS[1]
local mode, prefix, scale = ARGV[1], ARGV[2], ARGV[3]
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[4])
end
local out = {string.format('%d', now)}
local fields = {}
for _, f in ipairs(redis.call('HKEYS', idx)) do
  if string.sub(f, 1, 2) ~= 'w:' then table.insert(fields, f) end -- slices: slicesrecords.lua
end
for _, f in ipairs(fields) do
  local key = prefix .. f
  local st = redis.call('HMGET', key, 'c', 'cr', 'm', 'pc', 'pcr', 'pm', 'd')
  if not st[1] and not st[4] then
    redis.call('HDEL', idx, f)
  elseif mode == 'list' or scale == '0' or string.sub(f, 3) == scale then
    table.insert(out, f)
    for i = 1, 7 do table.insert(out, st[i]) end
    if mode == 'reset' then
      redis.call('DEL', key)
      redis.call('HDEL', idx, f)
    end
  end
end
return out
