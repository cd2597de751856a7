package rls

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

func newServer(t testing.TB) (*Server, *limitertest.Clock) {
	t.Helper()
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	c, err := Load("../../../docs/gateways/rls")
	require.NoError(t, err)
	return New(Options{Limiter: lim, Config: c}), clock
}

func entries(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestWindowsAreAlignedToTheEpoch: a per-second rule starts over at each
// whole second of the limiter's clock, and duration_until_reset says when.
func TestWindowsAreAlignedToTheEpoch(t *testing.T) {
	s, clock := newServer(t)
	clock.Advance(700 * time.Millisecond) // 700 ms into a second
	req := &rlspb.RateLimitRequest{Domain: "edge_proxy_per_ip", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("remote_address", "1.2.3.4")}, HitsAddend: 10}
	resp, err := s.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	assert.Equal(t, int64(1), resp.Statuses[0].DurationUntilReset.Seconds, "300 ms left, in whole seconds rounded up")
	req.HitsAddend = 1
	resp, err = s.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlspb.RateLimitResponse_OVER_LIMIT, resp.OverallCode)
	clock.Advance(300 * time.Millisecond)
	resp, err = s.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode, "a new second, a new window")
}

func TestLimitOverride(t *testing.T) {
	s, _ := newServer(t)
	d := entries("anything", "x")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	req := &rlspb.RateLimitRequest{Domain: "nobody", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
	for i, want := range []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT} {
		resp, err := s.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
		assert.Equal(t, want, resp.OverallCode, "call %d", i)
		assert.Equal(t, uint32(2), resp.Statuses[0].CurrentLimit.RequestsPerUnit)
	}
	d.Limit.Unit = typev3.RateLimitUnit_UNKNOWN
	_, err := s.ShouldRateLimit(context.Background(), req)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

// FuzzShouldRateLimit sends any domain, entries and hits: the answer is
// InvalidArgument, or one status per descriptor; never a panic.
func FuzzShouldRateLimit(f *testing.F) {
	f.Add("messaging", "message_type", "marketing", "to_number", "1", uint32(1), uint8(2))
	f.Add("edge_proxy_per_ip", "remote_address", "50.0.0.5", "", "", uint32(0), uint8(1))
	f.Add("", "k", "v", "k", "v", uint32(7), uint8(3))
	s, _ := newServer(f)
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, hits uint32, n uint8) {
		var ds []*ratelimitv3.RateLimitDescriptor
		for i := range int(n % 70) {
			if i%2 == 0 {
				ds = append(ds, entries(k1, v1))
			} else {
				ds = append(ds, entries(k1, v1, k2, v2))
			}
		}
		resp, err := s.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%v", err)
			}
			return
		}
		if len(resp.Statuses) != len(ds) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(ds))
		}
	})
}

// TestChecksFamily: every descriptor decided is counted in
// raterlimiter_checks_total{via="rls"} as the HTTP faces count theirs, and
// a refused request once as invalid.
func TestChecksFamily(t *testing.T) {
	s, _ := newServer(t)
	req := &rlspb.RateLimitRequest{Domain: "edge_proxy_per_ip", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("remote_address", "1.2.3.4")}, HitsAddend: 10}
	for range 3 { // 10 a second: the first allowed, then denied
		_, err := s.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
	}
	_, err := s.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "edge_proxy_per_ip"})
	require.Equal(t, codes.InvalidArgument, status.Code(err))

	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "raterlimiter_checks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			require.Equal(t, "rls", l["via"])
			if v := m.GetCounter().GetValue(); v > 0 {
				got[l["algo"]+"/"+l["result"]] = v
			}
		}
	}
	assert.Equal(t, map[string]float64{"fixed/allowed": 1, "fixed/denied": 2, "fixed/invalid": 1}, got)
}
