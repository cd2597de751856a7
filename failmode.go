package raterlimiter

import "strconv"

// FailMode is what a limiter that relies on another process (the Redis
// backend on Redis, the client on its sidecar) answers when that process
// does not. The zero value is FailClosed.
type FailMode uint8

const (
	// FailClosed fails the check with an error matching ErrUnavailable.
	FailClosed FailMode = iota
	// FailOpen allows the check: Allowed, Count 0, Remaining = Limit, with
	// a nil error; the backend's OnDegraded callback reports it.
	FailOpen
	// FailLocal decides with a limiter of this process alone (the Redis
	// backend's fallback): a limit per process rather than a shared one,
	// with a nil error; OnDegraded reports it as FailOpen.
	FailLocal
)

var failModeNames = [...]string{FailClosed: "closed", FailOpen: "open", FailLocal: "local"}

// String returns "closed", "open" or "local".
func (m FailMode) String() string {
	if int(m) < len(failModeNames) {
		return failModeNames[m]
	}
	return "failmode(" + strconv.Itoa(int(m)) + ")"
}

// DegradedEvent reports checks a limiter answered by its fail mode,
// without the process or store it relies on (the sidecar for the client,
// Redis for the Redis backend). Those checks return their decisions with a
// nil error, as if decided as usual; a Config's OnDegraded callback, the
// same on every such backend, is how a caller learns of them.
type DegradedEvent struct {
	// Mode is the fail mode that answered: FailOpen or FailLocal (the
	// Redis backend also reports FailClosed, whose checks fail with an
	// error as well).
	Mode FailMode
	// Checks is how many checks it answered.
	Checks int
	// Err is why the backend did not answer (it matches ErrUnavailable).
	Err error
}
