package redisbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/degrade"
	"github.com/raterlimiter/raterlimiter/internal/redisctl"
	"github.com/raterlimiter/raterlimiter/internal/redistest"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestSidecarView: the sidecar checks through degrade.Strict's view of a
// backend, and its /healthz asks that view for Ping (api's pinger): the
// view keeps the health check that left Backend's public methods, and
// redisctl.Of finds the backend's plumbing through it. A limiter that is
// not a Redis backend has none.
func TestSidecarView(t *testing.T) {
	srv := redistest.Start(t)
	// No probe while the test runs: the check after the failed ping is
	// answered by the open circuit, however slow the machine.
	b, err := redisctl.New[*redisbackend.Backend](redisbackend.Config{URL: srv.URL(), Timeout: time.Second, Fail: rl.FailOpen},
		redisctl.Options{ProbeInterval: time.Hour})
	require.NoError(t, err)
	defer b.Close()
	view := degrade.Strict(b)
	p, ok := view.(interface{ Ping(context.Context) error })
	require.True(t, ok, "the sidecar's view answers Ping")
	ctl, ok := redisctl.Of(view)
	require.True(t, ok)
	ctx := context.Background()
	require.NoError(t, p.Ping(ctx))
	assert.True(t, ctl.Up())
	assert.True(t, redisctl.MustOf(b).Up())

	srv.Kill()
	err = p.Ping(ctx)
	assert.ErrorIs(t, err, rl.ErrUnavailable)
	assert.Contains(t, []string{"refused", "reset", "closed"}, redisctl.Reason(err))
	assert.False(t, ctl.Up(), "a failed ping opens the circuit")
	_, err = view.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Minute, Limit: 1})
	assert.ErrorIs(t, err, redisctl.ErrCircuitOpen, "the view's degraded answer names the open circuit")

	m := memory.New(memory.Config{})
	defer m.Close()
	_, ok = redisctl.Of(m)
	assert.False(t, ok)
	_, ok = redisctl.Of((*redisbackend.Backend)(nil))
	assert.False(t, ok)
}
