-- log.lua: one sliding-window-log check (algo.LogCheck), decided here,
-- atomically.
--
-- KEYS[1]  the record, a hash: c = the hits in the log, cr = created, m =
--          the newest entry's time, h and n = the sequence numbers of the
--          oldest entry and of the next, and one field e<seq> = "TIME:HITS"
--          per entry, oldest first. Hits of one millisecond share an entry.
-- ARGV[1]  6 doubles, little-endian (struct '<dddddd'): scale, limit,
--          hits, now (-1: Redis's TIME), deadline (-1: none), TTL slack in ms
--          (docs/redis.md)
--
-- Returns {now, index, allowed (1 or 0), count, reset_ms, retry_after_ms}:
-- index is how long in ms the record's kind must stay listed (0: no longer
-- than before; kinds.go).
local function int(x) return string.format('%d', x) end
local st = redis.call('HMGET', key, 'c', 'cr', 'm', 'h', 'n')
local total = tonumber(st[1] or '0')
local head, nxt = tonumber(st[4] or '0'), tonumber(st[5] or '0')
local newest = tonumber(st[3] or '0')
if total > 0 and now < newest then now = newest end -- never rewind
local function entry(seq)
  local e = redis.call('HGET', key, 'e' .. int(seq))
  local t, c = string.match(e or '', '^(%d+):(%d+)$')
  return tonumber(t), tonumber(c)
end
local dropped = false
while head < nxt do
  local t, c = entry(head)
  if t and t > now - scale then break end
  redis.call('HDEL', key, 'e' .. int(head))
  total, head, dropped = total - (c or 0), head + 1, true
end
if head >= nxt then total = 0 end
local allowed = total + hits <= limit
local index = 0
if allowed and hits > 0 then
  if head < nxt and newest == now then
    local _, c = entry(nxt - 1)
    redis.call('HSET', key, 'e' .. int(nxt - 1), int(now) .. ':' .. int(c + hits))
  else
    redis.call('HSET', key, 'e' .. int(nxt), int(now) .. ':' .. int(hits))
    nxt = nxt + 1
  end
  total = total + hits
  redis.call('HSET', key, 'c', int(total), 'm', int(now), 'h', int(head), 'n', int(nxt))
  if not st[2] or total == hits then redis.call('HSET', key, 'cr', int(now)) end
  redis.call('PEXPIRE', key, int(scale + slack))
  -- The kind must stay listed as long as the record lives: asked for when
  -- the record is new, and whenever its expiry passes into a new epoch.
  local E = scale
  if E < 60000 then E = 60000 end
  local k = math.floor((now + scale) / E)
  if not st[1] or math.floor((newest + scale) / E) ~= k then
    index = (k + 1) * E - now + slack
  end
elseif dropped then
  if total == 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', int(total), 'h', int(head))
  end
end
local reset, retry = 0, 0
if head < nxt then
  local t = entry(head)
  reset = t + scale - now
end
if not allowed then
  if hits > limit then
    retry = math.max(reset, 1)
  else
    local need, sum, seq = total + hits - limit, 0, head
    while seq < nxt do
      local t, c = entry(seq)
      sum = sum + c
      if sum >= need then retry = math.max(t + scale - now, 1) break end
      seq = seq + 1
    end
  end
end
local ok = 0
if allowed then ok = 1 end
return {now, index, ok, total, reset, retry}
