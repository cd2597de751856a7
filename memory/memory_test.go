package memory_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

func TestSemantics(t *testing.T) {
	for _, shards := range []int{1, 3} {
		limitertest.Run(t, func(t *testing.T, clock *limitertest.Clock) rl.Limiter {
			l := memory.New(memory.Config{Shards: shards, Clock: clock.Now, SweepInterval: -1})
			t.Cleanup(func() { l.Close() })
			return l
		})
	}
}

// TestConcurrentHitsAllowExactlyTheLimit: 128 goroutines × 100 hits on one
// id with limit 1000 allow exactly 1000, for every algorithm.
func TestConcurrentHitsAllowExactlyTheLimit(t *testing.T) {
	for _, a := range check.Algos {
		t.Run(a.String(), func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.T0)
			l := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
			defer l.Close()
			r := rl.Request{ID: "hot", Scale: time.Minute, Limit: 1000, Hits: 1, Algo: a}
			if a == rl.Leaky {
				r.Queue = 999 // all of the limit may wait at once
			}
			allowed, _ := limitertest.Concurrent(t, l, r, 128, 100)
			assert.Equal(t, int64(1000), allowed)
		})
	}
}

func TestBatchAcrossShardsKeepsOrder(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	l := memory.New(memory.Config{Shards: 4, Clock: clock.Now, SweepInterval: -1})
	defer l.Close()
	var rs []rl.Request
	for i := range 200 {
		rs = append(rs, rl.Request{ID: "id" + strconv.Itoa(i%13), Scale: time.Second, Limit: 100, Hits: 1})
	}
	ds, err := l.CheckRates(context.Background(), rs)
	require.NoError(t, err)
	seen := map[string]int64{}
	for i, d := range ds {
		seen[rs[i].ID]++
		assert.Equal(t, seen[rs[i].ID], d.Count, "item %d", i)
	}
	// The gauge is published after the answers (actor.Len: as of the last
	// message handled), so it may lag them by an instant.
	assert.Eventually(t, func() bool { return l.Stats().Live == 13 }, 5*time.Second, time.Millisecond)
}

func TestPeriodicSweep(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	swept := make(chan memory.SweepStats, 16)
	l := memory.New(memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: time.Millisecond,
		OnSweep: func(s memory.SweepStats) {
			if s.Deleted > 0 {
				swept <- s
			}
		}})
	defer l.Close()
	for i := range 10 {
		_, err := l.CheckRate(context.Background(), rl.Request{ID: strconv.Itoa(i), Scale: time.Second, Limit: 1, Hits: 1})
		require.NoError(t, err)
	}
	clock.Advance(time.Second)
	deleted := 0
	for deleted < 10 {
		select {
		case s := <-swept:
			deleted += s.Deleted
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of 10 expired buckets swept", deleted)
		}
	}
	assert.Equal(t, 10, deleted)
}

func TestClosedLimiterRefuses(t *testing.T) {
	l := memory.New(memory.Config{})
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	_, err := l.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Millisecond, Limit: 1, Hits: 1})
	assert.ErrorIs(t, err, rl.ErrClosed)
	_, err = l.CheckRate(context.Background(), rl.Request{ID: "", Scale: time.Millisecond, Limit: 1, Hits: 1})
	assert.ErrorIs(t, err, rl.ErrInvalid, "validation comes first")
}

func TestResetRefusesANegativeScale(t *testing.T) {
	l := memory.New(memory.Config{SweepInterval: -1})
	defer l.Close()
	_, err := l.Reset(context.Background(), "u", -1)
	var fe *rl.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "scale", fe.Field)
}

// TestZeroLimiter: a Limiter not made by New says so, never a panic from
// inside.
func TestZeroLimiter(t *testing.T) {
	var l memory.Limiter
	ctx := context.Background()
	r := rl.Request{ID: "u", Scale: time.Second, Limit: 1}
	_, err := l.CheckRate(ctx, r)
	assert.ErrorContains(t, err, "memory.New")
	_, err = l.Wait(ctx, r)
	assert.ErrorContains(t, err, "memory.New")
	_, err = l.CheckRates(ctx, []rl.Request{r})
	assert.ErrorContains(t, err, "memory.New")
	_, err = l.Buckets(ctx, "u")
	assert.ErrorContains(t, err, "memory.New")
	_, err = l.Reset(ctx, "u", 0)
	assert.ErrorContains(t, err, "memory.New")
	_, err = l.Sweep(ctx)
	assert.ErrorContains(t, err, "memory.New")
	assert.ErrorContains(t, l.Save(ctx, io.Discard), "memory.New")
	_, err = l.Load(ctx, strings.NewReader(""), 0)
	assert.ErrorContains(t, err, "memory.New")
	assert.Zero(t, l.Stats())
	assert.NoError(t, l.Close())
}
