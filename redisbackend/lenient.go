package redisbackend

import (
	"context"
	"errors"
	"github.com/raterlimiter/raterlimiter/internal/check"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/degrade"
)

// withDecisions sets the decisions of a *degrade.Error.
func withDecisions(err error, ds []rl.Decision) error {
	var e *degrade.Error
	if errors.As(err, &e) {
		e.Decisions = ds
	}
	return err
}

// lenient drops the error of decisions made by the fail mode: a caller of
// CheckRate gets them as any other (Config.OnDegraded has reported them).
func lenient(err error) error {
	var e *degrade.Error
	if errors.As(err, &e) {
		return nil
	}
	return err
}

// strict is the sidecar's view of a Backend (degrade.Strict): its checks
// return the fail mode's decisions inside a *degrade.Error, which the
// sidecar answers with X-RateLimit-Degraded.
type strict struct{ *Backend }

func (s strict) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return s.checkRate(ctx, r)
}

func (s strict) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	return s.checkRates(ctx, rs)
}

func (s strict) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return check.Wait(ctx, s, r)
}

// Ping is the health check the sidecar's /healthz asks of the backend
// (redisctl.Backend.Ping).
func (s strict) Ping(ctx context.Context) error { return s.ping(ctx) }

func init() {
	degrade.Register(func(l rl.Limiter) (rl.Limiter, bool) {
		if b, ok := l.(*Backend); ok {
			return strict{b}, true
		}
		return nil, false
	})
}
