package memory

import (
	"context"
	"fmt"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
)

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
