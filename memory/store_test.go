package memory_test

import (
	"context"
	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// TestStoreRefusesInvalidInput: the engine trusts its owner, so the Store
// validates at its edge, as the Limiter does, and counts nothing refused.
func TestStoreRefusesInvalidInput(t *testing.T) {
	s := memstore.NewStore(memstore.StoreConfig{MaxIDBytes: 4})
	now := limitertest.T0.UnixMilli()
	for _, r := range []rl.Request{
		{ID: "", Scale: time.Millisecond, Limit: 1, Hits: 1},
		{ID: "abcde", Scale: time.Millisecond, Limit: 1, Hits: 1},
		{ID: "a", Scale: 0, Limit: 1, Hits: 1},
		{ID: "a", Scale: time.Millisecond, Limit: -1, Hits: 1},
		{ID: "a", Scale: time.Millisecond, Limit: 1, Hits: -1},
		{ID: "a", Scale: time.Millisecond, Limit: 1, Hits: 1, Algo: 9},
		{ID: "a", Scale: time.Millisecond, Limit: bounds.MaxLogLimit + 1, Hits: 1, Algo: rl.Log},
	} {
		_, err := s.Check(now, r)
		assert.ErrorIs(t, err, rl.ErrInvalid, "%+v", r)
	}
	n := 0
	s.Scan(func(memstore.Record) bool { n++; return true })
	assert.Zero(t, n, "a refused check leaves no record")
	d, err := s.Check(now, rl.Request{ID: "abcd", Scale: time.Second, Limit: 1, Hits: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	d, err = s.Check(now, rl.Request{ID: "abcd", Scale: time.Second, Limit: 1, Hits: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "the second hit in the window passes the limit of 1")
}

// TestStoreSweepsAndScans: a record is listed until its window has passed
// and a sweep deletes it.
func TestStoreSweepsAndScans(t *testing.T) {
	s := memstore.NewStore(memstore.StoreConfig{NoCache: true})
	now := limitertest.T0.UnixMilli()
	for _, id := range []string{"b", "a"} {
		_, err := s.Check(now, rl.Request{ID: id, Scale: time.Second, Limit: 5, Hits: 1})
		require.NoError(t, err)
	}
	var ids []string
	s.Scan(func(r memstore.Record) bool { ids = append(ids, r.ID); return true })
	assert.Equal(t, []string{"a", "b"}, ids, "in the store's order")
	_, deleted, done := s.Sweep(now, 0)
	assert.Zero(t, deleted, "both windows are current")
	assert.True(t, done)
	_, deleted, _ = s.Sweep(now+5000, 0)
	assert.Equal(t, 2, deleted)
	n := 0
	s.Scan(func(memstore.Record) bool { n++; return true })
	assert.Zero(t, n)
}

// TestPauseHoldsTheShard: a check behind a paused shard waits for its
// release, and one whose context ends meanwhile gives up uncounted.
func TestPauseHoldsTheShard(t *testing.T) {
	l := memory.New(memory.Config{Shards: 1, SweepInterval: -1})
	t.Cleanup(func() { l.Close() })
	_, err := memstore.MustOf(l).Pause(t.Context(), 1)
	require.Error(t, err, "there is no shard 1")
	release, err := memstore.MustOf(l).Pause(t.Context(), 0)
	require.NoError(t, err)
	r := rl.Request{ID: "u", Scale: time.Minute, Limit: 5, Hits: 1}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = l.CheckRate(ctx, r)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	done := make(chan rl.Decision, 1)
	go func() {
		d, _ := l.CheckRate(t.Context(), r)
		done <- d
	}()
	select {
	case <-done:
		t.Fatal("a check was decided while the shard was paused")
	case <-time.After(20 * time.Millisecond):
	}
	require.NoError(t, release())
	d := <-done
	assert.Equal(t, int64(1), d.Count, "the check that gave up was not counted")
}
