package memory

import (
	"context"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
)

// plumbing is a *Limiter's face for internal/memstore: the snapshots'
// record iterator and restore calls, Scan, Pause, the batch into lent
// buffers, the check without a second validation, Sweep and Stats.
type plumbing struct{ l *Limiter }

func (p plumbing) CopyRecords(ctx context.Context, chunk int, fn func(memstore.Record) error, endVisit func(took time.Duration) error) error {
	return p.l.copyRecords(ctx, chunk, func(r record) error { return fn(memstore.Record(r)) }, endVisit)
}

func (p plumbing) Restore(ctx context.Context, id string, scale int64, a rl.Algo, r algo.Record) error {
	return p.l.restore(ctx, id, scale, a, r)
}

func (p plumbing) RestoreLog(ctx context.Context, id string, scale, created int64, data []byte) error {
	return p.l.restoreLog(ctx, id, scale, created, data)
}

func (p plumbing) CheckRatesInto(ctx context.Context, rs []rl.Request, out []rl.Decision) error {
	return p.l.checkRatesInto(ctx, rs, out)
}

func (p plumbing) CheckValidated(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return p.l.checkValidated(ctx, r)
}

func (p plumbing) Scan(ctx context.Context, fn func(memstore.Record) bool) error {
	return p.l.scan(ctx, func(r record) bool { return fn(memstore.Record(r)) })
}

func (p plumbing) Pause(ctx context.Context, shard int) (func() error, error) {
	return p.l.pause(ctx, shard)
}

func (p plumbing) Sweep(ctx context.Context) (memstore.SweepStats, error) { return p.l.sweep(ctx) }

func (p plumbing) Stats() memstore.Stats { return p.l.stats() }

// newTuned is memstore.New: cfg must be a Config.
func newTuned(cfg any, t memstore.Tuning) any { return newLimiter(cfg.(Config), t) }

func init() {
	memstore.Register(func(l any) (memstore.Limiter, bool) {
		m, ok := l.(*Limiter)
		if !ok || m == nil {
			return nil, false
		}
		return plumbing{m}, true
	}, newStore, newTuned)
}
