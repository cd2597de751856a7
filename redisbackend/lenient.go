package redisbackend

import (
	"context"
	"errors"

	rl "github.com/raterlimiter/raterlimiter"
)

// IgnoreDegraded wraps l so that checks answered without Redis (FailOpen,
// FailLocal) return their decisions with a nil error instead of a
// *DegradedError: for callers that cannot tell the caller so (an HTTP API
// without a header for it), which would otherwise fail closed on the error.
// Config.OnDegraded still counts them.
func IgnoreDegraded(l rl.Limiter) rl.Limiter { return lenient{l} }

type lenient struct{ rl.Limiter }

func (l lenient) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	d, err := l.Limiter.CheckRate(ctx, r)
	var dg *DegradedError
	if errors.As(err, &dg) {
		return d, nil
	}
	return d, err
}

func (l lenient) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	ds, err := l.Limiter.CheckRates(ctx, rs)
	var dg *DegradedError
	if errors.As(err, &dg) {
		return dg.Decisions, nil
	}
	return ds, err
}
