package actor

// SetHook installs fn to run on the actor's goroutine before each message.
// It must be called before the first message.
func (a *Actor) SetHook(fn func(r any)) {
	a.hook = func(m *msg) { fn(m.req) }
}

// The actor's own errors and clock defaults, for tests.
var (
	ErrPanicked = errPanicked
	ErrExpired  = errExpired
)

const DefaultClockTolerance = clockTolerance
