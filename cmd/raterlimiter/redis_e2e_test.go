package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// TestE2ERedisDegradedHeader runs the binary on a private Redis with
// -redis-fail open, then kills Redis: answers keep coming, marked degraded;
// a denial the sidecar already knows stays a denial, from its cache of
// denials.
func TestE2ERedisDegradedHeader(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	s := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-redis-fail", "open", "-redis-timeout", "200ms")

	for i := range 3 {
		r := s.get(t, "/check_rate?id=deg&scale=60000&limit=2")
		require.Equal(t, []int{200, 200, 429}[i], r.status, r.body)
		assert.Empty(t, r.header.Get("X-RateLimit-Degraded"), "Redis answered")
	}
	m := s.get(t, "/metrics")
	assert.Contains(t, m.body, `raterlimiter_redis_calls_total{op="check",result="ok"} 3`)
	assert.Contains(t, m.body, `raterlimiter_redis_call_seconds_count{op="check"} 3`)
	assert.Contains(t, m.body, "raterlimiter_redis_up 1")
	rs.Kill()
	r := s.get(t, "/check_rate?id=deg&scale=60000&limit=2")
	assert.Equal(t, 429, r.status, "denied until the window ends, Redis or not: %s", r.body)
	assert.Empty(t, r.header.Get("X-RateLimit-Degraded"), "decided as Redis would")
	r = s.get(t, "/check_rate?id=deg2&scale=60000&limit=2")
	assert.Equal(t, 200, r.status, "fail-open allows while Redis is down: %s", r.body)
	assert.Equal(t, "open", r.header.Get("X-RateLimit-Degraded"))
	r = s.do(t, "POST", "/check_rates", "", `[{"id":"deg2","scale":60000,"limit":2}]`)
	assert.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "open", r.header.Get("X-RateLimit-Degraded"))
	r = s.get(t, "/healthz")
	assert.Equal(t, 200, r.status, "fail-open still answers checks")
	assert.Equal(t, "degraded: open", r.body)
	m = s.get(t, "/metrics")
	assert.Contains(t, m.body, "raterlimiter_redis_up 0")
	assert.Contains(t, m.body, `raterlimiter_redis_degraded_total{mode="open"}`)
	assert.Contains(t, m.body, `raterlimiter_redis_calls_total{op="check",result="error"}`)
	assert.Contains(t, m.body, "raterlimiter_redis_local_denials_total 1")
	require.NoError(t, s.stop(t))
}

// TestE2EPoliciesOnRedisAcrossSidecars runs two sidecars with one policies
// file on one Redis: a policy's counter is one, whichever sidecar and face
// (/auth or a check by name) counts, with hostile keys and a 1 KiB key.
func TestE2EPoliciesOnRedisAcrossSidecars(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	policies := "../../docs/gateways/policies.yaml"
	a := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-policies", policies, "-auth-headers", "nginx")
	b := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-policies", policies, "-auth-headers", "nginx")
	for _, key := range []string{"k&hits=0", "k}{x", "k\xffbin", strings.Repeat("x", 1024)} {
		allowed := 0
		for i := range 8 {
			var r reply
			switch i % 3 {
			case 0:
				r = a.do(t, "GET", "/auth", "", "", "X-Original-Method", "GET", "X-Original-URI", "/api/x", "X-Api-Key", key)
			case 1:
				r = b.do(t, "GET", "/auth", "", "", "X-Original-Method", "GET", "X-Original-URI", "/api/x", "X-Api-Key", key)
			default:
				r = b.get(t, "/check_rate?policy=api&id="+url.QueryEscape(key))
			}
			require.Contains(t, []int{200, 429}, r.status, r.body)
			if r.status == 200 {
				allowed++
			}
		}
		assert.Equal(t, 5, allowed, "one counter of 5 a minute across two sidecars for %q", key[:min(len(key), 10)])
	}
}
