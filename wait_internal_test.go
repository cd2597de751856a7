package raterlimiter

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// script answers checks from a list of decisions, one per call, and
// records the requests.
type script struct {
	mu   sync.Mutex
	ds   []Decision
	errs []error
	got  []Request
}

func (s *script) CheckRate(_ context.Context, r Request) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	d, err := s.ds[0], error(nil)
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	if len(s.ds) > 1 {
		s.ds = s.ds[1:]
	}
	return d, err
}

func (s *script) CheckRates(context.Context, []Request) ([]Decision, error) { panic("not used") }

// sleeps records the sleeps Wait asks for, without sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

func TestWaitSleepsRetryAfterThenChecksAgain(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	s := &script{ds: []Decision{
		{Allowed: false, RetryAfter: 300 * time.Millisecond},
		{Allowed: false, RetryAfter: 50 * time.Millisecond},
		{Allowed: true},
	}}
	var sl sleeps
	r := Request{ID: "u", Scale: time.Second, Limit: 10}
	d, err := wait(context.Background(), s, r, sl.sleep, rnd.Int64N)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	require.Len(t, s.got, 3, "checked until allowed")
	require.Len(t, sl.d, 2)
	// Each sleep is the RetryAfter plus a jitter of at most a tenth of the
	// window (Scale/Limit).
	assert.GreaterOrEqual(t, sl.d[0], 300*time.Millisecond)
	assert.LessOrEqual(t, sl.d[0], 400*time.Millisecond)
	assert.GreaterOrEqual(t, sl.d[1], 50*time.Millisecond)
	assert.LessOrEqual(t, sl.d[1], 150*time.Millisecond)
	assert.Zero(t, s.got[0].MaxDelay, "no deadline: no bound on a delay")
}

func TestWaitersOfOneWindowComeBackSpread(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 1))
	// 100 waiters denied by one window, all told to retry in 400 ms: with a
	// limit of 10 per second, they come back over the next 100 ms, not in
	// the same millisecond.
	wakes := map[time.Duration]int{}
	for range 100 {
		s := &script{ds: []Decision{{Allowed: false, RetryAfter: 400 * time.Millisecond}, {Allowed: true}}}
		var sl sleeps
		_, err := wait(context.Background(), s, Request{ID: "u", Scale: time.Second, Limit: 10}, sl.sleep, rnd.Int64N)
		require.NoError(t, err)
		require.Len(t, sl.d, 1)
		require.GreaterOrEqual(t, sl.d[0], 400*time.Millisecond)
		require.LessOrEqual(t, sl.d[0], 500*time.Millisecond)
		wakes[sl.d[0]]++
	}
	assert.Greater(t, len(wakes), 30, "spread over many milliseconds: %v", wakes)
	for at, n := range wakes {
		assert.Less(t, n, 15, "at most a few waiters wake at %v", at)
	}
}

func TestWaitReturnsTheBackendsErrorAsItIs(t *testing.T) {
	s := &script{ds: []Decision{{}}, errs: []error{ErrUnavailable}}
	var sl sleeps
	_, err := wait(context.Background(), s, Request{ID: "u", Scale: time.Second, Limit: 1}, sl.sleep, rand.Int64N)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Empty(t, sl.d, "no retry on an error: the backend's fail mode decides")
}

func TestWaitDeadlineTooClose(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(500*time.Microsecond))
	defer cancel()
	s := &script{ds: []Decision{{Allowed: true}}}
	_, err := wait(ctx, s, Request{ID: "u", Scale: time.Second, Limit: 1}, sleepCtx, rand.Int64N)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, s.got, "nothing counted")
}
