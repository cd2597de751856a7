package raterlimiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// maxWaitBound is the longest MaxDelay a request may carry: ten years, as
// Scale.
const maxWaitBound = 315_360_000_000 * time.Millisecond

// Wait decides r on l and waits for capacity, as x/time/rate's Wait: it
// returns once r is allowed, or with an error once ctx ends.
//
//   - Allowed at once: Wait returns the decision.
//   - Allowed with a delay (algo Leaky, whose queue holds r's place): Wait
//     sleeps Decision.Delay, then returns. A delay that would outlast ctx's
//     deadline is refused before it takes a place in the queue
//     (Request.MaxDelay is set from the deadline).
//   - Denied: Wait sleeps until Decision.RetryAfter has passed and checks
//     again, until r is allowed. To that sleep it adds a random jitter of
//     up to Scale/Limit (the share of the window one hit takes, at least a
//     millisecond), so that the waiters of one window come back spread over
//     the time the limit lets one of them in, not all at the window's first
//     millisecond to be denied again. Every check Wait makes counts as any
//     other: with Fixed, denied ones too.
//
// When the next chance comes after ctx's deadline, Wait returns at once with
// the last decision and an error that matches context.DeadlineExceeded,
// without sleeping in vain. If ctx ends during a sleep, it returns early
// with the last decision and ctx's error (a Leaky place in the queue, once
// taken, stays taken). A request that can never be allowed (Hits more than
// Limit) fails at once with an error matching ErrInvalid, as does an invalid
// one; an error from l is returned as it is.
//
// The memory limiter, the client and the Redis backend each have a Wait
// method that is this function.
func Wait(ctx context.Context, l Limiter, r Request) (Decision, error) {
	return wait(ctx, l, r, sleepCtx, rand.Int64N)
}

// wait is Wait with its sleep and its randomness given (a test's).
func wait(ctx context.Context, l Limiter, r Request, sleep func(context.Context, time.Duration) error, randN func(int64) int64) (Decision, error) {
	if hits := max(r.Hits, 1); hits > r.Limit && !r.Peek {
		return Decision{}, &FieldError{Field: "Hits", Rule: strconv.FormatInt(hits, 10) + " is more than Limit " +
			strconv.FormatInt(r.Limit, 10) + ": Wait would never return"}
	}
	for {
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		q := r
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline {
			left := min(time.Until(dl).Truncate(time.Millisecond), maxWaitBound)
			if left < time.Millisecond {
				return Decision{}, fmt.Errorf("raterlimiter: Wait: the context's deadline is less than 1ms away; nothing counted: %w", context.DeadlineExceeded)
			}
			if q.MaxDelay == 0 || q.MaxDelay > left {
				q.MaxDelay = left
			}
		}
		d, err := l.CheckRate(ctx, q)
		switch {
		case err != nil:
			return d, err
		case d.Allowed:
			if d.Delay <= 0 {
				return d, nil
			}
			return d, sleep(ctx, d.Delay)
		}
		pause := max(d.RetryAfter, time.Millisecond) + jitter(r, randN)
		if hasDeadline && time.Until(dl) < pause {
			return d, fmt.Errorf("raterlimiter: Wait: the next chance, in %v, comes after the context's deadline: %w",
				max(d.RetryAfter, time.Millisecond), context.DeadlineExceeded)
		}
		if err := sleep(ctx, pause); err != nil {
			return d, err
		}
	}
}

// jitter is a random duration from 0 to the share of r's window one hit
// takes (Scale/Limit, at least a millisecond), in whole milliseconds.
func jitter(r Request, randN func(int64) int64) time.Duration {
	share := r.Scale.Milliseconds()
	if r.Limit > 0 {
		share /= r.Limit
	}
	return time.Duration(randN(max(share, 1)+1)) * time.Millisecond
}

// sleepCtx sleeps d, or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
