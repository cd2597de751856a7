package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// degrade answers rs[failed] by the fail mode; ds holds Redis's answers to the
// others.
func (b *Backend) degrade(ctx context.Context, rs []rl.Request, ds []rl.Decision, failed []int, cause error) ([]rl.Decision, error) {
	if b.cfg.OnDegraded != nil {
		b.cfg.OnDegraded(b.cfg.Fail, len(failed))
	}
	switch b.cfg.Fail {
	case FailOpen:
		now := time.Now().UnixMilli()
		if b.cfg.Clock != nil {
			now = b.cfg.Clock()
		}
		for _, i := range failed {
			ds[i] = rl.Decision{Allowed: true, Limit: rs[i].Limit, Remaining: rs[i].Limit, Now: now}
		}
	case FailLocal:
		sub := make([]rl.Request, len(failed))
		for j, i := range failed {
			sub[j] = rs[i]
		}
		local, err := b.cfg.Fallback.CheckRates(ctx, sub)
		if err != nil {
			return nil, &unavailableError{cause: errors.Join(cause, fmt.Errorf("fallback: %w", err))}
		}
		for j, i := range failed {
			ds[i] = local[j]
		}
	default:
		return nil, &unavailableError{cause: cause}
	}
	return ds, &DegradedError{Mode: b.cfg.Fail, Decisions: ds, Err: cause}
}
