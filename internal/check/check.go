// Package check holds what every Limiter implementation shares beyond the
// root package's public vocabulary: the contract's bounds on a request
// (docs/http-api.md), applying the default hit, validating a request, a
// batch or a reset, the bound errors a wire parser reuses, and the
// algorithms' names as the wire spells them.
package check

import (
	"errors"
	"strings"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// Counted returns r as a limiter decides it: Hits 1 when it is 0 and r is
// not a peek (a peek keeps Hits 0). Every Limiter applies it after
// validating; it changes nothing a second time.
func Counted(r rl.Request) rl.Request {
	if r.Hits == 0 && !r.Peek {
		r.Hits = 1
	}
	return r
}

// Batch validates every request of rs for a Go caller (Validate) and
// returns an *rl.ItemError for the first one out of bounds.
func Batch(rs []rl.Request, maxIDBytes int) error {
	return batch(rs, maxIDBytes, Validate)
}

// BatchWire is Batch in the HTTP API's words (ValidateWire).
func BatchWire(rs []rl.Request, maxIDBytes int) error {
	return batch(rs, maxIDBytes, ValidateWire)
}

func batch(rs []rl.Request, maxIDBytes int, validate func(rl.Request, int) error) error {
	for i := range rs {
		if err := validate(rs[i], maxIDBytes); err != nil {
			return &rl.ItemError{Index: i, Err: err}
		}
	}
	return nil
}

// Reset checks the arguments of an admin Reset for a Go caller: an id
// within the bounds, and a scale of 0 (every scale) or within the bounds.
func Reset(id string, scale time.Duration, maxIDBytes int) error {
	if scale < 0 {
		return &rl.FieldError{Field: "scale", Rule: scale.String() + " is negative: 0 resets every scale"}
	}
	return Validate(rl.Request{ID: id, Scale: max(scale, time.Millisecond)}, maxIDBytes)
}

// OutOfBounds returns the error Validate gives when field
// ("id", "scale", "limit", "hits", "algo", "slices", "queue" or
// "max_delay_ms") is out of its bounds; for "id", too long for maxIDBytes
// (DefaultMaxIDBytes when maxIDBytes <= 0). A parser that cannot read a
// value as its field's type (a sign, a fraction, an overflow) refuses it
// in the same words. The error must not be modified; an unknown field
// gives nil.
func OutOfBounds(field string, maxIDBytes int) *rl.FieldError {
	maxIDBytes = idBound(maxIDBytes)
	// A request valid but in field: Validate's own error for it.
	r := rl.Request{ID: "x", Scale: time.Second}
	switch field {
	case "id":
		r.ID = strings.Repeat("x", maxIDBytes+1)
	case "scale":
		r.Scale = 0
	case "limit":
		r.Limit = -1
	case "hits":
		r.Hits = -1
	case "algo":
		r.Algo = ^rl.Algo(0)
	case "slices":
		r.Algo, r.Slices = rl.Slices, 1
	case "queue":
		r.Algo, r.Queue = rl.Leaky, -1
	case "max_delay_ms":
		r.MaxDelay = -1
	default:
		return nil
	}
	fe, _ := ValidateWire(r, maxIDBytes).(*rl.FieldError)
	return fe
}

// Algos lists every algorithm, in the order of their values.
var Algos = []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log, rl.Slices, rl.Leaky}

// ValidAlgo reports whether a names a known algorithm.
func ValidAlgo(a rl.Algo) bool { return a <= rl.Leaky }

// ParseFailMode returns the mode named s: "closed", "open" or "local". The
// empty string means FailClosed. An unknown name is a *FieldError of field.
func ParseFailMode(field, s string) (rl.FailMode, error) {
	if s == "" {
		return rl.FailClosed, nil
	}
	for m := rl.FailClosed; m <= rl.FailLocal; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, &rl.FieldError{Field: field, Rule: "must be one of closed, open, local"}
}

// ErrTooManyScales refuses a check that would give an id records of more
// distinct scales than the memory limiter allows
// (memory.Config.MaxScalesPerID). It matches rl.ErrInvalid.
var ErrTooManyScales = &rl.FieldError{Field: "Scale", Rule: "this id already has records of as many distinct scales as the limiter allows (MaxScalesPerID; each slices count of a scale counts as one)"}

// errTooManyScalesWire is ErrTooManyScales in the HTTP API's words.
var errTooManyScalesWire = &rl.FieldError{Field: "scale", Rule: "this id already has records of as many distinct scales as the sidecar allows (-max-scales-per-id; each slices count of a scale counts as one)"}

// Wire returns err, a limiter's error, in the HTTP API's words where they
// differ from a Go caller's (ErrTooManyScales, in a batch's item too).
func Wire(err error) error {
	var ie *rl.ItemError
	switch {
	case err == ErrTooManyScales:
		return errTooManyScalesWire
	case errors.As(err, &ie) && ie.Err == ErrTooManyScales:
		return &rl.ItemError{Index: ie.Index, Err: errTooManyScalesWire}
	}
	return err
}
