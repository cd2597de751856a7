package main

import (
	"context"
	"math"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/rls"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

const compatConfig = "../../docs/gateways/rls"

// startRLS runs the binary with the Envoy RLS on a port the OS picks and
// returns a client of it.
func startRLS(t *testing.T, args ...string) (*sidecar, rlspb.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	s := start(t, nil, append([]string{"-rls-listen", "127.0.0.1:0", "-rls-config", compatConfig}, args...)...)
	conn, err := grpc.NewClient(s.listenAddr(t, "rls"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return s, rlspb.NewRateLimitServiceClient(conn), conn
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func ask(t *testing.T, c rlspb.RateLimitServiceClient, domain string, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	require.NoError(t, err)
	require.Len(t, resp.Statuses, len(ds), "one status per descriptor")
	return resp
}

// st is an expected descriptor status: code, and for a counted rule its
// limit and what remains.
type st struct {
	over      bool
	rpu       uint32
	unit      rlspb.RateLimitResponse_RateLimit_Unit
	name      string
	remaining uint32
	noLimit   bool // no rule: no current_limit, nothing remaining
	unlimited bool
}

func checkRLS(t *testing.T, resp *rlspb.RateLimitResponse, overall bool, want ...st) {
	t.Helper()
	wantOverall := rlspb.RateLimitResponse_OK
	if overall {
		wantOverall = rlspb.RateLimitResponse_OVER_LIMIT
	}
	assert.Equal(t, wantOverall, resp.OverallCode, "overall_code")
	for i, w := range want {
		got := resp.Statuses[i]
		code := rlspb.RateLimitResponse_OK
		if w.over {
			code = rlspb.RateLimitResponse_OVER_LIMIT
		}
		assert.Equal(t, code, got.Code, "status %d", i)
		switch {
		case w.noLimit:
			assert.Nil(t, got.CurrentLimit, "status %d: no rule, no current_limit", i)
			assert.Zero(t, got.LimitRemaining, "status %d", i)
			assert.Nil(t, got.DurationUntilReset, "status %d", i)
		case w.unlimited:
			assert.Nil(t, got.CurrentLimit, "status %d", i)
			assert.Equal(t, uint32(math.MaxUint32), got.LimitRemaining, "status %d: unlimited", i)
		default:
			require.NotNil(t, got.CurrentLimit, "status %d", i)
			assert.Equal(t, w.rpu, got.CurrentLimit.RequestsPerUnit, "status %d", i)
			assert.Equal(t, w.unit, got.CurrentLimit.Unit, "status %d", i)
			assert.Equal(t, w.name, got.CurrentLimit.Name, "status %d", i)
			assert.Equal(t, w.remaining, got.LimitRemaining, "status %d: limit_remaining", i)
			require.NotNil(t, got.DurationUntilReset, "status %d", i)
			assert.Positive(t, got.DurationUntilReset.AsDuration(), "status %d", i)
		}
	}
}

// earlyInSecond waits until the wall clock is just past a whole second, so
// a short burst against a per-second rule stays in one window.
func earlyInSecond() {
	ms := time.Now().UnixMilli() % 1000
	time.Sleep(time.Duration(1000-ms+5) * time.Millisecond)
}

const (
	second = rlspb.RateLimitResponse_RateLimit_SECOND
	minute = rlspb.RateLimitResponse_RateLimit_MINUTE
	day    = rlspb.RateLimitResponse_RateLimit_DAY
)

// compatSuite replays envoyproxy/ratelimit's documented examples
// (docs/gateways/rls) through a real gRPC client.
func compatSuite(t *testing.T, c rlspb.RateLimitServiceClient, tag string) {
	t.Run("example 1: key and value", func(t *testing.T) {
		earlyInSecond()
		r := ask(t, c, "mongo_cps", 0, desc("database", "users"), desc("database", "default"), desc("database", "other"))
		checkRLS(t, r, false, st{rpu: 500, unit: second, remaining: 499}, st{rpu: 500, unit: second, remaining: 499}, st{noLimit: true})
		r = ask(t, c, "mongo_cps", 499, desc("database", "users"))
		checkRLS(t, r, false, st{rpu: 500, unit: second, remaining: 0})
		r = ask(t, c, "mongo_cps", 0, desc("database", "users"))
		checkRLS(t, r, true, st{over: true, rpu: 500, unit: second, remaining: 0})
	})
	t.Run("example 2: nested descriptors, each value counted on its own", func(t *testing.T) {
		num := "206" + tag
		for i := range 5 {
			r := ask(t, c, "messaging", 0, desc("message_type", "marketing", "to_number", num), desc("to_number", num))
			checkRLS(t, r, false, st{rpu: 5, unit: day, remaining: uint32(4 - i)}, st{rpu: 100, unit: day, remaining: uint32(99 - i)})
		}
		r := ask(t, c, "messaging", 0, desc("message_type", "marketing", "to_number", num), desc("to_number", num))
		checkRLS(t, r, true, st{over: true, rpu: 5, unit: day}, st{rpu: 100, unit: day, remaining: 94})
		r = ask(t, c, "messaging", 0, desc("message_type", "marketing", "to_number", num+"9"))
		checkRLS(t, r, false, st{rpu: 5, unit: day, remaining: 4})
		r = ask(t, c, "messaging", 0, desc("message_type", "transactional", "to_number", num))
		checkRLS(t, r, false, st{noLimit: true})
	})
	t.Run("example 3: key and value before key", func(t *testing.T) {
		earlyInSecond()
		for i := range 10 {
			checkRLS(t, ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.1")), false, st{rpu: 10, unit: second, remaining: uint32(9 - i)})
		}
		checkRLS(t, ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.1")), true, st{over: true, rpu: 10, unit: second})
		checkRLS(t, ask(t, c, "edge_proxy_per_ip", 0, desc("remote_address", "50.0.0.5")), true, st{over: true, rpu: 0, unit: second})
	})
	t.Run("example 4: the depth must match", func(t *testing.T) {
		checkRLS(t, ask(t, c, "example4", 0, desc("key", "value", "subkey", "subvalue")), false, st{noLimit: true})
		checkRLS(t, ask(t, c, "example4", 0, desc("deep", "value")), false, st{noLimit: true})
		checkRLS(t, ask(t, c, "example4", 0, desc("deep", "value", "subkey", "x")), false, st{rpu: 300, unit: second, remaining: 299})
	})
	t.Run("example 5: unlimited", func(t *testing.T) {
		checkRLS(t, ask(t, c, "internal", 0, desc("ldap", "cn=x"), desc("azure", "a"+tag)), false, st{unlimited: true}, st{rpu: 100, unit: minute, remaining: 99})
		checkRLS(t, ask(t, c, "internal", 0, desc("ldap", "cn=x")), false, st{unlimited: true})
	})
	t.Run("example 6: shadow mode reports and never denies", func(t *testing.T) {
		earlyInSecond()
		for i := range 10 {
			checkRLS(t, ask(t, c, "example6", 0, desc("service", "auth", "user", "user-a")), false, st{rpu: 10, unit: second, remaining: uint32(9 - i)})
		}
		r := ask(t, c, "example6", 0, desc("service", "auth", "user", "user-a"), desc("service", "auth", "user", "user-b"))
		checkRLS(t, r, false, st{rpu: 10, unit: second, remaining: 0}, st{rpu: 20, unit: second, remaining: 19})
	})
	t.Run("example 7: replaces", func(t *testing.T) {
		earlyInSecond()
		for i := range 5 {
			checkRLS(t, ask(t, c, "example7", 0, desc("key_1", "value_1", "user", "bkthomps")), false, st{rpu: 5, unit: second, name: "specific_limit", remaining: uint32(4 - i)})
		}
		checkRLS(t, ask(t, c, "example7", 0, desc("key_1", "value_1", "user", "bkthomps")), true, st{over: true, rpu: 5, unit: second, name: "specific_limit"})
		// Both match: the replaced limit is neither counted nor reported.
		r := ask(t, c, "example7", 0, desc("key_1", "value_1", "user", "bkthomps"), desc("key_2", "value_2", "user", "bkthomps"))
		checkRLS(t, r, false, st{noLimit: true}, st{rpu: 10, unit: second, remaining: 9})
	})
	t.Run("hits_addend, per request and per descriptor", func(t *testing.T) {
		n := "hits" + tag
		checkRLS(t, ask(t, c, "messaging", 3, desc("to_number", n)), false, st{rpu: 100, unit: day, remaining: 97})
		d := desc("to_number", n)
		d.HitsAddend = wrapperspb.UInt64(0) // check only
		checkRLS(t, ask(t, c, "messaging", 50, d), false, st{rpu: 100, unit: day, remaining: 97})
		d.HitsAddend = wrapperspb.UInt64(97)
		checkRLS(t, ask(t, c, "messaging", 1, d), false, st{rpu: 100, unit: day, remaining: 0})
		checkRLS(t, ask(t, c, "messaging", 0, desc("to_number", n)), true, st{over: true, rpu: 100, unit: day})
	})
	t.Run("wildcard values", func(t *testing.T) {
		p := "/api/" + tag
		for i := range 3 {
			checkRLS(t, ask(t, c, "wildcard", 0, desc("path", p)), false, st{rpu: 3, unit: minute, remaining: uint32(2 - i)})
		}
		checkRLS(t, ask(t, c, "wildcard", 0, desc("path", p)), true, st{over: true, rpu: 3, unit: minute})
		checkRLS(t, ask(t, c, "wildcard", 0, desc("path", "/static/"+tag)), false, st{rpu: 50, unit: minute, remaining: 49})
	})
	t.Run("unknown domain: no rules", func(t *testing.T) {
		checkRLS(t, ask(t, c, "nobody", 0, desc("a", "b")), false, st{noLimit: true})
	})
	t.Run("a value longer than -max-id-bytes is counted", func(t *testing.T) {
		long := strings.Repeat("9", 100_000) + tag
		checkRLS(t, ask(t, c, "messaging", 0, desc("to_number", long)), false, st{rpu: 100, unit: day, remaining: 99})
		checkRLS(t, ask(t, c, "messaging", 0, desc("to_number", long)), false, st{rpu: 100, unit: day, remaining: 98})
		checkRLS(t, ask(t, c, "messaging", 0, desc("to_number", long+"0")), false, st{rpu: 100, unit: day, remaining: 99})
	})
	t.Run("what only Envoy's configuration sends wrong is refused", func(t *testing.T) {
		many := make([]*ratelimitv3.RateLimitDescriptor, 10_000)
		for i := range many {
			many[i] = desc("k", "v")
		}
		for _, req := range []*rlspb.RateLimitRequest{
			{Domain: "", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "b")}},
			{Domain: "messaging"},
			{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("", "b")}},
			{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}},
			{Domain: "messaging", Descriptors: many},
			{Domain: "messaging", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("to_number", strings.Repeat("9", 1<<20))}},
		} {
			_, err := c.ShouldRateLimit(context.Background(), req)
			require.Error(t, err)
			want := codes.InvalidArgument
			if proto.Size(req) > rls.MaxRequestBytes(rls.DefaultMaxDescriptors, 1024) {
				want = codes.ResourceExhausted // refused before it is read
			}
			assert.Equal(t, want, status.Code(err), "%v", err)
			assert.NotEmpty(t, status.Convert(err).Message())
		}
	})
}

func TestRLSCompatibilityOnMemory(t *testing.T) {
	s, c, conn := startRLS(t)
	compatSuite(t, c, "m")
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)
	m := s.get(t, "/metrics").body
	assert.Contains(t, m, `raterlimiter_rls_checks_total{domain="messaging",result="denied",rule="message_type_marketing.to_number"}`)
	assert.NotContains(t, m, "206m", "no descriptor value becomes a label")
	require.NoError(t, s.stop(t))
}

func TestRLSCompatibilityOnRedis(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	_, c, _ := startRLS(t, "-backend", "redis", "-redis-url", rs.URL())
	compatSuite(t, c, "r")
}

// TestRLSTwoSidecarsOnOneRedis: a limit is one across sidecars.
func TestRLSTwoSidecarsOnOneRedis(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	_, a, _ := startRLS(t, "-backend", "redis", "-redis-url", rs.URL())
	_, b, _ := startRLS(t, "-backend", "redis", "-redis-url", rs.URL())
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for w := range 8 {
		c := []rlspb.RateLimitServiceClient{a, b}[w%2]
		wg.Go(func() {
			for range 25 {
				r := ask(t, c, "messaging", 0, desc("to_number", "shared"))
				if r.OverallCode == rlspb.RateLimitResponse_OK {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 100, ok, "exactly 100 a day across both sidecars")

	// A value longer than -max-id-bytes is counted under the same digest
	// by both.
	long := strings.Repeat("l", 5000)
	checkRLS(t, ask(t, a, "messaging", 0, desc("to_number", long)), false, st{rpu: 100, unit: day, remaining: 99})
	checkRLS(t, ask(t, b, "messaging", 0, desc("to_number", long)), false, st{rpu: 100, unit: day, remaining: 98})
}

func TestRLSConfigAtStartAndReload(t *testing.T) {
	bad := t.TempDir()
	require.NoError(t, writeFile(bad+"/a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"))
	code, _, errOut := runBinary(t, nil, "-listen", "127.0.0.1:0", "-rls-listen", "127.0.0.1:0", "-rls-config", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, bad+"/a.yaml:4: rate_limit: unit \"fortnight\"")
	code, _, errOut = runBinary(t, nil, "-listen", "127.0.0.1:0", "-rls-listen", "127.0.0.1:0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-rls-listen needs -rls-config")

	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/d.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", dir, "-watch-files=false")
	conn, err := grpc.NewClient(s.listenAddr(t, "rls"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	c := rlspb.NewRateLimitServiceClient(conn)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 1, unit: day, remaining: 0})
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), true, st{over: true, rpu: 1, unit: day})

	require.NoError(t, writeFile(dir+"/d.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 5}\n"))
	require.NoError(t, s.Cmd.Process.Signal(sigHUP))
	require.Eventually(t, func() bool { return strings.Contains(s.logs(), "rls: configuration reloaded") }, 10*time.Second, 10*time.Millisecond)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 5, unit: day, remaining: 2})

	require.NoError(t, writeFile(dir+"/d.yaml", "domain: d\ndescriptors: [\n"))
	require.NoError(t, s.Cmd.Process.Signal(sigHUP))
	require.Eventually(t, func() bool { return strings.Contains(s.logs(), "configuration not reloaded") }, 10*time.Second, 10*time.Millisecond)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 5, unit: day, remaining: 1})
	require.NoError(t, s.stop(t))
}

const sigHUP = syscall.SIGHUP

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// TestRLSStartsBeforeRedis: the Envoy RLS whose Redis is not up yet serves
// at once (a call is answered Unavailable, as -redis-fail closed says, not
// refused at the door), the sidecar is live and not ready, and once Redis
// answers the sidecar is ready within 2 s and the call is decided.
func TestRLSStartsBeforeRedis(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	rs.Kill() // its port stays reserved for the restart below
	s, c, _ := startRLS(t, "-backend", "redis", "-redis-url", rs.URL())
	assert.Equal(t, 200, s.get(t, "/livez").status)
	assert.Equal(t, 503, s.get(t, "/readyz").status)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("database", "users")}})
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "answered by the fail mode (closed): %v", err)

	rs.Restart(t)
	start := time.Now()
	s.WaitUntil(t, 2*time.Second, "/readyz 200", func() bool {
		if s.get(t, "/readyz").status == 200 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
		return false
	})
	t.Logf("ready %v after Redis came up", time.Since(start).Round(time.Millisecond))
	r := ask(t, c, "mongo_cps", 0, desc("database", "users"))
	checkRLS(t, r, false, st{rpu: 500, unit: second, remaining: 499})
}
