package actor

import (
	"context"

	"github.com/raterlimiter/raterlimiter/internal/ms"
)

// SetHook installs fn to run on the actor's goroutine before each message.
// It must be called before the first message.
func (a *Actor) SetHook(fn func(r any)) {
	a.hook = func(m *msg) { fn(m.req) }
}

// Denials returns how many denials the fast path holds.
func (a *Actor) Denials() int {
	n := 0
	a.denied.m.Range(func(any, any) bool { n++; return true })
	return n
}

// MaxDenials is maxDenials, for tests.
const MaxDenials = maxDenials

// The actor's own errors and clock defaults, for tests.
var (
	ErrPanicked = errPanicked
	ErrExpired  = errExpired
)

const DefaultClockTolerance = defaultClockTolerance

// DecideInto is decideInto, for tests.
func (a *Actor) DecideInto(ctx context.Context, rs []ms.Request, out []ms.Decision) error {
	return a.decideInto(ctx, rs, out)
}
