package redisbackend

import (
	rl "github.com/raterlimiter/raterlimiter"
)

// errNoFallback is New's error for FailLocal without a Fallback: it
// matches raterlimiter.ErrInvalid.
var errNoFallback = &rl.FieldError{Field: "Fallback", Rule: "fail mode local needs a fallback limiter"}

// unavailableError is the error of FailClosed: it matches
// raterlimiter.ErrUnavailable and the cause.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string {
	return "redisbackend: redis unavailable: " + e.cause.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{rl.ErrUnavailable, e.cause} }
