package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errShed is the cause of calls refused before reaching Redis: too many
// waiting, or too little time left to wait.
var errShed = errors.New("redisbackend: overloaded: too many calls waiting for redis")

// minBudget is the least time a call must have left to be worth sending.
const minBudget = time.Millisecond

// admit waits for a slot among Config.MaxInFlight, as long as ctx allows;
// a call beyond maxQueued waiting, or with less than minBudget left, is
// shed at once with an error matching raterlimiter.ErrUnavailable (nothing
// sent, nothing counted).
func (b *Backend) admit(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < minBudget {
		return &unavailableError{cause: fmt.Errorf("%w (deadline too close)", errShed)}
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	if b.queued.Add(1) > maxQueued {
		b.queued.Add(-1)
		return &unavailableError{cause: errShed}
	}
	defer b.queued.Add(-1)
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &unavailableError{cause: fmt.Errorf("%w: %w", errShed, ctx.Err())}
	}
}

func (b *Backend) release() { <-b.slots }

// callContext bounds one call: the caller's deadline, shortened to
// Config.Timeout when that is set, or defaultCallTimeout without either.
func (b *Backend) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.cfg.Timeout > 0 {
		return context.WithTimeout(ctx, b.cfg.Timeout)
	}
	if _, ok := ctx.Deadline(); !ok {
		return context.WithTimeout(ctx, defaultCallTimeout)
	}
	return context.WithCancel(ctx)
}
