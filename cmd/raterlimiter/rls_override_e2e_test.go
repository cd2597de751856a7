package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// TestE2ERLSOverrideIsBoundOnRedis: a descriptor's own limit override is a
// window the caller chooses, so on Redis it is bound as a scale a caller
// names over HTTP (-redis-max-scale): a year under fresh values would plant
// records that live a year.
func TestE2ERLSOverrideIsBoundOnRedis(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsDayConfig))
	s := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-rls-listen", "127.0.0.1:0", "-rls-config", dir)
	c := rlsClient(t, s.listenAddr(t, "rls"), insecure.NewCredentials())
	override := func(value string, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		d := desc("k", value)
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: unit}
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, unit := range []typev3.RateLimitUnit{typev3.RateLimitUnit_YEAR, typev3.RateLimitUnit_MONTH} {
		_, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{override("fresh-"+unit.String(), unit)}})
		require.Error(t, err, "%v", unit)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v: %v", unit, err)
		assert.Contains(t, err.Error(), "longer than the longest window", "%v", unit)
	}
	assert.Empty(t, redisCLI(t, rs, "KEYS", "*fresh*"), "Redis holds nothing of the refused overrides")

	// A day is within the default bound; configured rules are not bound.
	checkRLS(t, ask(t, c, "d", 0, override("v", typev3.RateLimitUnit_DAY)), false, st{rpu: 5, unit: day, remaining: 4})
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 1})
	require.NoError(t, s.stop(t))

	// The operator raises the bound.
	wide := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-rls-listen", "127.0.0.1:0", "-rls-config", dir, "-redis-max-scale", "87600h")
	c = rlsClient(t, wide.listenAddr(t, "rls"), insecure.NewCredentials())
	resp := ask(t, c, "d", 0, override("v", typev3.RateLimitUnit_YEAR))
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	require.NoError(t, wide.stop(t))
}
