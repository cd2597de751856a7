package redisbackend

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// evalNew runs r's script (slices.lua or leaky.lua) with the given now and
// deadline arguments, as the backend sends it.
func evalNew(b *Backend, r rl.Request, now, deadline string) error {
	k, a := b.queueSlicesArgs(r, now, deadline)
	s := leakyScript
	if r.Algo == rl.Slices {
		s = slicesScript
	}
	return b.conn().Do(context.Background(), eval(b.conn(), s, k, a)).Error()
}

// TestNewScriptsRefusePastDeadline: the deadline rule of check.lua holds
// for slices.lua and leaky.lua too.
func TestNewScriptsRefusePastDeadline(t *testing.T) {
	srv := redistest.Start(t)
	b, err := New(Config{URL: srv.URL(), Prefix: "dl", Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b.Close()
	const t0 = limitertest.T0
	for _, r := range []rl.Request{
		{ID: "u", Scale: 60_000, Limit: 10, Hits: 1, Algo: rl.Slices},
		{ID: "u", Scale: 60_000, Limit: 10, Hits: 1, Algo: rl.Leaky, Queue: 3},
	} {
		key, _ := b.queueSlicesArgs(r, "", "")
		now := strconv.FormatInt(t0, 10)
		err := evalNew(b, r, now, strconv.FormatInt(t0-1, 10))
		require.Error(t, err, r.Algo)
		assert.True(t, isPastDeadline(err), "%s: %v", r.Algo, err)
		assert.Empty(t, hash(t, b, key[0]), "%s: a refused check wrote", r.Algo)
		require.NoError(t, evalNew(b, r, now, now), "%s: at the deadline", r.Algo)
		require.NoError(t, evalNew(b, r, now, ""), "%s: no deadline", r.Algo)
		assert.NotEmpty(t, hash(t, b, key[0]), "%s", r.Algo)
	}
}

// TestSlicesHash: one hash per (id, scale, slice count) under the id's hash
// tag, a field per slice, the fields of slices gone deleted, kept until the
// newest slice leaves; and a clock behind the last change decides at it.
func TestSlicesHash(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.T0)
	b, err := New(Config{URL: srv.URL(), Prefix: "sl", Clock: clock.Now, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	r := rl.Request{ID: "u{1}", Scale: 10_000, Limit: 1000, Hits: 1, Algo: rl.Slices, Slices: 10} // 1 s slices
	var last int64
	for i := range 25 {
		_, err := b.CheckRate(ctx, r)
		require.NoError(t, err)
		last = clock.Now()
		clock.Advance(500 + int64(i%2)*500)
	}
	key, _ := b.queueSlicesArgs(r, "", "")
	assert.Equal(t, "sl:{dXsxfQ}:w:10000:10", key[0])
	h := hash(t, b, key[0])
	assert.LessOrEqual(t, len(h), 10+1, "the window's slices and m: %v", h)
	assert.Contains(t, h, "m")
	ttl, err := b.conn().Do(ctx, b.conn().B().Pttl().Key(key[0]).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, ttl, int64(clockSlack/time.Millisecond), "kept past the newest slice, with the slack of a test clock")

	// Another backend whose clock is a minute behind decides at the last
	// change: the window does not slide back, nothing is lost.
	want, err := b.CheckRate(ctx, rl.Request{ID: r.ID, Scale: r.Scale, Limit: r.Limit, Algo: rl.Slices, Slices: 10})
	require.NoError(t, err)
	behind := limitertest.NewClock(clock.Now() - 60_000)
	b2, err := New(Config{URL: srv.URL(), Prefix: "sl", Clock: behind.Now, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b2.Close()
	got, err := b2.CheckRate(ctx, rl.Request{ID: r.ID, Scale: r.Scale, Limit: r.Limit, Algo: rl.Slices, Slices: 10})
	require.NoError(t, err)
	assert.Equal(t, want.Count, got.Count)
	assert.Equal(t, last, got.Now, "decided at the last change, not a minute back")

	bs, err := b.Buckets(ctx, r.ID)
	require.NoError(t, err)
	require.NotEmpty(t, bs)
	var sum int64
	for _, x := range bs {
		assert.Equal(t, rl.Slices, x.Algo)
		assert.Equal(t, int64(10), x.Slices)
		sum += x.Count
	}
	assert.Equal(t, want.Count, sum, "the listing's slices are the window's")
	n, err := b.Reset(ctx, r.ID, 10_000)
	require.NoError(t, err)
	assert.Equal(t, len(bs), n)
	assert.Empty(t, hash(t, b, key[0]))
}
