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
