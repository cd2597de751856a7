package raterlimiter

import (
	"errors"
	"strconv"
	"strings"
)

var (
	// ErrInvalid matches every error about a request outside the bounds.
	ErrInvalid = errors.New("raterlimiter: invalid request")
	// ErrClosed is returned by a limiter after Close.
	ErrClosed = errors.New("raterlimiter: limiter closed")
	// ErrUnavailable matches every error that means the limiter could not
	// answer in time: overload, shutting down, a backend down. The HTTP API
	// answers it with 503.
	ErrUnavailable = errors.New("raterlimiter: limiter unavailable")
)

// FieldError says which field of a request broke which rule. It matches
// ErrInvalid.
type FieldError struct {
	// Field is the field at fault. A limiter's methods name the Request's
	// Go field ("ID", "Scale", "Limit", "Hits", "Algo", "Slices", "Queue",
	// "MaxDelay") or the Config's; an error the sidecar sent back (through
	// the client) names the HTTP API's parameter ("scale", "max_delay_ms",
	// "cursor").
	Field string
	// Rule is the rule it broke, as a phrase with the value that broke it
	// ("1.5ms is not a whole number of milliseconds"), or the HTTP API's
	// ("must be an integer from 1 to 315360000000 (milliseconds)").
	Rule string
}

// Error returns "raterlimiter: invalid FIELD: RULE".
func (e *FieldError) Error() string {
	return "raterlimiter: invalid " + e.Field + ": " + e.Rule
}

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// ItemError says which request of a batch was refused, and why.
type ItemError struct {
	// Index is the position of the refused request in the batch, from 0.
	Index int
	// Err is why it was refused (a *FieldError for a bound).
	Err error
}

// Error returns "raterlimiter: item INDEX: " and the item's own error.
func (e *ItemError) Error() string {
	return "raterlimiter: item " + strconv.Itoa(e.Index) + ": " + strings.TrimPrefix(e.Err.Error(), "raterlimiter: ")
}

// Unwrap returns the item's own error.
func (e *ItemError) Unwrap() error { return e.Err }
