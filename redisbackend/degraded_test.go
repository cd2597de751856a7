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

// TestDegradedDecisionsSayTheirFailMode: a check Redis did not answer is
// decided by the fail mode, with a nil error, and its FailMode says which;
// a failed Ping opens the circuit and OnCircuit says why.
func TestDegradedDecisionsSayTheirFailMode(t *testing.T) {
	srv := redistest.Start(t)
	var reasons []string
	// No probe while the test runs: the check after the failed ping is
	// answered by the open circuit, however slow the machine.
	b, err := redisbackend.NewWithProbe(redisbackend.Config{URL: srv.URL(), Timeout: time.Second, Fail: rl.FailOpen,
		OnCircuit: func(open bool, reason string) {
			if open {
				reasons = append(reasons, reason)
			}
		}}, time.Hour)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	require.NoError(t, b.Ping(ctx))
	assert.True(t, b.Up())
	d, err := b.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Minute, Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, rl.FailClosed, d.FailMode, "decided by Redis")

	srv.Kill()
	err = b.Ping(ctx)
	assert.ErrorIs(t, err, rl.ErrUnavailable)
	require.Len(t, reasons, 1)
	assert.Contains(t, []string{"refused", "reset", "closed"}, reasons[0])
	assert.False(t, b.Up(), "a failed ping opens the circuit")
	for _, r := range []rl.Request{{ID: "u", Scale: time.Minute, Limit: 1}, {ID: "v", Scale: time.Minute, Limit: 0}} {
		d, err = b.CheckRate(ctx, r)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "fail open")
		assert.Equal(t, rl.FailOpen, d.FailMode)
		assert.True(t, d.Degraded())
	}
	ds, err := b.CheckRates(ctx, []rl.Request{{ID: "u", Scale: time.Minute, Limit: 1}})
	require.NoError(t, err)
	assert.Equal(t, rl.FailOpen, ds[0].FailMode)
}
