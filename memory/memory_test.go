package memory_test

import (
	"context"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
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
	assert.Eventually(t, func() bool { return memstore.MustOf(l).Stats().Live == 13 }, 5*time.Second, time.Millisecond)
}

// TestCheckRatesIntoDecidesAsCheckRates: the same batches, sent to twin
// limiters through CheckRates and CheckRatesInto, get the same decisions,
// with one shard (the batch lent to the actor) and with several.
func TestCheckRatesIntoDecidesAsCheckRates(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(strconv.Itoa(shards), func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.T0)
			a := memory.New(memory.Config{Shards: shards, Clock: clock.Now, SweepInterval: -1})
			defer a.Close()
			b := memory.New(memory.Config{Shards: shards, Clock: clock.Now, SweepInterval: -1})
			defer b.Close()
			for round := range 5 {
				var rs []rl.Request
				for i := range 150 { // more than the actor decides at once
					rs = append(rs, rl.Request{ID: "id" + strconv.Itoa(i%17), Scale: time.Second, Limit: 20, Hits: 1, Algo: check.Algos[i%len(check.Algos)]})
				}
				want, err := a.CheckRates(context.Background(), rs)
				require.NoError(t, err)
				got := make([]rl.Decision, len(rs))
				require.NoError(t, memstore.MustOf(b).CheckRatesInto(context.Background(), rs, got))
				require.Equal(t, want, got, "round %d", round)
				clock.Advance(300 * time.Millisecond)
			}
		})
	}
}

func TestCheckRatesIntoRefusesWithoutCounting(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	l := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
	defer l.Close()
	ok := rl.Request{ID: "a", Scale: time.Second, Limit: 5, Hits: 1}
	err := memstore.MustOf(l).CheckRatesInto(context.Background(), []rl.Request{ok, ok}, make([]rl.Decision, 1))
	require.ErrorContains(t, err, "2 requests but room for 1 decisions")
	err = memstore.MustOf(l).CheckRatesInto(context.Background(), []rl.Request{ok, {ID: "a", Scale: 0, Limit: 5, Hits: 1}}, make([]rl.Decision, 2))
	require.ErrorIs(t, err, rl.ErrInvalid)
	require.NoError(t, memstore.MustOf(l).CheckRatesInto(context.Background(), nil, nil))
	d, err := l.CheckRate(context.Background(), rl.Request{ID: "a", Scale: time.Second, Limit: 5, Peek: true})
	require.NoError(t, err)
	assert.Zero(t, d.Count, "refused batches counted nothing")
}

func TestPeriodicSweep(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	swept := make(chan memstore.SweepStats, 16)
	l := memstore.New[*memory.Limiter](memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: time.Millisecond},
		memstore.Tuning{OnSweep: func(_ int, s memstore.SweepStats, err error) {
			if err == nil && s.Deleted > 0 {
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

// CheckValidated (memstore.Validated, the sidecar's /check_rate) counts in
// the same records as CheckRate and still holds the id to the limiter's
// bound, failing as CheckRate does.
func TestCheckValidated(t *testing.T) {
	l := memory.New(memory.Config{MaxIDBytes: 8, SweepInterval: -1})
	t.Cleanup(func() { l.Close() })
	v, ok := memstore.ValidatedOf(l)
	require.True(t, ok)
	ctx := context.Background()
	r := rl.Request{ID: "u1", Scale: time.Minute, Limit: 2}
	d, err := l.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Count)
	d, err = v.CheckValidated(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Count)
	assert.True(t, d.Allowed)
	d, err = v.CheckValidated(ctx, r)
	require.NoError(t, err)
	assert.False(t, d.Allowed)

	long := rl.Request{ID: "123456789", Scale: time.Minute, Limit: 2}
	_, want := l.CheckRate(ctx, long)
	require.ErrorIs(t, want, rl.ErrInvalid)
	_, err = v.CheckValidated(ctx, long)
	assert.Equal(t, want, err)
}
