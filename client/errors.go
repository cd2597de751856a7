package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	rl "github.com/raterlimiter/raterlimiter"
)

// Error is a failed exchange with the sidecar: a transport error (Status 0),
// or an answer with a status the call does not expect.
//
// It matches raterlimiter.ErrUnavailable for transport errors, deadlines and
// 5xx answers; raterlimiter.ErrInvalid for 400 and 413 answers that name no
// field (a 400 that names one comes back as a *raterlimiter.FieldError
// instead). A cancelled context matches context.Canceled only.
type Error struct {
	// Status is the HTTP status, 0 when no answer came.
	Status int
	// Err is the underlying error, if any (transport, context, decoding).
	Err error
	// msg is the answer's "error", or the start of its body; Error
	// reports it.
	msg string
}

// Error returns "client: " and the status, the sidecar's message (the
// answer's "error", or the start of its body) or the underlying error,
// whichever are present.
func (e *Error) Error() string {
	detail := e.msg
	if detail == "" && e.Err != nil {
		detail = e.Err.Error()
	}
	if e.Status == 0 {
		return "client: " + detail
	}
	s := "client: " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	if detail != "" {
		s += ": " + detail
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether e counts as target: raterlimiter.ErrUnavailable or
// raterlimiter.ErrInvalid, as Error's doc says.
func (e *Error) Is(target error) bool {
	switch target {
	case rl.ErrUnavailable:
		if e.Status == 0 {
			return !errors.Is(e.Err, context.Canceled)
		}
		return e.Status >= 500
	case rl.ErrInvalid:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge
	}
	return false
}
