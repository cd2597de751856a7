package redisbackend

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// exists reports whether key exists.
func exists(t *testing.T, b *Backend, key string) bool {
	t.Helper()
	n, err := b.conn().Do(context.Background(), b.conn().B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// get reads a packed record of n numbers.
func get(t *testing.T, b *Backend, key string, n int) []int64 {
	t.Helper()
	s, err := b.conn().Do(context.Background(), b.conn().B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	v, ok := unpack(s, n)
	require.True(t, ok, "%q", s)
	return v
}

// checkCall returns the call that decides r at now on the client's clock,
// with the scripts' now argument nowArg and deadline argument deadline (-1:
// Redis's TIME, none), as the backend sends it.
func checkCall(b *Backend, r millis.Request, now, nowArg, deadline int64) call {
	calls, at := b.checkCalls([]millis.Request{r}, []int{0}, nil, now, nowArg, deadline)
	return calls[at[0]]
}

// evalCheck runs the check script of r with the given arguments (EVAL).
func evalCheck(b *Backend, r millis.Request, now, nowArg, deadline int64) error {
	c := checkCall(b, r, now, nowArg, deadline)
	err := b.conn().Do(context.Background(), c.build(b.conn(), true)).Error()
	if rueidis.IsRedisNil(err) {
		return nil // a script that found no record answers nil
	}
	return err
}

// TestScriptRefusesPastDeadline: a check that Redis runs after the caller's
// deadline counts nothing and answers an error that decide turns into
// errPastDeadline (a 503 that is true to the counters); at or before the
// deadline, or with none, it counts. Every script keeps the rule; fixed
// windows keep it with Config.Deadlines.
func TestScriptRefusesPastDeadline(t *testing.T) {
	srv := redistest.Start(t)
	b, err := New(Config{URL: srv.URL(), Prefix: "dl", Timeout: 5 * time.Second, Deadlines: true})
	require.NoError(t, err)
	defer b.Close()
	t0 := limitertest.T0.UnixMilli()
	for _, a := range check.Algos {
		r := millis.Request{ID: "u-" + a.String(), Scale: 60_000, Limit: 10, Hits: 1, Algo: a}
		key := checkCall(b, r, t0, -1, -1).key

		err := evalCheck(b, r, t0, t0, t0-1)
		require.Error(t, err, a)
		assert.True(t, isPastDeadline(err), "%s: %v", a, err)
		assert.False(t, exists(t, b, key), "%s: a refused check wrote its record", a)

		// The clock Redis reads (TIME) against a deadline long past.
		err = evalCheck(b, r, t0, -1, t0)
		assert.True(t, isPastDeadline(err), "%s: %v", a, err)
		assert.False(t, exists(t, b, key), "%s", a)

		require.NoError(t, evalCheck(b, r, t0, t0, t0), "%s: at the deadline", a)
		require.NoError(t, evalCheck(b, r, t0, t0, -1), "%s: no deadline", a)
		require.NoError(t, evalCheck(b, r, t0, -1, time.Now().Add(time.Hour).UnixMilli()), a)
		assert.True(t, exists(t, b, key), "%s", a)
	}
	assert.False(t, isPastDeadline(errors.New("DEADLINE")), "only Redis's own error reply")
}

// TestDeadlineArg: with Config.Deadlines the deadline is given on the
// script's clock, Config.Clock's when set; without, none.
func TestDeadlineArg(t *testing.T) {
	b := &Backend{}
	d := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), d)
	defer cancel()
	assert.Equal(t, int64(-1), b.deadlineArg(ctx), "without Deadlines")
	b.cfg.Deadlines = true
	assert.Equal(t, int64(-1), b.deadlineArg(context.Background()), "no deadline")
	assert.Equal(t, d.UnixMilli(), b.deadlineArg(ctx))
	b.cfg.Clock = func() time.Time { return time.UnixMilli(1000) }
	assert.InDelta(t, 1000+time.Hour.Milliseconds(), b.deadlineArg(ctx), 1000)
}

// TestNeverRewinds: a clock behind a record's last change (crafted here: a
// record modified in the future of the caller's clock) decides at that last
// change instead of opening an earlier window; the count goes on from the
// record's and its window stays the same.
func TestNeverRewinds(t *testing.T) {
	srv := redistest.Start(t)
	const scale = 60_000
	t0 := limitertest.T0.UnixMilli() - limitertest.T0.UnixMilli()%scale + 1000 // 1 s into a window
	var clock int64
	b, err := New(Config{URL: srv.URL(), Prefix: "rw", Timeout: 5 * time.Second,
		Clock: func() time.Time { return time.UnixMilli(clock) }})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	r := millis.Request{ID: "rewind", Scale: scale, Limit: 10, Hits: 1, Algo: rl.Sliding}
	key := checkCall(b, r, t0, t0, -1).key
	// 7 hits, last changed at t0+5000, created at t0.
	c := b.conn()
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value(packArgs(7, t0+5000, t0, 0, 0, 0)).Build()).Error())
	// The caller's clock two windows earlier: without the guard this would
	// drop the record and count 1 in an old window.
	clock = t0 - 2*scale
	d, err := b.checkMS(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(8), d.Count, "the count goes on from the record's")
	assert.True(t, d.Allowed)
	assert.Equal(t, t0+5000, d.Now, "decided at the record's last change")
	assert.Equal(t, []int64{8, t0 + 5000, t0, 0, 0, 0}, get(t, b, key, 6), "same window, modified never goes back")

	// A clock a little behind, in the same window, also never rewinds m.
	clock = t0 + 4000
	d, err = b.checkMS(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(9), d.Count)
	assert.Equal(t, []int64{9, t0 + 5000, t0, 0, 0, 0}, get(t, b, key, 6))
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
