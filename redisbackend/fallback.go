package redisbackend

import (
	"context"
	"errors"
	"fmt"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// degrade answers rs[failed] by the fail mode; ds holds Redis's answers to the
// others.
func (b *Backend) degrade(ctx context.Context, rs []millis.Request, ds []millis.Decision, failed []int, cause error) ([]millis.Decision, error) {
	if b.cfg.OnDegraded != nil {
		b.cfg.OnDegraded(rl.DegradedEvent{Mode: b.cfg.Fail, Checks: len(failed), Err: &unavailableError{cause: cause}})
	}
	switch b.cfg.Fail {
	case rl.FailOpen:
		now := b.clock()
		for _, i := range failed {
			ds[i] = millis.Decision{Allowed: true, Limit: rs[i].Limit, Remaining: rs[i].Limit, Now: now, FailMode: rl.FailOpen}
		}
	case rl.FailLocal:
		sub := make([]rl.Request, len(failed))
		for j, i := range failed {
			sub[j] = rs[i].Public()
		}
		local, err := b.cfg.Fallback.CheckRates(ctx, sub)
		if err != nil {
			return nil, &unavailableError{cause: errors.Join(cause, fmt.Errorf("fallback: %w", err))}
		}
		for j, i := range failed {
			ds[i] = millis.OfDecision(local[j])
			ds[i].FailMode = rl.FailLocal
		}
	default:
		return nil, &unavailableError{cause: cause}
	}
	return ds, nil
}
