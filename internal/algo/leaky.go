package algo

import (
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

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
func Leaky(st Record, ok bool, now int64, r millis.Request) (millis.Decision, Record, bool) {
	return gcra(st, ok, now, r, true)
}
