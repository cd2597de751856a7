// Package degrade lets the sidecar learn which answers a backend made
// without its shared state (the Redis backend under FailOpen or
// FailLocal), to say so in its answers (X-RateLimit-Degraded, /healthz),
// while every Limiter's own methods answer such checks as a library user
// expects: the decision and a nil error, reported through the backend's
// OnDegraded callback.
//
// A backend that degrades registers a view of itself (Register) whose
// checks return the degraded decisions inside an *Error instead; Strict
// gives that view to the sidecar.
package degrade

import (
	"errors"
	"sync"

	rl "github.com/raterlimiter/raterlimiter"
)

// Error comes with decisions made without the shared state: usable
// answers, in order, and the name of the fail mode that made them. It
// matches rl.ErrUnavailable, so code that does not look for it fails
// closed.
type Error struct {
	// Mode is the fail mode's name: "open" or "local".
	Mode string
	// Decisions are the answers, one per request, in order.
	Decisions []rl.Decision
	// Err is why the shared state did not answer.
	Err error
}

func (e *Error) Error() string {
	return "raterlimiter: answered fail-" + e.Mode + " without the shared state: " + e.Err.Error()
}

// Unwrap returns rl.ErrUnavailable and the cause.
func (e *Error) Unwrap() []error { return []error{rl.ErrUnavailable, e.Err} }

// Decisions returns the decisions err carries, if it is (or wraps) an
// *Error.
func Decisions(err error) (mode string, ds []rl.Decision, ok bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Mode, e.Decisions, true
	}
	return "", nil, false
}

var (
	mu    sync.Mutex
	views []func(rl.Limiter) (rl.Limiter, bool)
)

// Register adds view, which returns the strict view of a limiter it knows
// (its checks fail with an *Error when degraded), or false.
func Register(view func(rl.Limiter) (rl.Limiter, bool)) {
	mu.Lock()
	defer mu.Unlock()
	views = append(views, view)
}

// Strict returns the view of l whose degraded answers come as an *Error,
// or l itself when no registered backend knows it (it never degrades).
func Strict(l rl.Limiter) rl.Limiter {
	mu.Lock()
	defer mu.Unlock()
	for _, v := range views {
		if s, ok := v(l); ok {
			return s
		}
	}
	return l
}
