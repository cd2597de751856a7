package algo

import rl "github.com/raterlimiter/raterlimiter"

// Leaky is the leaky bucket as a queue: GCRA whose theoretical arrival
// time TAT is the instant the queue drains. One hit leaves every emission
// interval T = S/limit ms (S the scale). With D = max(TAT, now) - now, the
// wait before a new check's turn, a check of hits is allowed iff
//
//	hits <= limit  and  D <= room,  room = Queue*T (and MaxDelayMS, if set)
//
// that is, iff at most Queue hits' worth of time is ahead of it: D = 0
// passes at once, D <= Queue*T waits its turn, DelayMS = ceil(D). An
// allowed check moves the TAT by hits*T, so the queue leaves at the rate
// whatever the wait. As with Token every time is kept exactly, as
// m + n/limit (see Record), and compared multiplied by limit, in 128 bits.
// Only allowed hits are counted; a denied check or a peek (hits = 0)
// writes nothing; a peek is allowed iff a check would find room. A limit
// of 0 denies every hit.
//
// The decision reports:
//
//   - Count: the hits queued after the decision, waiting or leaving,
//     ceil(D'*limit/S) with D' = TAT' - now (the formula of Token's count).
//   - ResetMS: the whole ms until the queue has drained, ceil(D').
//   - DelayMS (when allowed with hits > 0): ceil(D), the wait until its
//     turn; 0 otherwise.
//   - RetryAfterMS (when denied): the earliest instant t with
//     TAT - t <= room, rounded up to whole ms, so waiting exactly
//     RetryAfterMS passes and 1 ms less fails. Hits above the limit never
//     pass: RetryAfterMS is then max(ResetMS, 1).
//
// The record is Token's: a check with another limit converts the stored
// fraction rounding the TAT up. The queue's length is not stored: it only
// decides who is let in.
func Leaky(st Record, ok bool, now int64, r rl.Request) (rl.Decision, Record, bool) {
	lim, s, h := uint64(r.Limit), uint64(r.Scale), uint64(r.Hits)
	if !ok {
		st = Record{Created: now}
	}
	// The TAT, m + n/lim; an empty queue's is now.
	m, n := tatOf(st, ok, now, lim)
	k := mul(uint64(m-now), lim).add(u128{0, n}) // D*lim
	// room*lim: Queue*S, at most 2^16 * 2^39, or less with a bound on the
	// delay.
	room := mul(uint64(max(r.Queue, 0)), s)
	if r.MaxDelayMS > 0 {
		if b := mul(uint64(r.MaxDelayMS), lim); b.cmp(room) < 0 {
			room = b
		}
	}
	allowed := h <= lim && k.cmp(room) <= 0
	write := allowed && h > 0
	var delay uint64
	if write {
		delay = k.divCeil(lim)
		m, n, k = advanceTAT(&st, m, n, k, h, s, lim)
	}
	count := k.divCeil(s)
	d := rl.Decision{
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
			// The earliest t with (TAT-t)*lim <= room*lim: room is below
			// 2^56, so it fits a word.
			at := m + 1
			if x := room.lo; room.hi == 0 && x >= n {
				at = m - int64((x-n)/lim)
			}
			d.RetryAfterMS = at - now
		}
	}
	return d, st, write
}
