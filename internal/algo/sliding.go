package algo

import (
	"math/bits"

	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Sliding is Cloudflare's two-window weighted estimate. It reads the record
// of the current window (cur, present when ok) and of the window before it
// (prev, present when prevOK) and estimates the hits of the last scale ms as
//
//	est = p*(S-e)/S + c
//
// where S is the scale, e = now - start of the current window (0 <= e < S),
// p the previous window's count and c the current one's. The hits are allowed
// iff est + hits <= limit, decided exactly in integers:
//
//	p*(S-e) + (c+hits)*S <= limit*S    (128-bit products: p*S reaches 2^70)
//
// Only allowed hits are counted: an allowed check with hits > 0 adds them to
// the current window's record (created with Created = now when absent); a
// denied check or a peek (hits = 0) writes nothing.
//
// The decision reports:
//
//   - Count: the estimate after the decision rounded UP, c' + ceil(p*(S-e)/S),
//     so that Remaining = max(0, limit-Count) is exactly the number of hits a
//     check could be allowed right now (an estimate of 4.2 counts 5).
//   - ResetMS: the time until the current window ends, S - e.
//   - RetryAfterMS (when denied): the whole milliseconds until the earliest
//     instant at which the same request is allowed with no other traffic.
//     With no traffic the estimate never rises (it falls as prev's weight
//     decays, and at the window's end c becomes the previous count at full
//     weight, so it is continuous there), so that instant is a threshold:
//     waiting exactly RetryAfterMS passes, 1 ms less fails. With x = limit-hits:
//     if c <= x, it lies in the current window at e* = ceil((p-(x-c))*S/p);
//     otherwise in the next window at e** = ceil((c-x)*S/c) (e* or e** equal
//     to S mean the start of the window after). Hits above the limit never
//     pass: RetryAfterMS is then max(ResetMS, 1).
//
// Counts read from records are taken as 0 when negative and at most 2^62, so
// no arithmetic overflows; checks never store a count above limit.
func Sliding(cur Record, ok bool, prev Record, prevOK bool, now int64, r millis.Request) (millis.Decision, Record, bool) {
	start := Bucket(now, r.Scale) * r.Scale
	s := uint64(r.Scale)
	e := uint64(now - start)
	lim, h := uint64(r.Limit), uint64(r.Hits)
	var c, p uint64
	if ok {
		c = countOf(cur.Count)
	} else {
		cur = Record{Created: now}
	}
	if prevOK {
		p = countOf(prev.Count)
	}
	pw := mul(p, s-e) // the previous window's weighted count, times S
	allowed := pw.add(mul(c+h, s)).cmp(mul(lim, s)) <= 0
	write := allowed && h > 0
	if write {
		c += h
		cur.Count = int64(c)
		cur.Modified = now
	}
	count := c + pw.divCeil(s)
	d := millis.Decision{
		Allowed: allowed,
		Count:   int64(count),
		Limit:   r.Limit,
		ResetMS: int64(s - e),
		Now:     now,
	}
	if count < lim {
		d.Remaining = int64(lim - count)
	}
	if !allowed {
		d.RetryAfterMS = d.ResetMS
		if h <= lim {
			x := lim - h  // room left for what is already counted
			var at uint64 // the instant, as ms from start
			if c <= x {
				// Denied although c fits: p*(S-e') <= (x-c)*S, i.e.
				// p*e' >= (p-(x-c))*S; p > x-c since the check failed.
				at = mul(p-(x-c), s).divCeil(p)
			} else {
				// Not before the next window, where c weighs as prev:
				// c*(S-e'') <= x*S, i.e. c*e'' >= (c-x)*S.
				at = s + mul(c-x, s).divCeil(c)
			}
			d.RetryAfterMS = int64(at - e)
		}
	}
	return d, cur, write
}

// countOf reads a stored count, kept within [0, 2^62] so sums and 128-bit
// products cannot overflow.
func countOf(n int64) uint64 {
	return uint64(min(max(n, 0), 1<<62))
}

// u128 is an unsigned 128-bit integer, for products of a count and a scale.
type u128 struct{ hi, lo uint64 }

func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, carry)
	return u128{hi, lo}
}

// sub returns x-y; x must not be less than y.
func (x u128) sub(y u128) u128 {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, borrow)
	return u128{hi, lo}
}

func (x u128) cmp(y u128) int {
	switch {
	case x.hi < y.hi:
		return -1
	case x.hi > y.hi:
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

// divMod returns floor(x/d) and x mod d, the quotient saturating at 2^64-1.
// d must not be 0.
func (x u128) divMod(d uint64) (q, r uint64) {
	if x.hi >= d {
		_, r = bits.Div64(x.hi%d, x.lo, d)
		return 1<<64 - 1, r
	}
	return bits.Div64(x.hi, x.lo, d)
}

// divCeil returns ceil(x/d), saturating at 2^64-1. d must not be 0.
func (x u128) divCeil(d uint64) uint64 {
	q, r := x.divMod(d)
	if r != 0 && q != 1<<64-1 {
		q++
	}
	return q
}
