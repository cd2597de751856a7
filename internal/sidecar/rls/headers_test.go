package rls

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

const headersConfig = `domain: h
descriptors:
  - key: ten
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: three
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// TestLimitHeaders: with ResponseHeaders, an answer carries
// envoyproxy/ratelimit's RateLimit-Limit, -Remaining and -Reset of the
// descriptor it picks (service/ratelimit.go): the least limit_remaining
// among descriptors with a limit, the first of equals, and the last one
// over its limit when one is (quota mode's and shadow rules' count by their
// remaining); none without a limit.
func TestLimitHeaders(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0.Truncate(time.Hour).Add(90 * time.Second)) // 1m30s into an hour
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	c, err := Parse("h.yaml", []byte(headersConfig))
	require.NoError(t, err)
	s := New(Options{Limiter: lim, Config: c, ResponseHeaders: true})
	ask := func(hits uint32, kv ...string) []string {
		t.Helper()
		var ds []*ratelimitv3.RateLimitDescriptor
		for i := 0; i+1 < len(kv); i += 2 {
			ds = append(ds, entries(kv[i], kv[i+1]))
		}
		resp, err := s.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "h", Descriptors: ds, HitsAddend: hits})
		require.NoError(t, err)
		var out []string
		for _, h := range resp.ResponseHeadersToAdd {
			out = append(out, h.Key+": "+h.Value)
		}
		return out
	}
	reset := func(limit, remaining, reset string) []string {
		return []string{"RateLimit-Limit: " + limit, "RateLimit-Remaining: " + remaining, "RateLimit-Reset: " + reset}
	}
	assert.Equal(t, reset("10", "9", "30"), ask(0, "ten", "a"), "30 s left of the minute")
	assert.Equal(t, reset("3", "2", "3510"), ask(0, "ten", "b", "three", "a"), "the least remaining: 9 and 2")
	assert.Equal(t, reset("10", "8", "30"), ask(0, "ten", "b", "ten", "c"), "equals: the first")
	assert.Equal(t, reset("3", "0", "3510"), ask(2, "three", "a", "ten", "d"), "3 of 3: none left")
	assert.Equal(t, reset("3", "0", "3510"), ask(0, "ten", "e", "three", "a", "ten", "f"), "over: the one over, whatever follows")
	assert.Equal(t, reset("10", "0", "30"), ask(20, "three", "a", "ten", "g"), "both over: the last")
	assert.Equal(t, reset("1", "0", "30"), ask(2, "ten", "h", "quota", "q"), "quota mode over: by its remaining")
	assert.Equal(t, reset("1", "0", "30"), ask(2, "ten", "i", "shadow", "s"), "a shadow rule over: by its remaining")
	assert.Nil(t, ask(0, "free", "x", "nothing", "y"), "no descriptor with a limit: no headers")

	s = New(Options{Limiter: lim, Config: c})
	resp, err := s.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "h", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("ten", "z")}})
	require.NoError(t, err)
	assert.Empty(t, resp.ResponseHeadersToAdd, "off by default")
}
