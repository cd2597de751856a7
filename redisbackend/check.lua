-- check.lua: one rate-limit decision, atomically.
--
-- KEYS[1]  the record hash of (id, algo, scale). Fields, by algorithm:
--            fixed, sliding: c, cr, m = the current window's record (count,
--              created, modified); sliding also pc, pcr, pm = the previous
--              window's. A record's window is floor(created/scale).
--            token: m = the TAT's whole ms, c/d = its fraction (numerator,
--              denominator = the limit it was computed with), cr = created.
--            log: see the log's branch below (it decides in the script).
-- KEYS[2]  the id's index hash: one field "ALGO:SCALE" per record hash
-- ARGV     algo ("f", "s", "t", "l"), scale, limit, hits, now ("" = Redis TIME),
--          index field, TTL slack in ms (added to every TTL: with a clock
--          given by the client, Redis still expires keys by its own)
--
-- Returns the state before the decision, as strings:
--   {now, c, cr, m, pc, pcr, pm, d}
-- from which the client computes the decision with the same pure function
-- (package algo) as the embedded limiter. The script applies the state change
-- that function would return, so the decision and the write are one atomic
-- step; the two must agree exactly, and the shared test table checks it.
--
-- Arithmetic: Lua numbers are doubles, exact for integers below 2^53. Every
-- input is below 2^40 (times since the window start, scales, limits, hits),
-- but products such as prev*scale reach 2^72: they are computed exactly as two
-- limbs hi*2^40 + lo (mul, add, le, divmod below). The fixed counter, which
-- sums hits without bound, is added with HINCRBY (exact int64, saturated at
-- 2^63-1 as algo.Fixed saturates).
-- Redis before 5 refuses writes after TIME unless the script replicates its
-- effects rather than itself; since 7.0 this call does nothing.
if redis.replicate_commands then redis.replicate_commands() end
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
-- ARGV[8], when given and not '', is the caller's deadline in absolute Unix
-- ms on the same clock as now (the client's Clock, or Redis's TIME). A script
-- that Redis runs after it (the call waited in a queue or behind a stall,
-- and its caller has given up and answered 503) changes nothing and returns
-- an error beginning with DEADLINE: a 503 means not counted.
if ARGV[8] and ARGV[8] ~= '' and now > tonumber(ARGV[8]) then
  return redis.error_reply('DEADLINE script ran after the caller\'s deadline, nothing counted')
end

local floor = math.floor
local P20, P40 = 2 ^ 20, 2 ^ 40
local function int(x) return string.format('%d', x) end

-- mul returns a*b as {hi, lo} = hi*2^40 + lo, exactly, for 0 <= a, b < 2^40.
local function mul(a, b)
  local a1, a0 = floor(a / P20), a % P20
  local b1, b0 = floor(b / P20), b % P20
  local cross = a1 * b0 + a0 * b1 -- < 2^41
  local lo = a0 * b0 + (cross % P20) * P20 -- < 2^41
  return {a1 * b1 + floor(cross / P20) + floor(lo / P40), lo % P40}
end
local function add(x, y)
  local lo = x[2] + y[2]
  return {x[1] + y[1] + floor(lo / P40), lo % P40}
end
local function le(x, y) return x[1] < y[1] or (x[1] == y[1] and x[2] <= y[2]) end
-- divmod returns floor(x/d) and x mod d for 0 < d < 2^32, by long division
-- in 20-bit digits (every partial remainder stays below 2^52); the quotient
-- is exact while below 2^53, which is all the callers need.
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
local function bucket(t)
  local b = floor(t / scale)
  if b * scale > t then b = b - 1 elseif (b + 1) * scale <= t then b = b + 1 end
  return b
end

if algo == 'l' then
  -- algo.LogCheck, the sliding window log, decided here: the record hash
  -- holds c = the hits in the log, cr = created, m = the newest entry's
  -- time, h and n = the sequence numbers of the oldest entry and of the
  -- next, and one field e<seq> = "TIME:HITS" per entry, oldest first. Hits
  -- of one millisecond share an entry. Returns
  --   {now, allowed (1 or 0), count, reset_ms, retry_after_ms}
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
    local ttl = scale + tonumber(ARGV[7])
    redis.call('PEXPIRE', key, int(ttl))
    redis.call('HSET', idx, ARGV[6], '1')
    if redis.call('PTTL', idx) < ttl then redis.call('PEXPIRE', idx, int(ttl)) end
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
  local a = '0'
  if allowed then a = '1' end
  return {int(now), a, int(total), int(reset), int(retry), false, false, false}
end

local st = redis.call('HMGET', key, 'c', 'cr', 'm', 'pc', 'pcr', 'pm', 'd')
-- A record never moves back in time: a clock behind the record's last change
-- (another sidecar's clock ahead of this one's, or Redis failed over to a
-- replica whose clock is behind) decides at that last change, as if no time
-- had passed, instead of opening an earlier window and dropping the count.
-- (token's m is the TAT, which already never moves back.)
if algo ~= 't' and st[3] and tonumber(st[3]) > now then now = tonumber(st[3]) end
local out = {int(now), st[1], st[2], st[3], st[4], st[5], st[6], st[7]}
if hits == 0 then return out end

local b = bucket(now)
local cr = st[2] and tonumber(st[2])
local expireAt -- the end of the last window that can read what is written
local renew = true -- false when the write keeps the key's expiry as it is

if algo == 'f' then
  -- algo.Fixed: every hit counts, allowed or not.
  if st[1] and cr and bucket(cr) == b then
    local r = redis.pcall('HINCRBY', key, 'c', int(hits))
    if type(r) == 'table' and r.err then
      redis.call('HSET', key, 'c', '9223372036854775807')
    end
    redis.call('HSET', key, 'm', int(now))
    renew = false -- same window, same expiry
  else
    redis.call('DEL', key)
    redis.call('HSET', key, 'c', int(hits), 'cr', int(now), 'm', int(now))
  end
  expireAt = (b + 1) * scale
elseif algo == 's' then
  -- algo.Sliding: allowed iff p*(S-e) + (c+hits)*S <= limit*S; only
  -- allowed hits count. Counts stored here never exceed a limit (< 2^32).
  local e = now - b * scale
  local c, p = 0, 0
  local curOK = st[1] and cr and bucket(cr) == b
  local lastOK = st[1] and cr and bucket(cr) == b - 1 -- the stored current is now the previous
  if curOK then
    c = tonumber(st[1])
    if st[4] and st[5] and bucket(tonumber(st[5])) == b - 1 then p = tonumber(st[4]) end
  elseif lastOK then
    p = tonumber(st[1])
  end
  if c + hits > limit or not le(mul(p, scale - e), mul(limit - c - hits, scale)) then
    return out -- denied: nothing changes
  end
  if curOK then
    redis.call('HSET', key, 'c', int(c + hits), 'm', int(now))
    renew = false -- same window, same expiry
  elseif lastOK then
    redis.call('HSET', key, 'pc', st[1], 'pcr', st[2], 'pm', st[3],
      'c', int(hits), 'cr', int(now), 'm', int(now))
  else
    redis.call('DEL', key)
    redis.call('HSET', key, 'c', int(hits), 'cr', int(now), 'm', int(now))
  end
  expireAt = (b + 2) * scale
else
  -- algo.Token (GCRA): the TAT is m + n/limit; allowed iff
  -- (m-now)*limit + n + hits*S <= limit*S; then TAT += hits*S/limit.
  local m, n = now, 0
  local exists = st[1] and cr
  if exists then
    local tm, num, den = tonumber(st[3]), tonumber(st[1]), tonumber(st[7] or '0')
    if not (tm < now or (tm == now and num == 0)) then
      m = tm
      -- the fraction over this limit, rounded up (algo.tokenFrac)
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
  if hits > limit or not le(add(mul(m - now, limit), {0, n}), mul(limit - hits, scale)) then
    return out -- denied: nothing changes
  end
  local q, r = divmod(add(mul(hits, scale), {0, n}), limit)
  m, n = m + q, r
  if exists then
    redis.call('HSET', key, 'c', int(n), 'd', int(limit), 'm', int(m))
  else
    redis.call('HSET', key, 'c', int(n), 'd', int(limit), 'm', int(m), 'cr', int(now))
  end
  expireAt = m + 1
end

-- The expiry (and the index's) was set when the window's record was created;
-- only a new record, or a TAT moved on, needs it set again.
if not renew then return out end
local ttl = expireAt - now + tonumber(ARGV[7])
if ttl < 1 then ttl = 1 end
redis.call('PEXPIRE', key, int(ttl))
redis.call('HSET', idx, ARGV[6], '1')
if redis.call('PTTL', idx) < ttl then redis.call('PEXPIRE', idx, int(ttl)) end
return out
