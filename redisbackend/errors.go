package redisbackend

import (
	"errors"

	rl "github.com/raterlimiter/raterlimiter"
)

var (
	// ErrCircuitOpen is the cause given while the circuit is open: Redis
	// failed recently and was not asked.
	ErrCircuitOpen = errors.New("redisbackend: circuit open, redis not asked")
	// ErrNoFallback is returned by New for FailLocal without a Fallback.
	ErrNoFallback = errors.New("redisbackend: fail mode local needs a fallback limiter")
)

// unavailableError is the error of FailClosed: it matches
// raterlimiter.ErrUnavailable and the cause.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string {
	return "redisbackend: redis unavailable: " + e.cause.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{rl.ErrUnavailable, e.cause} }

// DegradedError comes with decisions made without Redis (FailOpen, FailLocal):
// the decisions are usable, and the error says they were not shared with the
// other users of the Redis. It matches raterlimiter.ErrUnavailable and the
// cause, so a caller that does not know it fails closed. It is a
// raterlimiter.Degraded: a caller that may not import this package (the
// HTTP API) finds it with raterlimiter.DegradedDecisions.
type DegradedError struct {
	// Mode is FailOpen or FailLocal.
	Mode FailMode
	// Decisions are the answers, one per request, in order. In a batch of
	// which Redis answered part, Redis's answers are among them.
	Decisions []rl.Decision
	// Err is why Redis was not used.
	Err error
}

// Error says that the decisions were made without Redis, by which fail
// mode, and why.
func (e *DegradedError) Error() string {
	return "redisbackend: answered fail-" + e.Mode.String() + " without redis: " + e.Err.Error()
}

// Unwrap returns raterlimiter.ErrUnavailable and the cause.
func (e *DegradedError) Unwrap() []error { return []error{rl.ErrUnavailable, e.Err} }

// Degraded returns the fail mode's name ("open" or "local") and the
// decisions, for callers that match the error by this method.
func (e *DegradedError) Degraded() (string, []rl.Decision) { return e.Mode.String(), e.Decisions }

var _ rl.Degraded = (*DegradedError)(nil)

// withDecisions sets the public decisions of err, if it is a
// *DegradedError.
func withDecisions(err error, ds []rl.Decision) error {
	var dg *DegradedError
	if errors.As(err, &dg) {
		dg.Decisions = ds
	}
	return err
}
