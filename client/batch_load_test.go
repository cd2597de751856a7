package client_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// These tests put the batching client under load from many goroutines
// against a real sidecar, where batches of different callers travel at the
// same time, and check each caller's own answers.

// TestBatchingGivesEachCallerItsOwnDecision: 128 goroutines × 100 hits on
// one id, fixed window, limit 1000. Every hit is counted once, so the
// counts of the 12,800 answers are exactly 1 .. 12,800 (no answer lost,
// duplicated or handed to another caller), a hit is allowed exactly when
// its count is within the limit, and each goroutine, whose checks follow
// one another, sees its counts rise.
func TestBatchingGivesEachCallerItsOwnDecision(t *testing.T) {
	const callers, each, limit = 128, 100, 1000
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c := batching(t, sidecar(t, lim, ""), client.Config{Clock: clock.Now})
	r := rl.Request{ID: "hot", Scale: time.Minute, Limit: limit, Hits: 1}

	counts := make([][]int64, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for range each {
				d, err := c.CheckRate(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, d.Count <= limit, d.Allowed, "count %d", d.Count)
				assert.Equal(t, int64(limit), d.Limit)
				assert.Equal(t, max(0, limit-d.Count), d.Remaining)
				counts[g] = append(counts[g], d.Count)
			}
		})
	}
	wg.Wait()
	var all []int64
	for g, cs := range counts {
		assert.True(t, slices.IsSorted(cs) && len(slices.Compact(slices.Clone(cs))) == len(cs), "caller %d saw its counts rise: %v", g, cs)
		all = append(all, cs...)
	}
	slices.Sort(all)
	want := make([]int64, callers*each)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, all)
}

// TestBatchingCancellationUnderLoad: half the callers check their own ids
// and never cancel; the other half hammer a shared id with contexts that
// are cancelled at random moments, so cancelled checks wait in, or travel
// with, the same batches as the steady ones. Each steady caller still gets
// exactly its own decisions; a quitter gets a decision or its context's
// error, never another error.
func TestBatchingCancellationUnderLoad(t *testing.T) {
	const steady, quitters, each, limit = 64, 64, 100, 50
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c := batching(t, sidecar(t, lim, ""), client.Config{Clock: clock.Now})

	var answered, cancelled atomic.Int64
	var wg sync.WaitGroup
	for g := range steady {
		wg.Go(func() {
			r := rl.Request{ID: "steady-" + strconv.Itoa(g), Scale: time.Minute, Limit: limit, Hits: 1}
			for i := range each {
				d, err := c.CheckRate(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int64(i+1), d.Count, "steady caller %d check %d", g, i)
				assert.Equal(t, i < limit, d.Allowed, "steady caller %d check %d", g, i)
			}
		})
	}
	for g := range quitters {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			r := rl.Request{ID: "shared", Scale: time.Minute, Limit: 1_000_000, Hits: 1}
			for range each {
				ctx, cancel := context.WithCancel(context.Background())
				stop := time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, cancel)
				_, err := c.CheckRate(ctx, r)
				stop.Stop()
				cancel()
				switch {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					assert.NoError(t, err, "a quitter gets a decision or context.Canceled")
				}
			}
		})
	}
	wg.Wait()
	t.Logf("quitters: %d answered, %d cancelled", answered.Load(), cancelled.Load())
	d, err := lim.CheckRate(context.Background(), rl.Request{ID: "shared", Scale: time.Minute, Limit: 1_000_000})
	require.NoError(t, err)
	// A check cancelled while its batch travelled was counted; one
	// cancelled before it left was not.
	assert.GreaterOrEqual(t, d.Count, answered.Load())
	assert.LessOrEqual(t, d.Count, int64(quitters*each))
}

// TestBatchingErrorIsolationUnderLoad: the client accepts ids the sidecar
// refuses (its MaxIDBytes is larger), so those checks travel and the
// sidecar's 400 names them inside batches shared with valid checks. Each
// refused caller gets its FieldError; every other caller gets exactly its
// own decisions, counted once.
func TestBatchingErrorIsolationUnderLoad(t *testing.T) {
	const good, bad, each, limit = 32, 8, 60, 40
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c := batching(t, sidecar(t, lim, ""), client.Config{Clock: clock.Now, MaxIDBytes: 4096})

	var wg sync.WaitGroup
	for g := range good {
		wg.Go(func() {
			r := rl.Request{ID: "good-" + strconv.Itoa(g), Scale: time.Minute, Limit: limit, Hits: 1}
			for i := range each {
				d, err := c.CheckRate(context.Background(), r)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int64(i+1), d.Count, "good caller %d check %d", g, i)
				assert.Equal(t, i < limit, d.Allowed)
			}
		})
	}
	for g := range bad {
		wg.Go(func() {
			r := rl.Request{ID: strings.Repeat("x", check.DefaultMaxIDBytes+1+g), Scale: time.Minute, Limit: limit, Hits: 1}
			for range each / 4 {
				_, err := c.CheckRate(context.Background(), r)
				assert.ErrorIs(t, err, rl.ErrInvalid)
				var fe *rl.FieldError
				if assert.ErrorAs(t, err, &fe) {
					assert.Equal(t, "id", fe.Field)
				}
			}
		})
	}
	wg.Wait()
	for g := range good {
		d, err := lim.CheckRate(context.Background(), rl.Request{ID: "good-" + strconv.Itoa(g), Scale: time.Minute, Limit: limit, Peek: true})
		require.NoError(t, err)
		assert.Equal(t, int64(each), d.Count, "good caller %d counted once per check", g)
	}
}
