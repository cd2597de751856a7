package raterlimiter

import (
	"errors"
	"strconv"
)

// FailMode is what a limiter that relies on another process (the Redis
// backend on Redis, the client on its sidecar) answers when that process
// does not. The zero value is FailClosed.
type FailMode uint8

const (
	// FailClosed fails the check with an error matching ErrUnavailable.
	FailClosed FailMode = iota
	// FailOpen allows the check: Allowed, Count 0, Remaining = Limit.
	FailOpen
	// FailLocal decides with a limiter of this process alone (the Redis
	// backend's fallback): a limit per process rather than a shared one.
	FailLocal
)

// String returns "closed", "open" or "local".
func (m FailMode) String() string {
	switch m {
	case FailClosed:
		return "closed"
	case FailOpen:
		return "open"
	case FailLocal:
		return "local"
	}
	return "failmode(" + strconv.Itoa(int(m)) + ")"
}

// ParseFailMode returns the mode named s: "closed", "open" or "local". The
// empty string means FailClosed. An unknown name is a *FieldError of field.
func ParseFailMode(field, s string) (FailMode, error) {
	switch s {
	case "", "closed":
		return FailClosed, nil
	case "open":
		return FailOpen, nil
	case "local":
		return FailLocal, nil
	}
	return 0, &FieldError{Field: field, Rule: "must be one of closed, open, local"}
}

// Degraded is an error that comes with decisions a limiter made without its
// shared state (the Redis backend under FailOpen or FailLocal): usable
// answers, in order, and the name of the fail mode that made them. Such an
// error also matches ErrUnavailable, so a caller that does not look for it
// fails closed.
type Degraded interface {
	error
	// Degraded returns the fail mode's name ("open" or "local") and the
	// decisions, one per request, in order.
	Degraded() (mode string, ds []Decision)
}

// DegradedDecisions returns the decisions err carries, if it is (or wraps)
// a Degraded error.
func DegradedDecisions(err error) (mode string, ds []Decision, ok bool) {
	var dg Degraded
	if errors.As(err, &dg) {
		mode, ds = dg.Degraded()
		return mode, ds, true
	}
	return "", nil, false
}
