-- leaky.lua: one decision of the leaky bucket as a queue (algo.Leaky),
-- atomically.
--
-- KEYS[1]  the record hash of (id, leaky, scale): m = the TAT's whole ms,
--          c/d = its fraction (numerator, denominator = the limit it was
--          computed with), cr = created; the TAT is when the queue drains
-- KEYS[2]  the id's index hash: one field "ALGO:SCALE" per record hash
-- ARGV     scale, limit, hits, now ("" = Redis TIME), index field, TTL slack
--          in ms, deadline ("" = none), queue, max delay in ms (0 = none)
--
-- Returns the state before the decision as check.lua does for token,
--   {now, c, cr, m, false, false, false, d}
-- from which the client computes the decision with algo.Leaky; the script
-- applies the change that function would: with D*limit = (m-now)*limit + n
-- (how far the queue is ahead of now, times the limit), hits are let in iff
-- hits <= limit and D*limit <= room*limit = min(queue*scale,
-- maxdelay*limit), and the TAT moves by hits*scale/limit.
--
-- Arithmetic: exact in doubles. Validation keeps a queue's wait within ten
-- years (queue*scale/limit <= 2^39 ms), so the TAT is less than 2^40 ms
-- ahead of now and every factor below 2^40; products are two limbs, as in
-- check.lua.
if redis.replicate_commands then redis.replicate_commands() end
local key, idx = KEYS[1], KEYS[2]
local scale, limit, hits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local queue, maxdelay = tonumber(ARGV[8]), tonumber(ARGV[9])
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[4])
end
-- The deadline rule (see check.lua): a script run after its caller gave up
-- counts nothing.
if ARGV[7] ~= '' and now > tonumber(ARGV[7]) then
  return redis.error_reply('DEADLINE script ran after the caller\'s deadline, nothing counted')
end

local floor = math.floor
local P20, P40 = 2 ^ 20, 2 ^ 40
local function int(x) return string.format('%d', x) end
local function mul(a, b)
  local a1, a0 = floor(a / P20), a % P20
  local b1, b0 = floor(b / P20), b % P20
  local cross = a1 * b0 + a0 * b1
  local lo = a0 * b0 + (cross % P20) * P20
  return {a1 * b1 + floor(cross / P20) + floor(lo / P40), lo % P40}
end
local function add(x, y)
  local lo = x[2] + y[2]
  return {x[1] + y[1] + floor(lo / P40), lo % P40}
end
local function le(x, y) return x[1] < y[1] or (x[1] == y[1] and x[2] <= y[2]) end
local function divmod(x, d)
  local digits = {floor(x[1] / P20), x[1] % P20, floor(x[2] / P20), x[2] % P20}
  local q, r = 0, 0
  for i = 1, 4 do
    r = r * P20 + digits[i]
    local qd = floor(r / d)
    if qd * d > r then qd = qd - 1 end
    if (qd + 1) * d <= r then qd = qd + 1 end
    r = r - qd * d
    q = q * P20 + qd
  end
  return q, r
end

local st = redis.call('HMGET', key, 'c', 'cr', 'm', 'd')
local out = {int(now), st[1], st[2], st[3], false, false, false, st[4]}
if hits == 0 then return out end

-- The TAT m + n/limit (algo.tokenFrac's conversion of another limit's
-- fraction, rounding up); an empty queue's is now. It never moves back.
local m, n = now, 0
local exists = st[1] and st[2]
if exists then
  local tm, num, den = tonumber(st[3]), tonumber(st[1]), tonumber(st[4] or '0')
  if not (tm < now or (tm == now and num == 0)) then
    m = tm
    if num == 0 then
      n = 0
    elseif den == 0 or num >= den or limit == 0 then
      n = limit
    else
      local q, r = divmod(mul(num, limit), den)
      n = q
      if r > 0 then n = n + 1 end
    end
    if n == limit and num ~= 0 then m, n = m + 1, 0 end
  end
end
local room = mul(queue, scale)
if maxdelay > 0 and le(mul(maxdelay, limit), room) then room = mul(maxdelay, limit) end
if hits > limit or not le(add(mul(m - now, limit), {0, n}), room) then
  return out -- denied: no place taken
end
local q, r = divmod(add(mul(hits, scale), {0, n}), limit)
m, n = m + q, r
if exists then
  redis.call('HSET', key, 'c', int(n), 'd', int(limit), 'm', int(m))
else
  redis.call('HSET', key, 'c', int(n), 'd', int(limit), 'm', int(m), 'cr', int(now))
end
-- Kept until the queue has drained.
local ttl = m + 1 - now + tonumber(ARGV[6])
redis.call('PEXPIRE', key, int(ttl))
redis.call('HSET', idx, ARGV[5], '1')
if redis.call('PTTL', idx) < ttl then redis.call('PEXPIRE', idx, int(ttl)) end
return out
