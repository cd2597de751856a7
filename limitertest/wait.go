package limitertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

// waiter is what every backend of this module has: raterlimiter.Wait as a
// method.
type waiter interface {
	Wait(ctx context.Context, r rl.Request) (rl.Decision, error)
}

// realClock makes clock follow the wall clock, to the millisecond, until
// the test ends: Wait sleeps real time, and the limiter must see it pass.
func realClock(t *testing.T, clock *Clock) {
	t.Helper()
	clock.Set(time.Now())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				clock.Set(time.Now())
			}
		}
	})
	t.Cleanup(func() { close(done); wg.Wait() })
}

// runWait checks that Wait waits for capacity with every algorithm, on
// the method and on raterlimiter.Wait.
func runWait(t *testing.T, f Factory) {
	t.Helper()
	for _, a := range check.Algos {
		t.Run("wait/"+a.String()+"/every waiter gets through", func(t *testing.T) {
			clock := NewClock(T0)
			l := f(t, clock)
			realClock(t, clock)
			r := rl.Request{ID: "w-" + a.String(), Scale: 200 * time.Millisecond, Limit: 2, Algo: a}
			if a == rl.Slices {
				r.Slices = 4
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Six waiters for a limit of two per window: the first two pass
			// at once, the others only once the window has let them in.
			var wg sync.WaitGroup
			errs := make([]error, 6)
			ds := make([]rl.Decision, 6)
			for i := range 6 {
				wg.Go(func() {
					if i%2 == 0 {
						ds[i], errs[i] = l.(waiter).Wait(ctx, r)
					} else {
						ds[i], errs[i] = rl.Wait(ctx, l, r)
					}
				})
			}
			wg.Wait()
			for i := range 6 {
				require.NoError(t, errs[i], "waiter %d", i)
				assert.True(t, ds[i].Allowed, "waiter %d returns allowed, never with a denial", i)
			}
			require.NoError(t, ctx.Err())
		})
	}
	t.Run("wait/the next chance after the deadline returns at once", func(t *testing.T) {
		clock := NewClock(T0)
		l := f(t, clock)
		realClock(t, clock)
		// Token: its next chance is an hour away whatever the time of day (a
		// fixed window of an hour ends at the top of the wall clock's hour).
		r := rl.Request{ID: "w-deadline", Scale: time.Hour, Limit: 1, Algo: rl.Token}
		d, err := l.CheckRate(context.Background(), r)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d, err = rl.Wait(ctx, l, r)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NoError(t, ctx.Err(), "returned before the deadline, without sleeping in vain")
		assert.False(t, d.Allowed)
		assert.Greater(t, d.RetryAfter, 20*time.Second, "the decision that said so")
	})
	t.Run("wait/leaky keeps its queue and refuses a place past the deadline", func(t *testing.T) {
		clock := NewClock(T0)
		l := f(t, clock)
		realClock(t, clock)
		r := rl.Request{ID: "w-leaky", Scale: time.Minute, Limit: 1, Algo: rl.Leaky, Queue: 5}
		d, err := l.CheckRate(context.Background(), r)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err = l.(waiter).Wait(ctx, r)
		require.ErrorIs(t, err, context.DeadlineExceeded, "a minute's turn does not fit in 5 s")
		assert.NoError(t, ctx.Err(), "refused at once, not slept")
		assert.False(t, d.Allowed)
		peek, err := l.CheckRate(context.Background(), rl.Request{ID: "w-leaky", Scale: time.Minute, Limit: 1, Algo: rl.Leaky, Queue: 5, Peek: true})
		require.NoError(t, err)
		assert.Equal(t, int64(1), peek.Count, "no place taken in the queue")
		// A short queue's turn fits: Wait sleeps the delay and returns allowed.
		q := rl.Request{ID: "w-leaky-short", Scale: 100 * time.Millisecond, Limit: 1, Algo: rl.Leaky, Queue: 2}
		_, err = l.CheckRate(context.Background(), q)
		require.NoError(t, err)
		d, err = l.(waiter).Wait(ctx, q)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.Positive(t, d.Delay, "it waited its turn in the queue")
	})
	t.Run("wait/a request that can never pass fails at once", func(t *testing.T) {
		l := f(t, NewClock(T0))
		for _, r := range []rl.Request{
			{ID: "w-never", Scale: time.Second, Limit: 2, Hits: 3},
			{ID: "w-never", Scale: time.Second, Limit: 0},
		} {
			d, err := rl.Wait(context.Background(), l, r)
			require.ErrorIs(t, err, rl.ErrInvalid, fmt.Sprint(r))
			assert.False(t, d.Allowed)
		}
	})
	t.Run("wait/a context that ends during the sleep", func(t *testing.T) {
		clock := NewClock(T0)
		l := f(t, clock)
		realClock(t, clock)
		r := rl.Request{ID: "w-cancel", Scale: 10 * time.Second, Limit: 1}
		_, err := l.CheckRate(context.Background(), r)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		d, err := rl.Wait(ctx, l, r)
		require.True(t, errors.Is(err, context.Canceled), "got %v", err)
		assert.False(t, d.Allowed, "the last decision comes back with the error")
	})
}
