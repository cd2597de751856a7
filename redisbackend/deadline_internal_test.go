package redisbackend

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// hash reads a record hash's fields.
func hash(t *testing.T, b *Backend, key string) map[string]string {
	t.Helper()
	m, err := b.conn().Do(context.Background(), b.conn().B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// evalCheck runs the check script for r with the given now and deadline
// arguments, as the backend sends it.
func evalCheck(b *Backend, r rl.Request, now, deadline string) error {
	k, a := b.checkArgs(r, now, deadline)
	return b.conn().Do(context.Background(), eval(b.conn(), b.check, k, a)).Error()
}

// TestScriptRefusesPastDeadline: a check that Redis runs after the caller's
// deadline counts nothing and answers an error that decide turns into
// ErrPastDeadline (a 503 that is true to the counters); at or before the
// deadline, or with none, it counts.
func TestScriptRefusesPastDeadline(t *testing.T) {
	srv := redistest.Start(t)
	b, err := New(Config{URL: srv.URL(), Prefix: "dl", Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b.Close()
	const t0 = limitertest.T0
	for _, a := range []rl.Algo{rl.Fixed, rl.Sliding, rl.Token} {
		r := rl.Request{ID: "u-" + a.String(), Scale: 60_000, Limit: 10, Hits: 1, Algo: a}
		key, _ := b.checkArgs(r, "", "")
		now := strconv.FormatInt(t0, 10)

		err := evalCheck(b, r, now, strconv.FormatInt(t0-1, 10))
		require.Error(t, err, a)
		assert.True(t, isPastDeadline(err), "%s: %v", a, err)
		assert.Empty(t, hash(t, b, key[0]), "%s: a refused check wrote its record", a)

		// The clock Redis reads (TIME) against a deadline long past.
		err = evalCheck(b, r, "", strconv.FormatInt(t0, 10))
		assert.True(t, isPastDeadline(err), "%s: %v", a, err)
		assert.Empty(t, hash(t, b, key[0]), "%s", a)

		require.NoError(t, evalCheck(b, r, now, now), "%s: at the deadline", a)
		require.NoError(t, evalCheck(b, r, now, ""), "%s: no deadline", a)
		require.NoError(t, evalCheck(b, r, "", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)), a)
		assert.NotEmpty(t, hash(t, b, key[0]), "%s", a)
	}
	assert.False(t, isPastDeadline(errors.New("DEADLINE")), "only Redis's own error reply")
}

// TestDeadlineArg: the deadline is given on the script's clock, Config.Clock's
// when set.
func TestDeadlineArg(t *testing.T) {
	b := &Backend{}
	assert.Equal(t, "", b.deadlineArg(context.Background()))
	d := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), d)
	defer cancel()
	assert.Equal(t, strconv.FormatInt(d.UnixMilli(), 10), b.deadlineArg(ctx))
	b.cfg.Clock = func() int64 { return 1000 }
	got, err := strconv.ParseInt(b.deadlineArg(ctx), 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, 1000+time.Hour.Milliseconds(), got, 1000)
}

// TestNeverRewinds: a clock behind a record's last change (crafted here: a
// record modified in the future of the caller's clock) decides at that last
// change instead of opening an earlier window; the count goes on from the
// record's and its window stays the same.
func TestNeverRewinds(t *testing.T) {
	srv := redistest.Start(t)
	const scale = 60_000
	t0 := int64(limitertest.T0 - limitertest.T0%scale + 1000) // 1 s into a window
	var clock int64
	b, err := New(Config{URL: srv.URL(), Prefix: "rw", Timeout: 5 * time.Second,
		Clock: func() int64 { return clock }})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	for _, a := range []rl.Algo{rl.Fixed, rl.Sliding} {
		r := rl.Request{ID: "rewind-" + a.String(), Scale: scale, Limit: 10, Hits: 1, Algo: a}
		key, _ := b.checkArgs(r, "", "")
		c := b.conn()
		// 7 hits, created at t0, last changed at t0+5000.
		require.NoError(t, c.Do(ctx, c.B().Hset().Key(key[0]).FieldValue().
			FieldValue("c", "7").FieldValue("cr", strconv.FormatInt(t0, 10)).
			FieldValue("m", strconv.FormatInt(t0+5000, 10)).Build()).Error())
		// The caller's clock two windows earlier: without the guard this
		// would drop the record and count 1 in an old window.
		clock = t0 - 2*scale
		d, err := b.CheckRate(ctx, r)
		require.NoError(t, err, a)
		assert.Equal(t, int64(8), d.Count, "%s: the count goes on from the record's", a)
		assert.True(t, d.Allowed, a)
		assert.Equal(t, t0+5000, d.Now, "%s: decided at the record's last change", a)
		h := hash(t, b, key[0])
		assert.Equal(t, "8", h["c"], a)
		assert.Equal(t, strconv.FormatInt(t0, 10), h["cr"], "%s: same window", a)
		assert.Equal(t, strconv.FormatInt(t0+5000, 10), h["m"], "%s: modified never goes back", a)

		// A clock a little behind, in the same window, also never rewinds m.
		clock = t0 + 4000
		d, err = b.CheckRate(ctx, r)
		require.NoError(t, err, a)
		assert.Equal(t, int64(9), d.Count, a)
		assert.Equal(t, strconv.FormatInt(t0+5000, 10), hash(t, b, key[0])["m"], a)
	}
}

// lateCtx is a context whose deadline has passed but whose timer has not yet
// marked it done, as a caller's context can be for a moment.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestWaitPastTheCallersDeadline: a deadline error is the caller's, never
// Redis down, once the caller's deadline has passed, even before its context
// says so; and only a deadline error on a call whose own deadline stands is
// stale (sent again).
func TestWaitPastTheCallersDeadline(t *testing.T) {
	b := &Backend{cfg: Config{Timeout: time.Second}}
	late := lateCtx{context.Background()}
	live, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()

	assert.True(t, expired(late))
	assert.False(t, expired(live))
	assert.False(t, expired(context.Background()), "no deadline")

	assert.False(t, b.unavailable(late, context.DeadlineExceeded), "the caller's wait, its timer not yet fired")
	assert.True(t, b.unavailable(live, context.DeadlineExceeded), "the backend's own Timeout ran out")

	assert.True(t, stale(live, context.DeadlineExceeded), "a dropped connection's error, not this call's")
	assert.True(t, stale(context.Background(), context.DeadlineExceeded), "a call with no deadline cannot time out itself")
	assert.False(t, stale(late, context.DeadlineExceeded), "this call's own deadline")
	assert.False(t, stale(live, os.ErrDeadlineExceeded), "an unanswered keep-alive: perhaps sent")
	assert.False(t, stale(live, errors.New("EOF")))
}
