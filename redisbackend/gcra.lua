-- gcra.lua: one check of a token bucket (algo.Token) or of the leaky bucket
-- as a queue (algo.Leaky), both GCRA, atomically.
--
-- KEYS[1]  the record: 4 doubles, little-endian (struct '<dddd'), m, n, d
--          and cr: the theoretical arrival time (TAT: when the bucket is
--          full again, or the queue has drained) is m + n/d ms, d being the
--          limit it was computed with; cr is when the record was created.
-- ARGV[1]  8 doubles, little-endian: scale, limit, hits, now (-1: Redis's
--          TIME), deadline (-1: none), TTL slack in ms (docs/redis.md), the
--          queue's length (-1: a token bucket) and the longest delay in ms
--          (0: none)
--
-- Returns the record as it was before the check (nil: none), after the time
-- decided at (8 bytes, packed alike) when that was Redis's TIME. The client
-- decides from it with algo.Token or algo.Leaky, and knows from the decision
-- what the script wrote; the script applies the change that function makes:
-- with x = (m-now)*limit + n, how far the TAT reaches past now times the
-- limit, hits are let in iff hits <= limit and x <= room, room being
-- (limit-hits)*scale for a token bucket (the bucket holds the hits), and for
-- a queue queue*scale, or maxdelay*limit when set and smaller (a place in
-- the queue); then the TAT moves by hits*scale/limit.
--
-- Cost: two redis.calls (GET, then SETRANGE of the TAT while the record's
-- expiry stays, SET PX when it moves).
--
-- Arithmetic: Lua numbers are doubles, exact for integers below 2^53. Every
-- factor is below 2^41 (validation keeps a queue's wait within ten years),
-- but products such as hits*scale reach 2^72: below 2^52 they are computed
-- directly, above it as two limbs hi*2^40 + lo. The limb helpers are
-- defined in the branch that needs them: a function defined at the top
-- would be made anew on every call, the fast ones too.
local queue, maxdelay = struct.unpack('<dd', ARGV[1], 49)
local v = redis.call('GET', key)
local floor = math.floor
local P = 2 ^ 52
local tm, num, den, cr = 0, 0, 0, now
local m, n = now, 0 -- the TAT as m + n/limit; a fresh record's is now
if v then
  tm, num, den, cr = struct.unpack('<dddd', v)
  if tm > now or (tm == now and num ~= 0) then
    m = tm
    -- The stored fraction over this limit, rounded up (algo.tokenFrac).
    if num == 0 then
      n = 0
    elseif den == 0 or num >= den or limit == 0 then
      n = limit
    elseif den == limit then
      n = num
    elseif num * limit < P then
      local x = num * limit
      n = floor(x / den)
      if n * den > x then n = n - 1 elseif (n + 1) * den <= x then n = n + 1 end
      if n * den < x then n = n + 1 end
    else
      -- ceil(num*limit/den) by long division in 20-bit digits.
      local p1, p0 = floor(num / 2 ^ 20), num % 2 ^ 20
      local q1, q0 = floor(limit / 2 ^ 20), limit % 2 ^ 20
      local cross = p1 * q0 + p0 * q1
      local lo = p0 * q0 + (cross % 2 ^ 20) * 2 ^ 20
      local hi = p1 * q1 + floor(cross / 2 ^ 20) + floor(lo / 2 ^ 40)
      lo = lo % 2 ^ 40
      local digits = {floor(hi / 2 ^ 20), hi % 2 ^ 20, floor(lo / 2 ^ 20), lo % 2 ^ 20}
      local q, r = 0, 0
      for i = 1, 4 do
        r = r * 2 ^ 20 + digits[i]
        local qd = floor(r / den)
        if qd * den > r then qd = qd - 1 end
        if (qd + 1) * den <= r then qd = qd + 1 end
        r = r - qd * den
        q = q * 2 ^ 20 + qd
      end
      n = q
      if r > 0 then n = n + 1 end
    end
    if n == limit and num ~= 0 then m, n = m + 1, 0 end
  end
end
local out = v
if timed then out = struct.pack('<d', now) .. (v or '') end
if hits == 0 or hits > limit then return out end
-- Allowed iff x = (m-now)*limit + n <= room (see the top); then the TAT
-- moves to m + (n + hits*scale)/limit.
if queue < 0 then queue, maxdelay = limit - hits, 0 end -- a token bucket: room for the hits
local d = m - now
local x, room, bound, t = d * limit + n, queue * scale, maxdelay * limit, hits * scale + n
local q, r
if x < P and room < P and bound < P and t < P then
  if maxdelay > 0 and bound < room then room = bound end
  if x > room then return out end -- no room
  q = floor(t / limit)
  if q * limit > t then q = q - 1 elseif (q + 1) * limit <= t then q = q + 1 end
  r = t - q * limit
else
  -- Exactly, as hi*2^40 + lo.
  local function mul(p, s)
    local p1, p0 = floor(p / 2 ^ 20), p % 2 ^ 20
    local s1, s0 = floor(s / 2 ^ 20), s % 2 ^ 20
    local cross = p1 * s0 + p0 * s1
    local lo = p0 * s0 + (cross % 2 ^ 20) * 2 ^ 20
    return p1 * s1 + floor(cross / 2 ^ 20) + floor(lo / 2 ^ 40), lo % 2 ^ 40
  end
  local function add(h1, l1, h2, l2)
    local lo = l1 + l2
    return h1 + h2 + floor(lo / 2 ^ 40), lo % 2 ^ 40
  end
  local xh, xl = mul(d, limit)
  xh, xl = add(xh, xl, 0, n)
  local rh, rl = mul(queue, scale)
  if maxdelay > 0 then
    local bh, bl = mul(maxdelay, limit)
    if bh < rh or (bh == rh and bl < rl) then rh, rl = bh, bl end
  end
  if xh > rh or (xh == rh and xl > rl) then return out end
  -- (hits*scale + n) / limit by long division; the quotient is at most
  -- scale+1, as hits <= limit.
  local th, tl = mul(hits, scale)
  th, tl = add(th, tl, 0, n)
  local digits = {floor(th / 2 ^ 20), th % 2 ^ 20, floor(tl / 2 ^ 20), tl % 2 ^ 20}
  q, r = 0, 0
  for i = 1, 4 do
    r = r * 2 ^ 20 + digits[i]
    local qd = floor(r / limit)
    if qd * limit > r then qd = qd - 1 end
    if (qd + 1) * limit <= r then qd = qd + 1 end
    r = r - qd * limit
    q = q * 2 ^ 20 + qd
  end
end
local tat = m + q
-- The record expires at the TAT (the bucket full again, the queue drained),
-- rounded up to a step of G ms: the TTL is set again only when that moves,
-- and kept while it stays.
local G = floor(scale / 8)
if G < 1000 then G = 1000 end
local expires = (floor(tat / G) + 1) * G
if v and den == limit and (floor(tm / G) + 1) * G == expires then
  -- Only the TAT changes; SETRANGE keeps the TTL.
  redis.call('SETRANGE', key, '0', struct.pack('<dd', tat, r))
  return out
end
redis.call('SET', key, struct.pack('<dddd', tat, r, limit, cr), 'PX', string.format('%d', expires - now + slack))
return out
