package client_test

import (
	"context"
	"strings"
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

// counting counts the calls a sidecar makes to its limiter.
type counting struct {
	rl.Limiter
	single, batches, items atomic.Int64
}

func (c *counting) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	c.single.Add(1)
	return c.Limiter.CheckRate(ctx, r)
}

func (c *counting) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	c.batches.Add(1)
	c.items.Add(int64(len(rs)))
	return c.Limiter.CheckRates(ctx, rs)
}

// batching returns a batching client of the sidecar at url (see clientOf):
// cfg's BatchMaxSize, or the sidecar's -max-batch default.
func batching(t *testing.T, url string, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.BatchMaxSize == 0 {
		cfg.BatchMaxSize = 500
	}
	return clientOf(t, url, cfg)
}

// TestBatchingSemantics runs the shared table through the batching client.
func TestBatchingSemantics(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, clock *limitertest.Clock) rl.Limiter {
		lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
		t.Cleanup(func() { lim.Close() })
		return batching(t, sidecar(t, lim, "admin-secret"), client.Config{AdminToken: "admin-secret", Clock: clock.Now})
	})
}

// TestBatchingIsOnWithASizeOrAWindow: the zero Config sends each check
// alone (GET /check_rate); a positive BatchMaxSize, or a positive
// BatchWindow alone, sends them through POST /check_rates.
func TestBatchingIsOnWithASizeOrAWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     client.Config
		batched bool
	}{
		{"zero config", client.Config{}, false},
		{"BatchMaxSize", client.Config{BatchMaxSize: 2}, true},
		{"BatchWindow", client.Config{BatchWindow: time.Millisecond}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := memory.New(memory.Config{SweepInterval: -1})
			t.Cleanup(func() { lim.Close() })
			cl := &counting{Limiter: lim}
			c := clientOf(t, sidecar(t, cl, ""), tc.cfg)
			for range 3 {
				_, err := c.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Minute, Limit: 10})
				require.NoError(t, err)
			}
			if tc.batched {
				assert.Zero(t, cl.single.Load(), "no check went alone")
				assert.Equal(t, int64(3), cl.items.Load(), "every check went in a batch")
			} else {
				assert.Equal(t, int64(3), cl.single.Load(), "every check went alone")
				assert.Zero(t, cl.batches.Load(), "no batch")
			}
		})
	}
}

// TestBatchingAllowsExactlyTheLimit: 128 goroutines × 100 hits on one id with
// limit 1000 allow exactly 1000 through the batching client and a real
// sidecar, for every algorithm, and the checks did travel in batches.
func TestBatchingAllowsExactlyTheLimit(t *testing.T) {
	for _, a := range check.Algos {
		t.Run(a.String(), func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.T0)
			lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
			t.Cleanup(func() { lim.Close() })
			cl := &counting{Limiter: lim}
			c := batching(t, sidecar(t, cl, ""), client.Config{Clock: clock.Now})
			r := rl.Request{ID: "hot", Scale: time.Minute, Limit: 1000, Hits: 1, Algo: a}
			if a == rl.Leaky {
				r.Queue = 999 // the limit at once, all but one waiting
			}
			allowed, denied := limitertest.Concurrent(t, c, r, 128, 100)
			assert.Equal(t, int64(1000), allowed)
			assert.Equal(t, int64(128*100-1000), denied)
			assert.Zero(t, cl.single.Load(), "every check went in a batch")
			assert.Equal(t, int64(128*100), cl.items.Load())
			assert.Less(t, cl.batches.Load(), int64(128*100), "checks were coalesced")
			t.Logf("%d checks in %d batches", cl.items.Load(), cl.batches.Load())
		})
	}
}

// TestBatchingIsolatesCallers: one caller's cancellation or refused item
// never fails the others of its batch.
func TestBatchingIsolatesCallers(t *testing.T) {
	ctx := context.Background()
	peek := func(t *testing.T, lim rl.Limiter, id string) int64 {
		t.Helper()
		d, err := lim.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 10, Peek: true})
		require.NoError(t, err)
		return d.Count
	}
	// check runs CheckRate in a goroutine and returns where its answer lands.
	// A window that never ends makes a batch leave only when full, so its
	// members are known.
	type answer struct {
		d   rl.Decision
		err error
	}
	send := func(c *client.Client, ctx context.Context, id string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			d, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 10, Hits: 1})
			ch <- answer{d, err}
		}()
		return ch
	}

	t.Run("a cancelled caller fails alone and is not counted", func(t *testing.T) {
		lim := memory.New(memory.Config{SweepInterval: -1})
		t.Cleanup(func() { lim.Close() })
		// A window keeps the cancelled check's batch open while it is
		// cancelled (if it joined one before the cancellation won).
		c := batching(t, sidecar(t, lim, ""), client.Config{BatchWindow: 50 * time.Millisecond, BatchMaxSize: 3})
		cctx, cancel := context.WithCancel(ctx)
		gone := send(c, cctx, "u")
		cancel()
		a := <-gone
		assert.ErrorIs(t, a.err, context.Canceled)
		b, d := send(c, ctx, "u"), send(c, ctx, "u")
		var counts []int64
		for _, ch := range []chan answer{b, d} {
			a := <-ch
			require.NoError(t, a.err)
			counts = append(counts, a.d.Count)
		}
		assert.ElementsMatch(t, []int64{1, 2}, counts)
		assert.Equal(t, int64(2), peek(t, lim, "u"), "the cancelled check counted nothing")
	})

	t.Run("an item the sidecar refuses fails alone", func(t *testing.T) {
		lim := memory.New(memory.Config{SweepInterval: -1})
		t.Cleanup(func() { lim.Close() })
		// The client accepts longer ids than the sidecar, so the sidecar's
		// 400 names the item.
		c := batching(t, sidecar(t, lim, ""), client.Config{BatchWindow: time.Hour, BatchMaxSize: 3, MaxIDBytes: 4096})
		long := strings.Repeat("x", check.DefaultMaxIDBytes+1)
		chans := []chan answer{send(c, ctx, "a"), send(c, ctx, long), send(c, ctx, "b")}
		var fe *rl.FieldError
		for i, ch := range chans {
			a := <-ch
			if i == 1 {
				require.ErrorAs(t, a.err, &fe)
				assert.Equal(t, "id", fe.Field)
				assert.ErrorIs(t, a.err, rl.ErrInvalid)
				continue
			}
			require.NoError(t, a.err)
			assert.Equal(t, int64(1), a.d.Count)
		}
		assert.Equal(t, int64(1), peek(t, lim, "a"))
		assert.Equal(t, int64(1), peek(t, lim, "b"))
	})

	t.Run("a sidecar that is down fails each caller by its own mode", func(t *testing.T) {
		url, _ := stalled(t)
		closed := batching(t, url, client.Config{Timeout: 50 * time.Millisecond, BatchMaxSize: 2})
		a, b := send(closed, ctx, "a"), send(closed, ctx, "b")
		for _, ch := range []chan answer{a, b} {
			assert.ErrorIs(t, (<-ch).err, rl.ErrUnavailable)
		}
		open := batching(t, url, client.Config{Timeout: 50 * time.Millisecond, BatchMaxSize: 2, FailMode: rl.FailOpen})
		a, b = send(open, ctx, "a"), send(open, ctx, "b")
		for _, ch := range []chan answer{a, b} {
			got := <-ch
			require.NoError(t, got.err)
			assert.True(t, got.d.Allowed)
		}
	})

	t.Run("closed", func(t *testing.T) {
		lim := memory.New(memory.Config{SweepInterval: -1})
		t.Cleanup(func() { lim.Close() })
		c := batching(t, sidecar(t, lim, ""), client.Config{})
		require.NoError(t, c.Close())
		require.NoError(t, c.Close(), "Close is idempotent")
		_, err := c.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Millisecond, Limit: 1, Hits: 1})
		assert.ErrorIs(t, err, rl.ErrClosed)
		_, err = c.CheckRates(ctx, []rl.Request{{ID: "u", Scale: time.Millisecond, Limit: 1, Hits: 1}})
		assert.ErrorIs(t, err, rl.ErrClosed)
	})
}
