package sweeper_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/sweeper"
)

// target counts sweeps and can be made to fail or to block.
type target struct {
	mu    sync.Mutex
	calls int
	err   error
	block bool
}

func (t *target) Sweep(ctx context.Context) (actor.SweepStats, error) {
	t.mu.Lock()
	t.calls++
	err, block := t.err, t.block
	t.mu.Unlock()
	if block {
		<-ctx.Done()
		return actor.SweepStats{}, ctx.Err()
	}
	return actor.SweepStats{Examined: 2, Deleted: 1}, err
}

func (t *target) count() int { t.mu.Lock(); defer t.mu.Unlock(); return t.calls }

func TestEachTickSweepsEveryTarget(t *testing.T) {
	ticks := make(chan time.Time)
	done := make(chan int, 8)
	a, b := &target{}, &target{err: errors.New("boom")}
	s := sweeper.Start(sweeper.Config{Ticks: ticks, OnSweep: func(i int, st actor.SweepStats, err error) {
		if i == 0 {
			st.Took = 0 // the sweeper's own measure of the time; not compared
			assert.Equal(t, actor.SweepStats{Examined: 2, Deleted: 1}, st)
			assert.NoError(t, err)
		} else {
			assert.EqualError(t, err, "boom")
		}
		done <- i
	}}, a, b)
	defer s.Close()
	for round := 1; round <= 3; round++ {
		ticks <- time.Time{}
		got := map[int]bool{<-done: true, <-done: true}
		assert.Equal(t, map[int]bool{0: true, 1: true}, got)
		assert.Equal(t, round, a.count())
		assert.Equal(t, round, b.count())
	}
}

func TestCloseStopsASweepInProgress(t *testing.T) {
	ticks := make(chan time.Time, 1)
	tg := &target{block: true}
	s := sweeper.Start(sweeper.Config{Ticks: ticks}, tg)
	ticks <- time.Time{}
	require.Eventually(t, func() bool { return tg.count() == 1 }, 10*time.Second, time.Millisecond)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on a blocked sweep")
	}
	require.NoError(t, s.Close(), "Close is idempotent")
}

func TestDefaultInterval(t *testing.T) {
	assert.Equal(t, 10*time.Second, sweeper.DefaultInterval)
}

// TestSweepsAnActor drives a real actor: expired buckets go, live ones stay.
func TestSweepsAnActor(t *testing.T) {
	now := int64(1_700_000_040_000)
	var mu sync.Mutex
	a := actor.New(actor.Config{Clock: func() int64 { mu.Lock(); defer mu.Unlock(); return now }})
	defer a.Close()
	ctx := context.Background()
	for _, scale := range []int64{1000, 60_000} {
		_, err := a.CheckRate(ctx, req(scale))
		require.NoError(t, err)
	}
	mu.Lock()
	now += 1000
	mu.Unlock()
	ticks := make(chan time.Time)
	swept := make(chan actor.SweepStats, 1)
	s := sweeper.Start(sweeper.Config{Ticks: ticks, OnSweep: func(_ int, st actor.SweepStats, _ error) {
		st.Took = 0 // the sweeper's own measure of the time; not compared
		swept <- st
	}}, a)
	defer s.Close()
	ticks <- time.Time{}
	assert.Equal(t, actor.SweepStats{Examined: 2, Deleted: 1}, <-swept)
	assert.Equal(t, 1, a.Len())
}
