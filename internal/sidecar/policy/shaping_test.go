package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// TestEngineShapes: a leaky policy's requests queue with the policy's queue
// and, when it waits, carry the engine's bound on the delay; a slices
// policy's carry its slice count.
func TestEngineShapes(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 1024 + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	f := mustParse(t, `policies:
  - name: queued
    match: {path_prefix: /q}
    key: ip
    algo: leaky
    limit: 5
    scale: 1s
    queue: 3
    wait: true
  - name: hourly
    match: {path_prefix: /h}
    key: ip
    algo: slices
    slices: 60
    limit: 2
    scale: 1h
`)
	q := f.Lookup("queued")
	require.NotNil(t, q)
	assert.Equal(t, rl.Leaky, q.Algo)
	assert.Equal(t, int64(3), q.Queue)
	assert.True(t, q.Wait)
	e := &policy.Engine{Limiter: lim, MaxKeyBytes: 1024, MaxWaitMS: 500}
	ctx := context.Background()
	decide := func(in *policy.Input) policy.Result {
		cs, _ := f.Match(in, nil, nil)
		rs, err := e.Decide(ctx, cs, nil)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		return rs[0]
	}
	in := input("GET", "h", "/q", "1.2.3.4")
	var delays []int64
	for range 4 {
		r := decide(in)
		assert.Equal(t, 500*time.Millisecond, r.Request.MaxDelay, "a waiting rule bounds its delay")
		assert.Equal(t, int64(3), r.Request.Queue)
		if r.Decision.Allowed {
			delays = append(delays, r.Decision.Delay.Milliseconds())
		}
	}
	assert.Equal(t, []int64{0, 200, 400}, delays, "the fourth would wait 600 ms, past the bound: refused")

	hin := input("GET", "h", "/h", "1.2.3.4")
	r := decide(hin)
	assert.Equal(t, int64(60), r.Request.Slices)
	assert.Zero(t, r.Request.MaxDelay, "only a waiting rule is bounded")
	assert.True(t, decide(hin).Decision.Allowed)
	assert.False(t, decide(hin).Decision.Allowed)
}
