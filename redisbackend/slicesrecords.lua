-- slicesrecords.lua: list (and for a reset, delete) the slices hashes of
-- one id (see slices.lua); records.lua handles the others.
--
-- KEYS[1]  the id's index hash: one field "w:SCALE:N" per slices hash
-- ARGV     mode ("list" or "reset"), the id's key prefix, scale (reset
--          only: "0" = every scale), now ("" = Redis TIME)
--
-- Returns {now, F, COUNT, FIELD, VALUE, ..., F, ...}: each hash listed or
-- deleted, the number of its fields and values, then those (HGETALL);
-- index fields whose hash has expired are dropped on the way.
if redis.replicate_commands then redis.replicate_commands() end
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
for _, f in ipairs(redis.call('HKEYS', idx)) do
  if string.sub(f, 1, 2) == 'w:' then
    local key = prefix .. f
    local all = redis.call('HGETALL', key)
    if #all == 0 then
      redis.call('HDEL', idx, f)
    elseif mode == 'list' or scale == '0' or string.match(f, '^w:(%d+):') == scale then
      table.insert(out, f)
      table.insert(out, #all)
      for i = 1, #all do table.insert(out, all[i]) end
      if mode == 'reset' then
        redis.call('DEL', key)
        redis.call('HDEL', idx, f)
      end
    end
  end
end
return out
