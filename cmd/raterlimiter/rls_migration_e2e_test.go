package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// A deployment of envoyproxy/ratelimit moved over as it is: its runtime
// directory, its environment (REDIS_URL in its host:port form among it),
// its probes.

// peerRuntime writes the peer's runtime layout, ROOT/ratelimit/config,
// with one configuration file and entries that are not read.
func peerRuntime(t *testing.T) (root, config string) {
	t.Helper()
	root = t.TempDir()
	config = filepath.Join(root, "ratelimit", "config")
	require.NoError(t, os.MkdirAll(filepath.Join(config, "team"), 0o700))
	for name, content := range map[string]string{
		"limits.yaml":      "domain: m\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 5}\n",
		"README":           "the limits",
		".limits.yaml.swp": "x",
		"team/more.yaml":   "domain: other\ndescriptors: []\n",
	} {
		require.NoError(t, writeFile(filepath.Join(config, name), content))
	}
	return root, config
}

func TestRLSMigrationFromThePeersEnvironment(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	root, config := peerRuntime(t)
	env := []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + rs.Addr(),
		"LIMIT_RESPONSE_HEADERS_ENABLED=true", "LOG_LEVEL=warn", "USE_STATSD=false", "HOST=0.0.0.0", "PORT=8080"}
	s := start(t, env)
	addr := s.listenAddr(t, "rls")
	logs := s.logs()
	assert.Contains(t, logs, "envoyproxy/ratelimit's REDIS_URL, REDIS_SOCKET_TYPE read as -redis-url redis://"+rs.Addr())
	assert.Contains(t, logs, "envoyproxy/ratelimit's GRPC_HOST, GRPC_PORT, RUNTIME_ROOT, RUNTIME_SUBDIRECTORY read as -rls-listen 127.0.0.1:0")
	assert.Contains(t, logs, "envoyproxy/ratelimit's LOG_LEVEL: no counterpart here")
	assert.Contains(t, logs, "envoyproxy/ratelimit's USE_STATSD: no counterpart here")
	assert.Contains(t, logs, "envoyproxy/ratelimit's HOST, PORT not read: -listen is set", "the test's -listen wins")
	assert.NotContains(t, logs, "counting in this process's memory")
	for _, skipped := range []string{"README: not *.yaml or *.yml", ".limits.yaml.swp: a dot file", "team: a directory"} {
		assert.Contains(t, logs, filepath.Join(config, skipped))
	}

	// Another sidecar on the same Redis, configured by flags: they share
	// the counts, so REDIS_URL was read as the peer means it.
	other := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", config, "-backend", "redis", "-redis-url", rs.URL())
	c := rlsClient(t, addr, insecure.NewCredentials())
	resp := ask(t, c, "m", 0, desc("user", "u"))
	checkRLS(t, resp, false, st{rpu: 5, unit: day, remaining: 4})
	var headers []string
	for _, h := range resp.ResponseHeadersToAdd {
		headers = append(headers, h.Key)
	}
	assert.Equal(t, []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}, headers, "LIMIT_RESPONSE_HEADERS_ENABLED")
	checkRLS(t, ask(t, rlsClient(t, other.listenAddr(t, "rls"), insecure.NewCredentials()), "m", 0, desc("user", "u")), false, st{rpu: 5, unit: day, remaining: 3})

	// The peer's probes: GET /healthcheck, and gRPC health of "ratelimit".
	r := s.get(t, "/healthcheck")
	assert.Equal(t, 200, r.status)
	assert.Equal(t, "OK", r.body)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)

	// The skipped entries are logged at each load.
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	waitLog(t, s, "rls: configuration reloaded", 1)
	waitLog(t, s, filepath.Join(config, "README")+": not *.yaml or *.yml", 2)

	// Redis gone (-redis-fail closed): the probe fails as the peer's does.
	rs.Kill()
	require.Eventually(t, func() bool { return s.get(t, "/healthcheck").status == 500 }, 10*time.Second, 100*time.Millisecond)
	assert.Empty(t, s.get(t, "/healthcheck").body)
}

// TestRLSOnMemorySaysReplicasCountApart: the peer counts on Redis by
// default; the sidecar on memory says once, at start, what that means for
// several replicas.
func TestRLSOnMemorySaysReplicasCountApart(t *testing.T) {
	s, c, _ := startRLS(t)
	checkRLS(t, ask(t, c, "messaging", 0, desc("to_number", "1")), false, st{rpu: 100, unit: day, remaining: 99})
	assert.Equal(t, 1, strings.Count(s.logs(), "counting in this process's memory (-backend memory): each replica counts on its own"))
	r := s.get(t, "/healthcheck")
	assert.Equal(t, 200, r.status)
	assert.Equal(t, "OK", r.body)
}
