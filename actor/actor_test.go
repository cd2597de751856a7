package actor_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

const t0 = 1_700_000_040_000

func newActor(t *testing.T, cfg actor.Config) *actor.Actor {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = func() int64 { return t0 }
	}
	a := actor.New(cfg)
	t.Cleanup(func() { a.Close() })
	return a
}

func hit(id string) millis.Request { return millis.Request{ID: id, Scale: 1000, Limit: 100, Hits: 1} }

// waitCtx bounds a test's wait so a hang fails instead of blocking the run.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSupervisorRestartsKeepingTheStore(t *testing.T) {
	var logs bytes.Buffer
	a := newActor(t, actor.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a.SetHook(func(r any) {
		if req, ok := r.(millis.Request); ok && req.ID == "boom" {
			panic("injected")
		}
	})
	ctx := waitCtx(t)
	for range 3 {
		_, err := a.CheckRate(ctx, hit("u"))
		require.NoError(t, err)
	}
	_, err := a.CheckRate(ctx, hit("boom"))
	require.ErrorIs(t, err, actor.ErrPanicked)
	require.ErrorIs(t, err, rl.ErrUnavailable)
	require.NoError(t, ctx.Err(), "the caller is answered, not left to time out")

	d, err := a.CheckRate(ctx, hit("u"))
	require.NoError(t, err)
	assert.Equal(t, int64(4), d.Count, "counts from before the panic survive")
	assert.Equal(t, uint64(1), a.Restarts())
	assert.Contains(t, logs.String(), "panic recovered")
	assert.Contains(t, logs.String(), "injected")

	// Again: the supervisor keeps restarting.
	_, err = a.CheckRate(ctx, hit("boom"))
	require.ErrorIs(t, err, actor.ErrPanicked)
	d, err = a.CheckRate(ctx, hit("u"))
	require.NoError(t, err)
	assert.Equal(t, int64(5), d.Count)
	assert.Equal(t, uint64(2), a.Restarts())
}

func TestCloseAnswersEveryone(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	a := actor.New(actor.Config{Clock: func() int64 { return t0 }, Mailbox: 4})
	a.SetHook(func(r any) {
		if req, ok := r.(millis.Request); ok && req.ID == "block" {
			close(started)
			<-release
		}
	})
	ctx := waitCtx(t)
	blocked := make(chan error, 1)
	go func() { _, err := a.CheckRate(ctx, hit("block")); blocked <- err }()
	<-started
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			_, err := a.CheckRate(ctx, hit("queued"))
			errs <- err
		})
	}
	for a.Pending() < 4 { // the mailbox is full: the rest wait to send
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	close(release)
	<-closed
	wg.Wait()
	close(errs)
	require.NoError(t, <-blocked, "the message in hand is finished")
	n := 0
	for err := range errs {
		n++
		if err != nil {
			assert.ErrorIs(t, err, rl.ErrClosed, "a waiting caller is served or told the actor closed")
		}
	}
	assert.Equal(t, 32, n, "every caller was answered")
	require.NoError(t, a.Close(), "Close is idempotent")
	_, err := a.CheckRate(ctx, hit("late"))
	assert.ErrorIs(t, err, rl.ErrClosed)
	_, err = a.Sweep(ctx)
	assert.ErrorIs(t, err, rl.ErrClosed)
}

func TestContextEndsTheWait(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	defer close(release)
	a := newActor(t, actor.Config{})
	a.SetHook(func(r any) {
		if req, ok := r.(millis.Request); ok && req.ID == "slow" {
			close(started)
			<-release
		}
	})
	go a.CheckRate(context.Background(), hit("slow"))
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := a.CheckRate(ctx, hit("u"))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, rl.ErrUnavailable)
}

func TestClockNeverGoesBack(t *testing.T) {
	now := int64(t0 + 1500)
	var mu sync.Mutex
	a := newActor(t, actor.Config{Clock: func() int64 { mu.Lock(); defer mu.Unlock(); return now }})
	ctx := waitCtx(t)
	d, err := a.CheckRate(ctx, hit("u"))
	require.NoError(t, err)
	assert.Equal(t, int64(t0+1500), d.Now)
	mu.Lock()
	now = t0 + 500 // the wall clock stepped back a second
	mu.Unlock()
	d, err = a.CheckRate(ctx, hit("u"))
	require.NoError(t, err)
	assert.Equal(t, int64(t0+1500), d.Now)
	assert.Equal(t, int64(2), d.Count, "same window, not the past one")
}

func TestSweepAndDo(t *testing.T) {
	now := int64(t0)
	var mu sync.Mutex
	a := newActor(t, actor.Config{Clock: func() int64 { mu.Lock(); defer mu.Unlock(); return now }})
	ctx := waitCtx(t)
	const ids = 600 // a pass of three steps of 256 records
	for i := range ids {
		_, err := a.CheckRate(ctx, hit(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	st, err := a.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, actor.SweepStats{Examined: ids}, st)
	mu.Lock()
	now += 1000
	mu.Unlock()
	st, err = a.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, actor.SweepStats{Examined: ids, Deleted: ids}, st)
	var n int
	require.NoError(t, a.Do(ctx, func(s *buckets.Store, _ int64) { n = s.Len() }))
	assert.Equal(t, 0, n)
	assert.Equal(t, 0, a.Len())
}

// TestAbandonedBatchIsSkipped: a caller that gives up on a batch before the
// actor took it gets its error at once, and the actor skips the batch.
func TestAbandonedBatchIsSkipped(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	a := newActor(t, actor.Config{})
	a.SetHook(func(r any) {
		if req, ok := r.(millis.Request); ok && req.ID == "block" {
			close(started)
			<-release
		}
	})
	go a.CheckRate(context.Background(), hit("block"))
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Decide(ctx, []millis.Request{hit("a"), hit("a")})
	require.Error(t, err, "given up before the actor was free")
	close(release)
	d, err := a.CheckRate(waitCtx(t), millis.Request{ID: "a", Scale: 1000, Limit: 100})
	require.NoError(t, err)
	assert.Equal(t, int64(0), d.Count, "the abandoned batch is skipped: not counted")
}

// TestLargeBatchLetsChecksThrough: a check sent while a large batch is being
// decided is answered between two of its chunks, not after the whole batch.
func TestLargeBatchLetsChecksThrough(t *testing.T) {
	firstChunk, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := newActor(t, actor.Config{})
	a.SetHook(func(r any) {
		if req, ok := r.(millis.Request); ok && req.ID == "" { // a batch
			once.Do(func() { close(firstChunk); <-release })
		}
	})
	ctx := waitCtx(t)
	rs := make([]millis.Request, 10_000)
	for i := range rs {
		rs[i] = hit("batch")
		rs[i].Limit = 1 << 20
	}
	batchDone := make(chan error, 1)
	var out []millis.Decision
	go func() {
		var err error
		out, err = a.Decide(ctx, rs)
		batchDone <- err
	}()
	<-firstChunk
	single := make(chan millis.Decision, 1)
	go func() {
		d, err := a.CheckRate(ctx, millis.Request{ID: "batch", Scale: 1000, Limit: 1 << 20})
		assert.NoError(t, err)
		single <- d
	}()
	for a.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	d := <-single
	assert.Less(t, d.Count, int64(len(rs)), "answered between chunks, before the batch ended")
	assert.Positive(t, d.Count)
	require.NoError(t, <-batchDone)
	for i, d := range out {
		require.Equal(t, int64(i+1), d.Count, "the batch decides in order")
	}
}
