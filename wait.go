package raterlimiter

import (
	"context"
	"fmt"
	"time"
)

// Waiter is a Checker that can also wait its turn: the embedded limiter,
// the sidecar's client and the Redis backend implement it.
type Waiter interface {
	// Wait decides r as CheckRate does, bounding the delay by the
	// context's deadline, and sleeps the allowed decision's Delay (see
	// the package function Wait).
	Wait(ctx context.Context, r Request) (Decision, error)
}

// ErrDeadlineTooClose is returned by Wait when the context's deadline is
// less than a millisecond away: no delay fits, and nothing is counted. It
// matches context.DeadlineExceeded.
var ErrDeadlineTooClose = fmt.Errorf("raterlimiter: Wait: the context's deadline is less than 1 ms away; nothing counted: %w", context.DeadlineExceeded)

// Wait decides r on c and, when it is allowed with a delay (Leaky's
// Decision.Delay), sleeps that long before returning, so that the caller
// goes on at its turn, as x/time/rate's Wait and nginx's limit_req without
// nodelay.
//
// A context with a deadline bounds the delay (Request.MaxDelay, the
// smaller of the two when r sets one): a check whose delay would outlast
// the deadline is denied before it takes a place in the queue, and Wait
// returns that denied decision with a nil error, as CheckRate would. A
// denied decision, an error, or an allowed one with no delay return at
// once. If the context ends during the sleep, Wait returns early with the
// decision and the context's error: the place in the queue was taken and
// stays taken.
//
// The deadline is read in whole milliseconds, rounded down; one less than
// a millisecond away fails with ErrDeadlineTooClose and counts nothing.
func Wait(ctx context.Context, c Checker, r Request) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl).Truncate(time.Millisecond)
		if left < time.Millisecond {
			return Decision{}, ErrDeadlineTooClose
		}
		left = min(left, MaxScale)
		if r.MaxDelay == 0 || r.MaxDelay > left {
			r.MaxDelay = left
		}
	}
	d, err := c.CheckRate(ctx, r)
	if err != nil || !d.Allowed || d.Delay <= 0 {
		return d, err
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		return d, ctx.Err()
	}
}
