package main

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

// peerLookup is an environment of the given "NAME=value" pairs.
func peerLookup(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, p := range kv {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// TestPeerEnvironment: envoyproxy/ratelimit's variables set the flags they
// have a counterpart in, when the RLS is asked for, and only where neither
// the command line nor a RATERLIMITER_ variable set the flag.
func TestPeerEnvironment(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "ratelimit", "config"), 0o700))
	rls := []string{"-rls-listen", "127.0.0.1:0", "-rls-config", dir}
	tests := []struct {
		name    string
		args    []string
		env     []string
		want    func(t *testing.T, c config)
		wantErr string
	}{
		{"the RLS off: nothing is read", nil, []string{"REDIS_URL=127.0.0.1:7000", "PORT=9", "LOG_LEVEL=debug"}, func(t *testing.T, c config) {
			assert.Equal(t, "memory", c.backend)
			assert.Equal(t, "127.0.0.1:8080", c.listen)
			assert.Empty(t, c.peerNotes)
		}, ""},
		{"the peer's runtime directory and gRPC address", nil, []string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=ratelimit", "GRPC_PORT=9091"}, func(t *testing.T, c config) {
			assert.Equal(t, filepath.Join(dir, "ratelimit", "config"), c.rls.config)
			assert.Equal(t, "0.0.0.0:9091", c.rls.listen)
		}, ""},
		{"the peer's defaults for what RUNTIME_* leaves unset", nil, []string{"RUNTIME_ROOT=" + dir, "RUNTIME_APPDIRECTORY=ratelimit"}, func(t *testing.T, c config) {
			assert.Equal(t, filepath.Join(dir, "ratelimit"), c.rls.config)
			assert.Equal(t, "0.0.0.0:8081", c.rls.listen)
		}, ""},
		{"GRPC_UDS before GRPC_HOST", rls[2:], []string{"GRPC_UDS=/run/rl.sock", "GRPC_HOST=10.0.0.1"}, func(t *testing.T, c config) {
			assert.Equal(t, "unix:/run/rl.sock", c.rls.listen)
		}, ""},
		{"REDIS_URL host:port over tcp", rls, []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=redis.internal:6380"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis", c.backend, "the peer's default backend")
			assert.Equal(t, "redis://redis.internal:6380", c.redisURL)
		}, ""},
		{"REDIS_URL host:port, no socket type", rls, []string{"REDIS_URL=10.1.2.3:6379"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis://10.1.2.3:6379", c.redisURL)
		}, ""},
		{"a password and TLS", rls, []string{"BACKEND_TYPE=redis", "REDIS_URL=r:6379", "REDIS_SOCKET_TYPE=tcp", "REDIS_AUTH=s3cr:t/", "REDIS_TLS=true"}, func(t *testing.T, c config) {
			assert.Equal(t, "rediss://s3cr:t%2F@r:6379", c.redisURL, "USER:PASSWORD")
		}, ""},
		{"a password alone", rls, []string{"REDIS_URL=r:6379", "REDIS_SOCKET_TYPE=tcp", "REDIS_AUTH=pw"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis://:pw@r:6379", c.redisURL)
		}, ""},
		{"a unix socket, the peer's default type", rls, []string{"REDIS_URL=/var/run/nutcracker/ratelimit.sock"}, func(t *testing.T, c config) {
			assert.Equal(t, "unix:///var/run/nutcracker/ratelimit.sock", c.redisURL)
		}, ""},
		{"a cluster", rls, []string{"REDIS_TYPE=CLUSTER", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=n1:7000,n2:7000,n3:7000"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis://n1:7000?addr=n2%3A7000&addr=n3%3A7000", c.redisURL)
		}, ""},
		{"a sentinel set", rls, []string{"REDIS_TYPE=sentinel", "REDIS_URL=mymaster,s1:26379,s2:26379"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis://s1:26379?addr=s2%3A26379&master_set=mymaster", c.redisURL)
		}, ""},
		{"a URL as it is", rls, []string{"REDIS_URL=rediss://h:6380/2"}, func(t *testing.T, c config) {
			assert.Equal(t, "rediss://h:6380/2", c.redisURL)
		}, ""},
		{"REDIS_TIMEOUT", rls, []string{"REDIS_URL=r:1", "REDIS_TIMEOUT=3s"}, func(t *testing.T, c config) {
			assert.Equal(t, 3*time.Second, c.redisTimeout)
		}, ""},
		{"the command line wins", append([]string{"-redis-url", "redis://mine:1"}, rls...), []string{"REDIS_URL=theirs:2"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis://mine:1", c.redisURL)
			assert.Equal(t, "redis", c.backend, "BACKEND_TYPE's default still asks for Redis")
			assert.Contains(t, notes(c), "envoyproxy/ratelimit's REDIS_URL not read: -redis-url is set")
		}, ""},
		{"a RATERLIMITER_ variable wins", rls, []string{"RATERLIMITER_REDIS_URL=redis://mine:1", "REDIS_URL=theirs:2"}, func(t *testing.T, c config) {
			assert.Equal(t, "redis://mine:1", c.redisURL)
		}, ""},
		{"-backend memory: the Redis variables are not read", append([]string{"-backend", "memory"}, rls...), []string{"REDIS_URL=r:1", "REDIS_TIMEOUT=3s"}, func(t *testing.T, c config) {
			assert.Equal(t, "memory", c.backend)
			assert.Contains(t, notes(c), "envoyproxy/ratelimit's REDIS_URL not read: the backend is memory")
		}, ""},
		{"the service's switches", rls, []string{"SHADOW_MODE=true", "QUOTA_MODE=1", "RESPONSE_DYNAMIC_METADATA=TRUE", "MERGE_DOMAIN_CONFIG=t", "LIMIT_RESPONSE_HEADERS_ENABLED=true", "LOG_FORMAT=json", "HOST=127.0.0.2", "PORT=9000"}, func(t *testing.T, c config) {
			assert.True(t, c.rls.shadow && c.rls.quota && c.rls.metadata && c.rls.merge && c.rls.headers)
			assert.Equal(t, "json", c.logFormat)
			assert.Equal(t, "127.0.0.2:9000", c.listen)
		}, ""},
		{"TLS only with GRPC_SERVER_USE_TLS", rls, []string{"GRPC_SERVER_TLS_CERT=/c.pem", "GRPC_SERVER_TLS_KEY=/k.pem"}, func(t *testing.T, c config) {
			assert.Empty(t, c.rls.cert)
			assert.Contains(t, notes(c), "envoyproxy/ratelimit's GRPC_SERVER_TLS_CERT not read: GRPC_SERVER_USE_TLS is not true")
		}, ""},
		{"mutual TLS", rls, []string{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=/c.pem", "GRPC_SERVER_TLS_KEY=/k.pem", "GRPC_CLIENT_TLS_CACERT=/ca.pem", "GRPC_CLIENT_TLS_SAN=spiffe://x"}, func(t *testing.T, c config) {
			assert.Equal(t, []string{"/c.pem", "/k.pem", "/ca.pem", "spiffe://x"}, []string{c.rls.cert, c.rls.key, c.rls.clientCA, c.rls.clientSAN})
		}, ""},
		{"no counterpart: said once, with the reason", rls, []string{"LOG_LEVEL=debug", "LOCAL_CACHE_SIZE_IN_BYTES=1000000", "REDIS_PIPELINE_WINDOW=150us"}, func(t *testing.T, c config) {
			n := notes(c)
			assert.Contains(t, n, "WARN envoyproxy/ratelimit's LOG_LEVEL: no counterpart here, not read: the sidecar logs at info")
			assert.Contains(t, n, "WARN envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES: no counterpart here, not read: -redis-deny-cache")
			assert.Contains(t, n, "WARN envoyproxy/ratelimit's REDIS_PIPELINE_WINDOW: no counterpart here, not read: one multiplexed connection")
		}, ""},
		{"memcache", rls, []string{"BACKEND_TYPE=memcache"}, nil, "envoyproxy/ratelimit's BACKEND_TYPE: there is no memcache backend"},
		{"a boolean that is none", rls, []string{"SHADOW_MODE=maybe"}, nil, `envoyproxy/ratelimit's SHADOW_MODE: -rls-shadow-mode "maybe"`},
		{"an unknown Redis type", rls, []string{"REDIS_URL=a:1", "REDIS_TYPE=ring"}, nil, `REDIS_TYPE "ring" is not single, sentinel or cluster`},
		{"a sentinel set without sentinels", rls, []string{"REDIS_URL=mymaster", "REDIS_TYPE=sentinel"}, nil, "a sentinel set is MASTER,HOST:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c config
			err := c.parse(tt.args, peerLookup(tt.env...))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				var ue *cli.UsageError
				assert.ErrorAs(t, err, &ue)
				return
			}
			require.NoError(t, err)
			tt.want(t, c)
		})
	}
}

// notes is what the sidecar logs of c's peer notes, "LEVEL message" a line.
func notes(c config) string {
	var b strings.Builder
	for _, n := range c.peerNotes {
		b.WriteString(n.level.String() + " " + n.msg + "\n")
	}
	return b.String()
}

// TestPeerEnvironmentPrefixes: a row naming a prefix reports every
// variable of the environment it starts, and none of another service.
func TestPeerEnvironmentPrefixes(t *testing.T) {
	fs := flag.NewFlagSet("raterlimiter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c config
	for _, d := range c.flagTable() {
		fs.Var(d.value, d.name, d.usage)
	}
	environ := []string{"STATSD_HOST=s", "STATSD_PORT=1", "TRACING_ENABLED=true", "MEMCACHE_HOST_PORT=m:1", "STATSDX=no", "OTHER=1"}
	got, err := applyPeerEnv(fs, map[string]bool{"rls-listen": true}, peerLookup(environ...), environ)
	require.NoError(t, err)
	var lines []string
	for _, n := range got {
		require.Equal(t, slog.LevelWarn, n.level)
		lines = append(lines, strings.SplitN(n.msg, ":", 2)[0])
	}
	assert.Equal(t, []string{
		"envoyproxy/ratelimit's STATSD_HOST, STATSD_PORT",
		"envoyproxy/ratelimit's MEMCACHE_HOST_PORT",
		"envoyproxy/ratelimit's TRACING_ENABLED",
	}, lines)
}

// TestPeerTableNamesRealFlags: every flag of the table exists, and every
// variable is in one row only.
func TestPeerTableNamesRealFlags(t *testing.T) {
	fs := flag.NewFlagSet("raterlimiter", flag.ContinueOnError)
	var c config
	for _, d := range c.flagTable() {
		fs.Var(d.value, d.name, d.usage)
	}
	seen := map[string]string{}
	for _, r := range peerTable {
		if r.flag != "" {
			assert.NotNil(t, fs.Lookup(r.flag), "-%s", r.flag)
		} else {
			assert.NotEmpty(t, r.why, "%v: a row without a flag says why", r.vars)
		}
		// A variable may be read by several flags' rows (REDIS_URL: the
		// backend and its address), but is never both read and said to
		// have no counterpart.
		for _, v := range r.vars {
			if prev, ok := seen[v]; ok && (prev == "") != (r.flag == "") {
				t.Errorf("%s is in a row of -%s and in one of -%s", v, prev, r.flag)
			}
			seen[v] = r.flag
		}
	}
}

// FuzzPeerRedisURL: whatever the peer's Redis variables hold, they make a
// URL -redis-url accepts, or an error; never a panic.
func FuzzPeerRedisURL(f *testing.F) {
	f.Add("127.0.0.1:6379", "tcp", "single", "", "false")
	f.Add("/var/run/r.sock", "", "", "user:pass", "true")
	f.Add("m,s1:1,s2:2", "tcp", "sentinel", "p@ss", "")
	f.Add("n1:1, n2:2", "tcp", "CLUSTER", "", "1")
	f.Fuzz(func(t *testing.T, raw, sock, typ, auth, tlsOn string) {
		env := map[string]string{"REDIS_URL": raw}
		for k, v := range map[string]string{"REDIS_SOCKET_TYPE": sock, "REDIS_TYPE": typ, "REDIS_AUTH": auth, "REDIS_TLS": tlsOn} {
			if v != "" {
				env[k] = v
			}
		}
		u, err := peerRedisURL(func(n string) (string, bool) { v, ok := env[n]; return v, ok })
		if err != nil {
			return
		}
		if u == "" {
			t.Fatal("no URL and no error")
		}
		_, _ = rueidis.ParseURL(u) // may refuse (a bad host), must not panic
	})
}
