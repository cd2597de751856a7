package actor

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
