package check_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

// delayer answers every check with a fixed decision and remembers the
// request it was given.
type delayer struct {
	d   rl.Decision
	err error
	got []rl.Request
}

func (c *delayer) CheckRate(_ context.Context, r rl.Request) (rl.Decision, error) {
	c.got = append(c.got, r)
	return c.d, c.err
}

func TestWait(t *testing.T) {
	r := rl.Request{ID: "u", Scale: time.Second, Limit: 5, Hits: 1, Algo: rl.Leaky, Queue: 3}
	t.Run("sleeps the delay", func(t *testing.T) {
		c := &delayer{d: rl.Decision{Allowed: true, Delay: 30 * time.Millisecond}}
		start := time.Now()
		d, err := check.Wait(context.Background(), c, r)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
		require.Len(t, c.got, 1)
		assert.Equal(t, time.Duration(0), c.got[0].MaxDelay, "no deadline: no bound")
	})
	t.Run("the deadline bounds the delay", func(t *testing.T) {
		c := &delayer{d: rl.Decision{Allowed: false, RetryAfter: 100 * time.Millisecond}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		d, err := check.Wait(ctx, c, r)
		require.NoError(t, err, "a refusal is a decision, not an error")
		assert.False(t, d.Allowed)
		require.Len(t, c.got, 1)
		assert.InDelta(t, time.Hour, c.got[0].MaxDelay, float64(time.Second))
		assert.Zero(t, c.got[0].MaxDelay%time.Millisecond, "whole milliseconds")
	})
	t.Run("the request's own bound wins when smaller", func(t *testing.T) {
		c := &delayer{d: rl.Decision{Allowed: true}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		r := r
		r.MaxDelay = 250 * time.Millisecond
		_, err := check.Wait(ctx, c, r)
		require.NoError(t, err)
		assert.Equal(t, 250*time.Millisecond, c.got[0].MaxDelay)
	})
	t.Run("a deadline too close counts nothing", func(t *testing.T) {
		c := &delayer{d: rl.Decision{Allowed: true}}
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(500*time.Microsecond))
		defer cancel()
		_, err := check.Wait(ctx, c, r)
		require.ErrorIs(t, err, check.ErrDeadlineTooClose)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, c.got)
	})
	t.Run("a cancelled sleep returns the decision and the context's error", func(t *testing.T) {
		c := &delayer{d: rl.Decision{Allowed: true, Delay: time.Minute}}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		start := time.Now()
		d, err := check.Wait(ctx, c, r)
		require.ErrorIs(t, err, context.Canceled)
		assert.True(t, d.Allowed, "the place was taken")
		assert.Less(t, time.Since(start), 30*time.Second)
	})
	t.Run("a done context checks nothing", func(t *testing.T) {
		c := &delayer{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := check.Wait(ctx, c, r)
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, c.got)
	})
	t.Run("an error returns at once", func(t *testing.T) {
		boom := errors.New("boom")
		c := &delayer{d: rl.Decision{Allowed: true, Delay: time.Minute}, err: boom}
		_, err := check.Wait(context.Background(), c, r)
		require.ErrorIs(t, err, boom)
	})
}
