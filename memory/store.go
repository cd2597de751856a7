package memory

import (
	"context"
	"fmt"
	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/ms"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
)

// store is one shard's store without its goroutine: it decides checks on
// its caller's goroutine at the time the caller passes. Tools that replay a
// trace at simulated times (cmd/rlaccuracy) use it to judge the decisions
// the Limiter makes, without a clock or a hand-off between them. It is not
// safe for concurrent use.
type store struct {
	s     *buckets.Store
	maxID int
}

// newStore returns an empty store.
func newStore(cfg memstore.StoreConfig) memstore.Store {
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = bounds.DefaultMaxIDBytes
	}
	o := buckets.Options{MaxIDBytes: min(cfg.MaxIDBytes, buckets.MaxIDBytes)}
	if cfg.NoCache {
		o.CacheSlots = -1
	}
	return &store{s: buckets.New(o), maxID: o.MaxIDBytes}
}

// Check decides r at now (Unix milliseconds), as a Limiter's shard would.
// Invalid requests fail with an error matching raterlimiter.ErrInvalid and
// change nothing.
func (s *store) Check(now int64, r rl.Request) (rl.Decision, error) {
	if err := check.Validate(r, s.maxID); err != nil {
		return rl.Decision{}, err
	}
	d, err := s.s.Check(now, ms.Of(check.Counted(r)))
	return d.Public(), err
}

// Sweep deletes the records no decision at now or later can read, looking
// at most at budget records (0: all) from where the last sweep stopped. It
// reports whether it reached the end of the store.
func (s *store) Sweep(now int64, budget int) (examined, deleted int, done bool) {
	return s.s.Sweep(now, budget)
}

// Scan calls fn for every record, expired or not, in the store's order (id,
// scale, algorithm, bucket), until fn returns false. A record's Log is nil;
// its ID shares the store's memory until the store next changes: clone it
// to keep it longer. fn must not call the store.
func (s *store) Scan(fn func(memstore.Record) bool) {
	s.s.Scan(func(id string, scale int64, a rl.Algo, r algo.Record) bool {
		return fn(memstore.Record{ID: id, Scale: scale, Algo: a, State: r})
	})
}

// scan calls fn for every record of the limiter, expired or not, shard by
// shard, each shard's in the store's order (id, scale, algorithm, bucket),
// until fn returns false. A record's Log is nil; its ID shares the store's
// memory, so fn must clone it to keep it past the call. Each shard is
// scanned in one visit, so its checks wait for the whole of it: for tests
// and tools on a small limiter; a live one is copied with CopyRecords.
func (l *Limiter) scan(ctx context.Context, fn func(record) bool) error {
	for _, a := range l.actors {
		more := true
		err := a.Do(ctx, func(s *buckets.Store, _ int64) {
			s.Scan(func(id string, scale int64, al rl.Algo, r algo.Record) bool {
				more = fn(record{ID: id, Scale: scale, Algo: al, State: r})
				return more
			})
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// pause holds shard's goroutine until release is called: meanwhile the
// shard's checks wait in its mailbox, and those whose context ends give up
// uncounted. It is for drills and tests of what a stalled shard does to its
// callers. Pause returns once the shard is held; release returns the
// error of the held visit (nil, or raterlimiter.ErrClosed after Close) and
// must be called exactly once.
func (l *Limiter) pause(ctx context.Context, shard int) (release func() error, err error) {
	if shard < 0 || shard >= len(l.actors) {
		return nil, fmt.Errorf("memory: pause: shard %d of %d", shard, len(l.actors))
	}
	held, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- l.actors[shard].Do(ctx, func(*buckets.Store, int64) {
			close(held)
			<-rel
		})
	}()
	select {
	case <-held:
		return func() error { close(rel); return <-done }, nil
	case err := <-done:
		return nil, err
	}
}
