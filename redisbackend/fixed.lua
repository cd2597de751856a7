-- fixed.lua: one fixed-window check with the deadline rule, for
-- Config.FixedScript. The default counts fixed windows without a script
-- (INCRBY); this script does the same and, first, refuses to count a check
-- that Redis runs after its caller's deadline.
--
-- KEYS[1]  the window's counter (its key names the window, chosen by the
--          client's clock)
-- ARGV     hits, TTL in ms (set when the counter is created), now ("" =
--          Redis TIME), deadline ("" = none)
--
-- Returns the counter after the check: an integer, or (past 2^52, where Lua
-- numbers stop being exact) the counter's string. A counter that would pass
-- 2^63-1 stays at 2^63-1, as algo.Fixed saturates.
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local dl = tonumber(ARGV[4])
if dl and now > dl then
  return redis.error_reply('DEADLINE script ran after the caller\'s deadline, nothing counted')
end
local key = KEYS[1]
local c = redis.pcall('INCRBY', key, ARGV[1])
if type(c) == 'table' then
  -- INCRBY refuses to pass 2^63-1.
  redis.call('SET', key, '9223372036854775807', 'XX', 'PX', ARGV[2])
  return '9223372036854775807'
end
if c == tonumber(ARGV[1]) then redis.call('PEXPIRE', key, ARGV[2]) end
if c >= 2 ^ 52 then return redis.call('GET', key) end
return c
