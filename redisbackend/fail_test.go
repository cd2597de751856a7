package redisbackend_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// local is a fallback limiter for FailLocal: the reference model behind a
// mutex, counting its calls.
type local struct {
	mu    sync.Mutex
	m     model
	calls atomic.Int64
}

func newLocal() *local {
	return &local{m: model{recs: map[mkey]algo.Record{}, logs: map[mkey]*algo.Log{}}}
}

func (l *local) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	ds, err := l.CheckRates(ctx, []rl.Request{r})
	if err != nil {
		return rl.Decision{}, err
	}
	return ds[0], nil
}

func (l *local) CheckRates(_ context.Context, rs []rl.Request) ([]rl.Decision, error) {
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UnixMilli()
	out := make([]rl.Decision, len(rs))
	for i, r := range rs {
		out[i] = l.m.check(now, millis.Of(r)).Public()
	}
	return out, nil
}

func (l *local) Buckets(context.Context, string) ([]rl.Bucket, error)      { return nil, nil }
func (l *local) Reset(context.Context, string, time.Duration) (int, error) { return 0, nil }

// outcome is what one call saw.
type outcome struct {
	start, end time.Time
	d          rl.Decision
	err        error
}

// TestOutage kills Redis (and, separately, hangs it with SIGSTOP) under load
// from several goroutines, then brings it back, for every fail mode. It wants:
// no call waits longer than the timeout (plus the scheduling delay measured
// meanwhile on this shared machine); while Redis is gone every call answers
// as the mode documents; Redis is asked at most about once per probe interval
// meanwhile; and the backend recovers by itself. When a try fails while the
// machine was too busy to judge timing (a 1 ms sleep woke up later than the
// timeout), it is tried again, up to three times.
func TestOutage(t *testing.T) {
	for _, how := range []string{"kill", "hang"} {
		for _, mode := range []rl.FailMode{rl.FailClosed, rl.FailOpen, rl.FailLocal} {
			t.Run(how+"/"+mode.String(), func(t *testing.T) {
				for try := 1; ; try++ {
					rec := &recorder{}
					lateness := outage(t, rec, how, mode)
					if len(rec.errs) == 0 {
						return
					}
					if lateness > outageTimeout && try < 3 {
						t.Logf("try %d: the machine was too busy to judge (a 1 ms sleep woke %v late); it saw: %v; trying again",
							try, lateness, rec.errs)
						continue
					}
					for _, e := range rec.errs {
						t.Error(e)
					}
					return
				}
			})
		}
	}
}

// recorder collects what assert and require report for one try of
// TestOutage; require's FailNow ends the try's goroutine.
type recorder struct {
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) FailNow() { runtime.Goexit() }

const outageTimeout = 100 * time.Millisecond

// outage is one try of TestOutage: it reports to rec, and returns the worst
// scheduling delay it saw.
func outage(t *testing.T, rec *recorder, how string, mode rl.FailMode) time.Duration {
	var late atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		outageTry(t, rec, how, mode, &late)
	}()
	<-done
	return time.Duration(late.Load())
}

func outageTry(t *testing.T, rec *recorder, how string, mode rl.FailMode, late *atomic.Int64) {
	const (
		timeout = outageTimeout
		probe   = 200 * time.Millisecond
		slack   = 20 * time.Millisecond
		workers = 4
	)
	srv := redistest.Start(t)
	fb := newLocal()
	var redisCalls atomic.Int64
	var ups, downs, degraded atomic.Int64
	b, err := redisbackend.NewWithProbe(redisbackend.Config{
		URL: srv.URL(), Timeout: timeout, Fail: mode, Fallback: fb,
		OnDegraded: func(e rl.DegradedEvent) {
			assert.Equal(rec, mode, e.Mode)
			assert.ErrorIs(rec, e.Err, rl.ErrUnavailable)
			degraded.Add(int64(e.Checks))
		},
		OnCall: func(string, time.Duration, error) { redisCalls.Add(1) },
		OnCircuit: func(open bool, _ string) {
			if open {
				downs.Add(1)
			} else {
				ups.Add(1)
			}
		},
	}, probe)
	require.NoError(rec, err)
	defer b.Close()

	var mu sync.Mutex
	var outs []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	defer halt() // also when a require ends the try early
	// The machine is shared: how late a 1 ms sleep wakes up is
	// the scheduling delay any call may suffer on top of its own.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			if d := int64(time.Since(t0) - time.Millisecond); d > late.Load() {
				late.Store(d)
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			r := rl.Request{ID: "load", Scale: time.Second, Limit: 1 << 30, Hits: 1, Algo: check.Algos[w%3]}
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				d, err := b.CheckRate(context.Background(), r)
				o := outcome{start: start, end: time.Now(), d: d, err: err}
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
				time.Sleep(time.Millisecond) // bounded load, not a synchronisation
			}
		})
	}
	phase := func(d time.Duration) (time.Time, time.Time) {
		s := time.Now()
		time.Sleep(d)
		return s, time.Now()
	}
	phase(150 * time.Millisecond)
	if how == "kill" {
		srv.Kill()
	} else {
		srv.Pause()
	}
	callsBefore := redisCalls.Load()
	// Calls that start after the first timeout has passed see the
	// outage fully.
	downStart, downEnd := phase(1000 * time.Millisecond)
	callsDown := redisCalls.Load() - callsBefore
	if how == "kill" {
		srv.Restart(t)
	} else {
		srv.Resume()
	}
	upAt := time.Now()
	deadline := upAt.Add(10 * time.Second)
	for !b.Up() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	recovered := time.Since(upAt)
	phase(150 * time.Millisecond)
	halt()

	require.True(rec, b.Up(), "recovered by itself")
	t.Logf("recovered %v after Redis came back; %d redis calls during %v down; %d calls in all",
		recovered, callsDown, downEnd.Sub(downStart), len(outs))
	// Recovery takes a probe interval or so (2*probe+timeout at most on an
	// idle machine); the bound is 10 times that, plus the scheduling delay
	// seen: only a backend that does not recover by itself crosses it.
	assert.Less(rec, recovered, 10*(2*probe+timeout)+time.Duration(late.Load()), "recovery within a probe interval or so")
	assert.Positive(rec, downs.Load(), "the circuit opened")
	assert.Equal(rec, downs.Load(), ups.Load(), "and closed as often")
	// At most one probe per interval, plus the calls in flight
	// when the circuit opened.
	maxCalls := int64(downEnd.Sub(downStart)/probe) + 1 + 2*workers
	assert.LessOrEqual(rec, callsDown, maxCalls, "redis calls while down")

	var longest time.Duration
	var inDown, after int
	for _, o := range outs {
		longest = max(longest, o.end.Sub(o.start))
		if o.end.Sub(o.start) > timeout+10*time.Millisecond {
			t.Logf("long call: %v, started %v after the outage began: %v", o.end.Sub(o.start), o.start.Sub(downStart), o.err)
		}
		switch {
		case o.start.After(downStart.Add(timeout+slack)) && o.end.Before(downEnd):
			inDown++
			checkDown(rec, mode, o)
		case o.start.After(upAt.Add(recovered)):
			after++
			assert.NoError(rec, o.err, "after recovery, %v after the restart", o.start.Sub(upAt))
		}
	}
	lateness := time.Duration(late.Load())
	t.Logf("longest call %v (timeout %v, worst scheduling delay seen %v); %d calls fully in the outage, %d after recovery",
		longest, timeout, lateness, inDown, after)
	// A call waits the timeout at most; the bound is 10 times it, plus the
	// scheduling delay seen: only a call that waits for Redis crosses it.
	assert.LessOrEqual(rec, longest, 10*timeout+lateness, "no call waits longer than the timeout, beyond what scheduling explains")
	assert.Positive(rec, inDown)
	assert.GreaterOrEqual(rec, degraded.Load(), int64(inDown), "OnDegraded counts every answer without Redis")
	assert.Positive(rec, after)
	if mode == rl.FailLocal {
		assert.Positive(rec, fb.calls.Load(), "the fallback decided")
	} else {
		assert.Zero(rec, fb.calls.Load(), "the fallback is for fail-local only")
	}
}

func checkDown(t require.TestingT, mode rl.FailMode, o outcome) {
	switch mode {
	case rl.FailClosed:
		require.Error(t, o.err)
		assert.ErrorIs(t, o.err, rl.ErrUnavailable)
		assert.False(t, o.d.Allowed)
	case rl.FailOpen:
		require.NoError(t, o.err, "open: the decision, with a nil error")
		assert.True(t, o.d.Allowed)
		assert.Zero(t, o.d.Count)
	case rl.FailLocal:
		require.NoError(t, o.err, "local: the fallback's decision, with a nil error")
		assert.Positive(t, o.d.Count, "the fallback counted")
	}
}

// TestFailOpenIsANilError: FailOpen answers as the client's does, the
// decision with a nil error, and reports it through OnDegraded.
func TestFailOpenIsANilError(t *testing.T) {
	srv := redistest.Start(t)
	var events []rl.DegradedEvent
	var mu sync.Mutex
	b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Timeout: 2 * time.Second, Fail: rl.FailOpen,
		OnDegraded: func(e rl.DegradedEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	require.NoError(t, err)
	defer b.Close()
	l := b
	r := rl.Request{ID: "u", Scale: time.Second, Limit: 0, Hits: 1}
	d, err := l.CheckRate(context.Background(), r)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "Redis answers: limit 0 denies")
	srv.Kill()
	r.ID = "v" // u's denial is known here: the cache of denials answers it, Redis or not
	d, err = l.CheckRate(context.Background(), r)
	require.NoError(t, err, "fail-open without the error")
	assert.True(t, d.Allowed)
	ds, err := l.CheckRates(context.Background(), []rl.Request{r, r})
	require.NoError(t, err)
	assert.Len(t, ds, 2)
	assert.True(t, ds[1].Allowed)
	_, err = l.CheckRate(context.Background(), rl.Request{})
	assert.ErrorIs(t, err, rl.ErrInvalid, "other errors pass through")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, 2, "one event per call answered open")
	assert.Equal(t, rl.DegradedEvent{Mode: rl.FailOpen, Checks: 2, Err: events[1].Err}, events[1])
	assert.ErrorIs(t, events[0].Err, rl.ErrUnavailable)
}

// TestClusterMasterDown kills one master of three (no replicas; the others go
// on serving their slots): in a batch over ids of every slot, the ids on the
// live masters are decided by Redis, the others by the fail mode, and the
// error says so.
func TestClusterMasterDown(t *testing.T) {
	c := startCluster(t, "--cluster-require-full-coverage", "no")
	b, err := redisbackend.New(redisbackend.Config{URL: c.URL(), Timeout: 3 * time.Second, Fail: rl.FailOpen})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	rs := make([]rl.Request, 60)
	for i := range rs {
		rs[i] = rl.Request{ID: "node-down-" + strconv.Itoa(i), Scale: check.MaxScale, Limit: 10, Hits: 1}
	}
	ds, err := b.CheckRates(ctx, rs)
	require.NoError(t, err)
	for _, d := range ds {
		require.Equal(t, int64(1), d.Count)
	}
	c.Nodes[2].Kill()
	ds, err = b.CheckRates(ctx, rs)
	require.NoError(t, err, "the fail mode's decisions come with a nil error")
	var fromRedis, failedOpen int
	for _, d := range ds {
		switch {
		case d.Count == 2:
			fromRedis++
		case d.Count == 0 && d.Allowed && d.Remaining == 10:
			failedOpen++
		default:
			t.Errorf("neither Redis's nor fail-open's: %+v", d)
		}
	}
	t.Logf("%d decided by the live masters, %d failed open", fromRedis, failedOpen)
	assert.Positive(t, fromRedis)
	assert.Positive(t, failedOpen)
	assert.Equal(t, len(rs), fromRedis+failedOpen)
}

// TestStartDown starts a backend while its Redis is down: New succeeds, the
// backend answers by its fail mode and connects by itself once Redis is up.
func TestStartDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	cfg := redisbackend.Config{URL: srv.URL(), Timeout: time.Second, Fail: rl.FailOpen}
	var degraded atomic.Bool
	cfg.OnDegraded = func(rl.DegradedEvent) { degraded.Store(true) }
	b, err := redisbackend.NewWithProbe(cfg, 20*time.Millisecond)
	require.NoError(t, err, "Redis down at the start is an outage like any other")
	defer b.Close()
	assert.False(t, b.Up())
	ctx := context.Background()
	r := rl.Request{ID: "u", Scale: time.Minute, Limit: 5, Hits: 1}
	d, err := b.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, rl.FailOpen, d.FailMode, "the decision says the fail mode made it")
	assert.True(t, d.Degraded())
	assert.True(t, degraded.Load(), "answered open, and said so")
	assert.ErrorIs(t, b.Ping(ctx), rl.ErrUnavailable)

	srv.Restart(t)
	require.Eventually(t, func() bool { return b.Ping(ctx) == nil }, 10*time.Second, 10*time.Millisecond, "connected by itself")
	d, err = b.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Count, "decided by Redis")
	assert.False(t, d.Degraded())
	assert.True(t, b.Up())

	// Closing while still trying to connect stops the trying.
	srv.Kill()
	b2, err := redisbackend.NewWithProbe(cfg, 20*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, b2.Close())
	_, err = b2.CheckRate(ctx, r)
	assert.ErrorIs(t, err, rl.ErrClosed)
}

// TestZeroBackend: a Backend not made by New says so, never a nil
// dereference.
func TestZeroBackend(t *testing.T) {
	var b redisbackend.Backend
	ctx := context.Background()
	_, err := b.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Second, Limit: 1})
	assert.ErrorContains(t, err, "redisbackend.New")
	_, err = b.CheckRates(ctx, []rl.Request{{ID: "u", Scale: time.Second, Limit: 1}})
	assert.ErrorContains(t, err, "redisbackend.New")
	assert.ErrorContains(t, b.Ping(ctx), "redisbackend.New")
	_, err = b.Buckets(ctx, "u")
	assert.ErrorContains(t, err, "redisbackend.New")
	_, err = b.Reset(ctx, "u", 0)
	assert.ErrorContains(t, err, "redisbackend.New")
	assert.False(t, b.Up())
	assert.NoError(t, b.Close())
}
