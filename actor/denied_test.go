package actor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/ms"
)

// TestDeniedFastPathAnswersWithoutTheActorAndCountsExactly: once the actor
// denied a fixed-window check for its count, the same check is answered
// while the actor is busy, with the decision the actor would give, and its
// hits are counted.
func TestDeniedFastPathAnswersWithoutTheActorAndCountsExactly(t *testing.T) {
	var now atomic.Int64
	now.Store(t0) // t0 starts a minute
	a := newActor(t, actor.Config{Clock: now.Load})
	ctx := waitCtx(t)
	r := ms.Request{ID: "u", Scale: 60_000, Limit: 2, Hits: 1}
	for i := range 3 {
		d, err := a.CheckRate(ctx, r)
		require.NoError(t, err)
		assert.Equal(t, i < 2, d.Allowed, "check %d", i+1)
	}

	started, release := blockOn(a, "block")
	go a.CheckRate(context.Background(), hit("block"))
	<-started
	now.Add(1000)
	d, err := a.CheckRate(ctx, r) // the actor is blocked: only the fast path answers
	require.NoError(t, err)
	assert.Equal(t, ms.Decision{Count: 4, Limit: 2, ResetMS: 59_000, RetryAfterMS: 59_000, Now: t0 + 1000}, d)
	lower := r
	lower.Limit, lower.Hits = 1, 3
	d, err = a.CheckRate(ctx, lower)
	require.NoError(t, err)
	assert.Equal(t, ms.Decision{Count: 7, Limit: 1, ResetMS: 59_000, RetryAfterMS: 59_000, Now: t0 + 1000}, d, "a lower limit, more hits: denied as well")
	close(release)

	peek := r
	peek.Hits, peek.Peek = 0, true
	d, err = a.CheckRate(ctx, peek)
	require.NoError(t, err)
	assert.Equal(t, int64(7), d.Count, "the actor's record holds the hits counted outside it")
	var listed []ms.Bucket
	require.NoError(t, a.Do(ctx, func(s *buckets.Store, _ int64) { listed = s.Buckets("u") }))
	require.Len(t, listed, 1)
	assert.Equal(t, int64(7), listed[0].Count)

	higher := r
	higher.Limit = 10
	d, err = a.CheckRate(ctx, higher)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a higher limit is for the actor to decide")
	assert.Equal(t, int64(8), d.Count)

	now.Store(t0 + 60_000) // the next window
	d, err = a.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "never denied past the window's end")
	assert.Equal(t, int64(1), d.Count)
}

// TestDeniedFastPathForgetsAReset: a reset (any function run on the actor)
// drops the recorded denials, so the next check is the actor's to decide.
func TestDeniedFastPathForgetsAReset(t *testing.T) {
	a := newActor(t, actor.Config{})
	ctx := waitCtx(t)
	r := ms.Request{ID: "u", Scale: 60_000, Limit: 1, Hits: 1}
	for range 3 {
		_, err := a.CheckRate(ctx, r)
		require.NoError(t, err)
	}
	require.NoError(t, a.Do(ctx, func(s *buckets.Store, _ int64) { s.Delete("u", 0) }))
	d, err := a.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(1), d.Count)
}

// TestDeniedFastPathConcurrentCountsAreExact: many callers flood a few ids
// past their limit; exactly the limit is allowed per id, and every hit is
// counted, whichever path answered it.
func TestDeniedFastPathConcurrentCountsAreExact(t *testing.T) {
	a := newActor(t, actor.Config{})
	const (
		callers = 64
		checks  = 300
		ids     = 3
		limit   = 100
	)
	var allowed [ids]atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range checks {
				id := (c + i) % ids
				d, err := a.CheckRate(context.Background(), ms.Request{ID: fmt.Sprint("id", id), Scale: 60_000, Limit: limit, Hits: 1})
				if !assert.NoError(t, err) {
					return
				}
				if d.Allowed {
					allowed[id].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for id := range ids {
		assert.Equal(t, int64(limit), allowed[id].Load(), "id%d", id)
		d, err := a.CheckRate(waitCtx(t), ms.Request{ID: fmt.Sprint("id", id), Scale: 60_000, Limit: limit})
		require.NoError(t, err)
		assert.Equal(t, int64(callers*checks/ids), d.Count, "id%d: every hit counted", id)
	}
}

// TestDeniedFastPathIsBounded: fresh ids denied at once (limit 0) record at
// most actor.MaxDenials denials; the rest are decided by the actor, alike.
func TestDeniedFastPathIsBounded(t *testing.T) {
	a := newActor(t, actor.Config{})
	ctx := waitCtx(t)
	for i := range actor.MaxDenials + 100 {
		d, err := a.CheckRate(ctx, ms.Request{ID: fmt.Sprint("fresh", i), Scale: 3_600_000, Limit: 0, Hits: 1})
		require.NoError(t, err)
		require.False(t, d.Allowed)
	}
	assert.Equal(t, actor.MaxDenials, a.Denials())
	d, err := a.CheckRate(ctx, ms.Request{ID: "fresh0", Scale: 3_600_000, Limit: 0, Hits: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Count, "a recorded denial still counts")
}
