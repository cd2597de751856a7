package nethttp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/check"
	rlpolicy "github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

// TestByPolicyName checks each request by the sidecar's own policy: the
// sidecar's limit, window and name, not the application's.
func TestByPolicyName(t *testing.T) {
	behind := memory.New(memory.Config{Clock: clock, SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + rlpolicy.IDOverhead})
	t.Cleanup(func() { behind.Close() })
	f, err := rlpolicy.Parse("p.yaml", []byte("policies:\n  - {name: pages, key: ip, limit: 2, scale: 30s}\n"))
	require.NoError(t, err)
	url := tooltest.Serve(t, api.Config{Limiter: behind, Policies: f, PoliciesOnly: true})
	c, err := client.New(client.Config{URL: url, Clock: clock, Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	h := newMW(t, middleware.Config{Limiter: c, PolicyName: "pages"}, nil)
	for i, want := range []int{200, 200, 429} {
		resp, _, reached := serve(t, h, "198.51.100.7:40000", nil)
		assert.Equal(t, want, resp.StatusCode, "request %d", i)
		assert.Equal(t, want == 200, reached)
		assert.Equal(t, `"pages";q=2;w=30`, resp.Header.Get("RateLimit-Policy"), "the sidecar's limit and window, by name")
	}

	d, r, err := c.CheckPolicy(t.Context(), "pages", "someone", 0)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, rl.Request{ID: "someone", Scale: 30 * time.Second, Limit: 2, Algo: rl.Fixed}, r)
	_, _, err = c.CheckPolicy(t.Context(), "nope", "someone", 0)
	assert.ErrorIs(t, err, rl.ErrInvalid, "an unknown policy")

	_, err = nethttp.New(middleware.Config{Limiter: behind, PolicyName: "pages"}, nil)
	assert.ErrorContains(t, err, "checks by policy", "the embedded limiter has no policies")
}
