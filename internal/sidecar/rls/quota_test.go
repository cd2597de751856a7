package rls

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

const quotaConfig = `domain: quota-domain
descriptors:
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: free
    rate_limit: {unlimited: true}
`

func quotaServer(t *testing.T, opts Options) *Server {
	t.Helper()
	c, err := Parse("quota.yaml", []byte(quotaConfig))
	require.NoError(t, err)
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	opts.Limiter, opts.Config = lim, c
	return New(opts)
}

// TestGlobalQuotaMode is envoyproxy/ratelimit's TestServiceGlobalQuotaMode:
// with QUOTA_MODE every limit over is OK, with its limit and nothing
// remaining.
func TestGlobalQuotaMode(t *testing.T) {
	s := quotaServer(t, Options{QuotaMode: true})
	req := &rlspb.RateLimitRequest{Domain: "quota-domain", HitsAddend: 11,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("regular", "a"), entries("quota", "a")}}
	resp, err := s.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	for i, rpu := range []uint32{10, 5} {
		st := resp.Statuses[i]
		assert.Equal(t, rlspb.RateLimitResponse_OK, st.Code)
		assert.Equal(t, rpu, st.CurrentLimit.RequestsPerUnit)
		assert.Zero(t, st.LimitRemaining)
		assert.Nil(t, st.DurationUntilReset)
	}
	assert.Nil(t, resp.DynamicMetadata, "no metadata unless asked for")
}

// TestQuotaModeMetadata is envoyproxy/ratelimit's
// TestServiceQuotaModeWithMetadata, with the whole metadata it writes.
func TestQuotaModeMetadata(t *testing.T) {
	s := quotaServer(t, Options{ResponseMetadata: true})
	override := entries("other", "x")
	override.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_HOUR}
	own := entries("regular", "b")
	own.HitsAddend = wrapperspb.UInt64(2)
	req := &rlspb.RateLimitRequest{Domain: "quota-domain", HitsAddend: 6,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("regular", "a"), entries("quota", "a"), override, own, entries("free", "a")}}
	resp, err := s.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.Statuses[1].Code, "over a quota-mode limit: OK")
	require.NotNil(t, resp.DynamicMetadata)
	assert.Equal(t, map[string]any{
		"domain":     "quota-domain",
		"hitsAddend": float64(6),
		"descriptors": []any{
			map[string]any{"entries": []any{"regular=a"}},
			map[string]any{"entries": []any{"quota=a"}},
			map[string]any{"entries": []any{"other=x"}, "limit": "requests_per_unit:7 unit:HOUR"},
			map[string]any{"entries": []any{"regular=b"}, "hitsAddend": float64(2)},
			map[string]any{"entries": []any{"free=a"}},
		},
		"quotaModeViolations": []any{float64(1)},
		"quotaModeEnabled":    true,
	}, resp.DynamicMetadata.AsMap())

	req.Descriptors = req.Descriptors[:1]
	req.HitsAddend = 0
	resp, err = s.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"domain":           "quota-domain",
		"descriptors":      []any{map[string]any{"entries": []any{"regular=a"}}},
		"quotaModeEnabled": false,
	}, resp.DynamicMetadata.AsMap())
}
