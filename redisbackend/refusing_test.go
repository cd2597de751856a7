package redisbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestRefusingWrites: a Redis full at maxmemory with noeviction answers
// reads and refuses every write with OOM. It cannot count a check, so it is
// unavailable: the fail mode answers, Ping reports it (a PING alone would
// pass), and a peek, which only reads, does not close the circuit. Once
// Redis accepts writes, Ping closes the circuit and checks count on Redis
// again.
func TestRefusingWrites(t *testing.T) {
	srv := redistest.Start(t)
	var states []bool
	var reasons []string
	b, err := redisbackend.NewWithProbe(redisbackend.Config{URL: srv.URL(), Fail: rl.FailOpen, DenyCache: -1,
		OnCircuit: func(open bool, reason string) { states = append(states, !open); reasons = append(reasons, reason) }},
		10*time.Millisecond)
	require.NoError(t, err)
	defer b.Close()
	ctl := b
	ctx := context.Background()
	r := rl.Request{ID: "u", Scale: time.Minute, Limit: 5, Hits: 1, Algo: rl.Sliding}
	_, err = b.CheckRate(ctx, r)
	require.NoError(t, err)

	_, err = srv.Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	require.NoError(t, err)
	_, err = srv.Do("CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)

	err = ctl.Ping(ctx)
	require.ErrorIs(t, err, rl.ErrUnavailable, "PING answers, writes do not")
	require.NotEmpty(t, reasons)
	assert.Equal(t, "oom", reasons[len(reasons)-1], "the circuit opened for Redis full")
	assert.False(t, ctl.Up())
	for _, algo := range []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log, rl.Slices, rl.Leaky} {
		d, err := b.CheckRate(ctx, rl.Request{ID: "v", Scale: time.Minute, Limit: 5, Hits: 1, Algo: algo})
		require.NoError(t, err, "%v", algo)
		assert.True(t, d.Allowed, "%v: fail open", algo)
	}
	// Peeks read only; those that probe the circuit are answered by Redis
	// and must not close it.
	peek := r
	peek.Hits = 0
	for range 5 {
		time.Sleep(15 * time.Millisecond)
		_, _ = b.CheckRate(ctx, peek)
	}
	assert.False(t, ctl.Up(), "a read does not close a circuit opened for refused writes")
	assert.Equal(t, []bool{false}, states)

	_, err = srv.Do("CONFIG", "SET", "maxmemory", "0")
	require.NoError(t, err)
	require.NoError(t, ctl.Ping(ctx))
	assert.True(t, ctl.Up())
	d, err := b.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Count, "counted on Redis again, the first check kept")
	assert.Equal(t, []bool{false, true}, states)
}
