package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/raterlimiter/raterlimiter/api"
)

// pinged is a backend with a health check that fails while down is set,
// and whose checks never answer (so only /livez and /readyz can pass).
type pinged struct {
	stuck
	down  atomic.Bool
	pings atomic.Int64
}

func (p *pinged) Ping(ctx context.Context) error {
	p.pings.Add(1)
	if p.down.Load() {
		return errors.New("redis: connection refused")
	}
	return nil
}

// hung is a backend whose health check never answers before its context
// ends.
type hung struct{ stuck }

func (*hung) Ping(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestLivezNeverAsksTheBackend: /livez answers 200 whatever the backend
// does, /readyz follows the backend's health check, bounded by the timeout.
func TestLivezNeverAsksTheBackend(t *testing.T) {
	p := &pinged{}
	h := newHarness(t, api.Config{Limiter: p, Timeout: 50 * time.Millisecond})

	p.down.Store(true)
	r := h.get(t, "/livez")
	assert.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "ok", r.body)
	assert.Zero(t, p.pings.Load(), "/livez asked the backend")
	r = h.get(t, "/readyz")
	assert.Equal(t, 503, r.status, r.body)
	assert.Equal(t, "1", r.headers["Retry-After"])
	var e errBody
	require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
	assert.Equal(t, "api: not ready: the backend does not answer: redis: connection refused", e.Error)
	assert.Equal(t, 503, h.get(t, "/healthz").status, "checks are not answered either")

	p.down.Store(false)
	r = h.get(t, "/readyz")
	assert.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "ok", r.body)
	assert.Equal(t, "text/plain; charset=utf-8", r.headers["Content-Type"])
	assert.Equal(t, 200, h.get(t, "/livez").status)

	// A health check that never answers is a 503 within the timeout.
	h = newHarness(t, api.Config{Limiter: &hung{}, Timeout: 50 * time.Millisecond})
	start := time.Now()
	assert.Equal(t, 503, h.get(t, "/readyz").status)
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by the timeout")
	assert.Equal(t, 200, h.get(t, "/livez").status)
}

// TestReadyzOnMemory: a backend without a health check is ready once it
// serves.
func TestReadyzOnMemory(t *testing.T) {
	h := newHarness(t, api.Config{})
	for _, path := range []string{"/livez", "/readyz"} {
		r := h.get(t, path)
		assert.Equal(t, 200, r.status, path)
		assert.Equal(t, "ok", r.body, path)
		r = h.do(t, "HEAD", path, "", "")
		assert.Equal(t, 200, r.status, path)
		r = h.do(t, "POST", path, "", "")
		assert.Equal(t, 405, r.status, path)
		assert.Equal(t, "GET, HEAD", r.headers["Allow"], path)
	}
}

// TestAdminListenerServesTheHealthChecks: a probe may ask the admin
// listener (the port beyond loopback when the API is on a socket).
func TestAdminListenerServesTheHealthChecks(t *testing.T) {
	p := &pinged{}
	p.down.Store(true)
	srv := api.New(api.Config{Limiter: p, Timeout: 50 * time.Millisecond, Admin: api.AdminSeparate})
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/livez", 200},
		{"/readyz", 503},
		{"/healthz", 503},
		{"/check_rate", 404},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(tc.path)
		srv.AdminHandler(&ctx)
		assert.Equal(t, tc.status, ctx.Response.StatusCode(), "%s: %s", tc.path, ctx.Response.Body())
	}
}
