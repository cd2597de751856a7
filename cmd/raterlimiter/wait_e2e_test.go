package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EWaitAndMaxWait: through the binary, wait=1 holds an answer for
// its turn within -max-wait, a longer delay is a 429 at once that takes no
// place, and SIGTERM releases a held answer.
func TestE2EWaitAndMaxWait(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	s := start(t, nil, "-max-wait", "5s")
	// Five a minute: one every 12 s, a queue of 3.
	const q = "/check_rate?id=w&scale=60000&limit=5&algo=leaky&queue=3"
	first := decode[body](t, s.get(t, q).body)
	require.True(t, first.Allowed)
	require.Zero(t, first.Delay)
	start := time.Now()
	r := s.get(t, q+"&wait=1")
	assert.Equal(t, 429, r.status, "a wait of about 12 s is past -max-wait: %s", r.body)
	// Held for -max-wait or for its turn it would take 5 or 12 s: the
	// bound is far above what a refusal takes on a busy machine.
	assert.Less(t, time.Since(start), 5*time.Second, "refused at once")
	assert.Equal(t, int64(1), decode[body](t, s.get(t, q+"&hits=0").body).Count, "no place taken")

	// One every 200 ms: the second waits about 200 ms, held by the sidecar.
	const fast = "/check_rate?id=f&scale=1000&limit=5&algo=leaky&queue=3&wait=1"
	require.Equal(t, 200, s.get(t, fast).status)
	start = time.Now()
	r = s.get(t, fast)
	took := time.Since(start)
	require.Equal(t, 200, r.status, r.body)
	held := decode[body](t, r.body).Delay
	assert.Positive(t, held)
	assert.GreaterOrEqual(t, took, time.Duration(held)*time.Millisecond, "held for delay_ms")

	// A held answer leaves at SIGTERM, answered as decided.
	const slow = "/check_rate?id=s&scale=1000&limit=1&algo=leaky&queue=1&wait=1"
	require.Equal(t, 200, s.get(t, slow).status)
	got := make(chan reply, 1)
	go func() { got <- s.do(t, "GET", slow, "", "") }()
	time.Sleep(300 * time.Millisecond) // the second is held for about a second
	start = time.Now()
	require.NoError(t, s.stop(t))
	select {
	case r := <-got:
		assert.Equal(t, 200, r.status, r.body)
	case <-time.After(10 * time.Second):
		t.Fatal("the held answer was not released at shutdown")
	}
	assert.Less(t, time.Since(start), 5*time.Second)
}
