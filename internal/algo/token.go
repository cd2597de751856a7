package algo

import (
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Token is GCRA (the generic cell rate algorithm): limit hits per scale with
// a burst of limit. Its state is the theoretical arrival time TAT: the
// instant at which the bucket would be full again. A hit costs the emission
// interval T = S/limit ms (S the scale), which is fractional, so the TAT is
// kept exactly as m + n/limit (see Record), and every comparison below is
// multiplied by limit to stay in integers.
//
// With D = max(TAT, now) - now (how far the bucket is from full) and
// k = D*limit (an integer), hits are allowed iff
//
//	D + hits*T <= S,  i.e.  k + hits*S <= limit*S    (128-bit products)
//
// and then TAT' = max(TAT, now) + hits*T. A full bucket takes limit hits at
// once; it refills one hit every T. Only allowed hits are counted; a denied
// check or a peek (hits = 0) writes nothing. A limit of 0 denies every hit.
//
// The decision reports:
//
//   - Count: limit minus the whole tokens left, ceil(k'/S) with k' = D'*limit
//     after the decision, and Remaining = max(0, limit-Count): exactly the
//     hits a check could be allowed right now.
//   - ResetMS: the whole ms until the bucket is full again, ceil(D').
//   - RetryAfterMS (when denied): with x = limit-hits, the earliest instant t
//     with (TAT-t)*limit <= x*S, i.e. t = m - floor((x*S-n)/limit) when
//     x*S >= n, else t = m+1; rounded up to whole ms, so waiting exactly
//     RetryAfterMS passes and 1 ms less fails. Hits above the limit never
//     pass: RetryAfterMS is then max(ResetMS, 1).
//
// When the limit of a request differs from the one the stored fraction was
// computed with, the fraction is converted to the new denominator rounding
// the TAT up (never lenient): n' = ceil(n*limit'/limit). The state is thus
// "how far from full", which each limit reads as its own share of S.
func Token(st Record, ok bool, now int64, r millis.Request) (millis.Decision, Record, bool) {
	return gcra(st, ok, now, r, false)
}

// gcra decides r by the TAT st holds: a token bucket's (queue false), whose
// room for r is what its hits leave of a full bucket, x*S with x =
// limit-hits, or a queue's (Leaky), whose room is Queue*S, or
// MaxDelayMS*limit when set and smaller. Hits are allowed iff hits <=
// limit and k <= room; the decision is the one Token and Leaky document.
func gcra(st Record, ok bool, now int64, r millis.Request, queue bool) (millis.Decision, Record, bool) {
	lim, s, h := uint64(r.Limit), uint64(r.Scale), uint64(r.Hits)
	if !ok {
		st = Record{Created: now}
	}
	// The TAT, m + n/lim; a fresh bucket's (an empty queue's) is now.
	m, n := tatOf(st, ok, now, lim)
	k := mul(uint64(m-now), lim).add(u128{0, n}) // D*lim
	var room u128                                // times lim, how far the TAT may stand ahead of now
	switch {
	case queue:
		room = mul(uint64(max(r.Queue, 0)), s)
		if r.MaxDelayMS > 0 {
			if b := mul(uint64(r.MaxDelayMS), lim); b.cmp(room) < 0 {
				room = b
			}
		}
	case h <= lim:
		room = mul(lim-h, s)
	}
	allowed := h <= lim && k.cmp(room) <= 0
	write := allowed && h > 0
	var delay uint64
	if write {
		if queue {
			delay = k.divCeil(lim)
		}
		m, n, k = advanceTAT(&st, m, n, k, h, s, lim)
	}
	count := k.divCeil(s)
	d := millis.Decision{
		Allowed: allowed,
		Count:   int64(min(count, 1<<62)),
		Limit:   r.Limit,
		ResetMS: m - now,
		DelayMS: int64(min(delay, 1<<62)),
		Now:     now,
	}
	if n > 0 {
		d.ResetMS++
	}
	if count < lim {
		d.Remaining = int64(lim - count)
	}
	if !allowed {
		d.RetryAfterMS = max(d.ResetMS, 1) // hits above the limit: never
		if h <= lim {
			// The earliest t with (TAT-t)*lim <= room.
			at := m + 1
			if room.cmp(u128{0, n}) >= 0 {
				q, _ := room.sub(u128{0, n}).divMod(lim)
				at = m - int64(q)
			}
			d.RetryAfterMS = at - now
		}
	}
	return d, st, write
}

// tokenFrac returns the stored TAT's fraction as a numerator over lim,
// converting it from the limit it was stored with and rounding up. A fraction
// stored over 0, or not below its denominator, cannot come from Token; it is
// read as a whole ms (lim/lim), which rounds the TAT up.
func tokenFrac(count int64, lim uint64) uint64 {
	den, num := uint64(count)>>32, uint64(count)&(1<<32-1)
	if num == 0 {
		return 0
	}
	if den == 0 || num >= den || lim == 0 {
		return lim
	}
	return mul(num, lim).divCeil(den)
}

// tatOf returns the TAT st holds, as m + n/lim: now for a missing record,
// or one whose TAT has passed (a full bucket, an empty queue).
func tatOf(st Record, ok bool, now int64, lim uint64) (m int64, n uint64) {
	if !ok || tokenExpired(st, now) {
		return now, 0
	}
	m, n = st.Modified, tokenFrac(st.Count, lim)
	if n == lim && uint32(st.Count) != 0 {
		// The fraction rounded up to a whole ms (always so for limit 0).
		m, n = m+1, 0
	}
	return m, n
}

// advanceTAT moves the TAT m + n/lim, and k = (TAT-now)*lim with it, by
// h hits of S/lim ms each, carried into whole ms, and stores it in st. The
// quotient is at most S+1 as the check passed.
func advanceTAT(st *Record, m int64, n uint64, k u128, h, s, lim uint64) (int64, uint64, u128) {
	q, rem := mul(h, s).add(u128{0, n}).divMod(lim)
	m, n = m+int64(q), rem
	st.Count = int64(lim<<32 | n)
	st.Modified = m
	return m, n, k.add(mul(h, s))
}

// tokenExpired reports whether the TAT has passed, so the state reads as a
// fresh one: Modified < now, or Modified == now with no fraction.
func tokenExpired(rec Record, now int64) bool {
	return rec.Modified < now || rec.Modified == now && uint32(rec.Count) == 0
}
