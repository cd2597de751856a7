package redisbackend

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// errPastDeadline is the cause of the unavailable error (matching
// raterlimiter.ErrUnavailable) of a check that Redis ran only after its
// caller's deadline: the script refused to count it, so the 503 the caller
// answers is true to the counters.
var errPastDeadline = errors.New("redisbackend: redis ran the check after the caller's deadline; nothing counted")

// deadlineArg returns the check scripts' deadline argument for a call
// bounded by ctx, with Config.Deadlines: the deadline in Unix ms on the clock
// the script reads (Config.Clock when set, else the wall clock, which Redis's
// TIME is assumed to follow), rounded down; -1 without Config.Deadlines or
// when ctx has no deadline.
func (b *Backend) deadlineArg(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok || !b.cfg.Deadlines {
		return -1
	}
	if b.cfg.Clock != nil {
		return b.cfg.Clock().UnixMilli() + time.Until(d).Milliseconds()
	}
	return d.UnixMilli()
}

// isPastDeadline reports whether err is the check script's refusal to count
// past the caller's deadline.
func isPastDeadline(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(re.Error(), "DEADLINE")
}
