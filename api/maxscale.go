package api

import (
	"strconv"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// scaleBound is Config.MaxScale: the longest scale a check that names its
// own may choose.
type scaleBound struct {
	ms  int64
	err *rl.FieldError
}

// newScaleBound returns the bound of max, or nil for none (max <= 0).
func newScaleBound(max time.Duration) *scaleBound {
	if max <= 0 {
		return nil
	}
	ms := max.Milliseconds()
	return &scaleBound{ms: ms, err: &rl.FieldError{Field: "scale",
		Rule: "must be at most " + strconv.FormatInt(ms, 10) + " (" + max.String() + "): the longest scale this sidecar lets a caller choose (-redis-max-scale)"}}
}

// check returns the error of a caller's scale longer than the bound (a nil
// bound takes any).
func (b *scaleBound) check(scale int64) error {
	if b == nil || scale <= b.ms {
		return nil
	}
	return b.err
}
