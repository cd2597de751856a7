-- start.lua: the start of every check script but fixed.lua, put before its
-- own text (engines.go): the calling convention's six numbers from ARGV[1]
-- (docs/redis.md), the time the check is decided at, and the caller's
-- deadline. It leaves scale, limit, hits, now, dl, slack, timed (now is
-- Redis's TIME) and key; a script's own arguments follow the six, from
-- byte 49 of ARGV[1].
local scale, limit, hits, now, dl, slack = struct.unpack('<dddddd', ARGV[1])
local timed = now < 0
if timed then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
-- A check Redis runs after its caller's deadline counts nothing: the caller
-- has answered 503 (docs/redis.md, "What a check counts").
if dl >= 0 and now > dl then
  return redis.error_reply('DEADLINE script ran after the caller\'s deadline, nothing counted')
end
local key = KEYS[1]
