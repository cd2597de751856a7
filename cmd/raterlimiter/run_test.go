package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

// run is the whole program as the tests run it: runLogged without
// installing its logger as the process's default.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	return runLogged(ctx, args, lookupEnv, stdout, stderr, nil)
}

func TestAdminAccess(t *testing.T) {
	tests := []struct {
		ip, token, adminListen string
		want                   api.AdminAccess
	}{
		{"127.0.0.1", "", "", api.AdminOnMain},
		{"127.0.0.2", "", "", api.AdminOnMain},
		{"::1", "", "", api.AdminOnMain},
		{"0.0.0.0", "", "", api.AdminRefused},
		{"::", "", "", api.AdminRefused},
		{"192.168.1.10", "", "", api.AdminRefused},
		{"0.0.0.0", "t", "", api.AdminOnMain},
		{"192.168.1.10", "t", "", api.AdminOnMain},
		{"0.0.0.0", "", "127.0.0.1:0", api.AdminSeparate},
		{"127.0.0.1", "t", "127.0.0.1:0", api.AdminSeparate},
	}
	for _, tt := range tests {
		t.Run(tt.ip+"/"+tt.token+"/"+tt.adminListen, func(t *testing.T) {
			got := adminAccess(&net.TCPAddr{IP: net.ParseIP(tt.ip), Port: 8080}, tt.token, exposureFlags{adminListen: tt.adminListen})
			assert.Equal(t, tt.want, got)
		})
	}
	assert.Equal(t, api.AdminOnMain, adminAccess(&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "", exposureFlags{}), "a unix socket is this host's")
}

func noEnv(string) (string, bool) { return "", false }

func TestRunFlagsAndEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	tests := []struct {
		name    string
		args    []string
		env     func(string) (string, bool)
		want    func(t *testing.T, c config)
		wantErr string
	}{
		{"defaults", nil, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:8080", c.listen)
			assert.Equal(t, "memory", c.backend)
			assert.Equal(t, 1000, c.maxBatch)
			assert.Equal(t, 1024, c.maxIDBytes)
		}, ""},
		{"env sets", nil, env("RATERLIMITER_MAX_BATCH", "7", "RATERLIMITER_SWEEP_INTERVAL", "3s"), func(t *testing.T, c config) {
			assert.Equal(t, 7, c.maxBatch)
			assert.Equal(t, "3s", c.sweepInterval.String())
		}, ""},
		{"flag beats env", []string{"-max-batch", "9"}, env("RATERLIMITER_MAX_BATCH", "7"), func(t *testing.T, c config) {
			assert.Equal(t, 9, c.maxBatch)
		}, ""},
		{"flag beats a bad env", []string{"-max-batch", "9"}, env("RATERLIMITER_MAX_BATCH", "x"), func(t *testing.T, c config) {
			assert.Equal(t, 9, c.maxBatch)
		}, ""},
		{"bad env", nil, env("RATERLIMITER_TIMEOUT", "soon"), nil, `invalid value "soon" for RATERLIMITER_TIMEOUT`},
		{"zero timeout is the default", []string{"-timeout", "0s"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, "1s", c.timeout.String())
		}, ""},
		{"negative timeout", []string{"-timeout", "-1s"}, noEnv, nil, "-timeout must not be negative (0 means its default, 1s)"},
		{"a duration without a unit", []string{"-timeout", "5"}, noEnv, nil, `invalid value "5" for flag -timeout: a duration needs a unit: 5s, 5ms or 5m, say`},
		{"a duration without a unit from the environment", nil, env("RATERLIMITER_MAX_WAIT", "2.5"), nil, `invalid value "2.5" for RATERLIMITER_MAX_WAIT: a duration needs a unit: 2.5s, 2.5ms or 2.5m, say`},
		{"not a duration", []string{"-shutdown-timeout", "soon"}, noEnv, nil, `invalid value "soon" for flag -shutdown-timeout: want a duration such as 5s, 250ms, 1m30s or 2h`},
		{"max wait by default", nil, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, "10s", c.maxWait.String())
		}, ""},
		{"max wait from env", nil, env("RATERLIMITER_MAX_WAIT", "250ms"), func(t *testing.T, c config) {
			assert.Equal(t, "250ms", c.maxWait.String())
		}, ""},
		{"zero max wait is the default", []string{"-max-wait", "0s"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, "10s", c.maxWait.String())
		}, ""},
		{"max wait under a ms", []string{"-max-wait", "500us"}, noEnv, nil, "-max-wait must be from 1ms"},
		{"negative shards", []string{"-shards", "-1"}, noEnv, nil, "-shards must not be negative"},
		{"zero batch is the default", []string{"-max-batch", "0"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, 1000, c.maxBatch)
		}, ""},
		{"negative batch", []string{"-max-batch", "-1"}, noEnv, nil, "-max-batch must not be negative (0 means its default, 1000)"},
		{"not a number", []string{"-max-batch", "1e3"}, noEnv, nil, `invalid value "1e3" for flag -max-batch: want a whole number, such as 100`},
		{"an empty string is the default", []string{"-listen", ""}, env("RATERLIMITER_LOG_FORMAT", ""), func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:8080", c.listen)
			assert.Equal(t, "text", c.logFormat)
		}, ""},
		{"-1 is no bound", []string{"-max-buckets", "-1", "-max-bucket-bytes", "-1", "-max-scales-per-id", "-1", "-max-conns-per-ip", "-1"}, env("RATERLIMITER_BODY_BUDGET", "-1"), func(t *testing.T, c config) {
			assert.Equal(t, -1, c.maxBuckets)
			assert.Equal(t, int64(-1), c.maxBucketBytes)
			assert.Equal(t, -1, c.maxScalesPerID)
			assert.Equal(t, -1, c.exp.perIP)
			assert.Equal(t, int64(-1), c.exp.bodyBudget)
		}, ""},
		{"-1 turns the sweeper off", []string{"-sweep-interval", "-1"}, noEnv, func(t *testing.T, c config) {
			assert.Negative(t, c.sweepInterval)
		}, ""},
		{"zero is no longer no bound", []string{"-max-buckets", "0", "-max-bucket-bytes", "0"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, 4_000_000, c.maxBuckets)
			assert.Equal(t, int64(256<<20), c.maxBucketBytes)
		}, ""},
		{"-1 turns the deny cache off", []string{"-backend", "redis", "-redis-deny-cache", "-1"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, -1, c.redisDenyCache)
		}, ""},
		{"snapshots with the redis backend", []string{"-backend", "redis", "-redis-fail", "local", "-snapshot", "s"}, noEnv, nil, "-snapshot applies only to -backend memory; with -backend redis -redis-fail local it would do nothing"},
		{"the environment cannot ask for the version", nil, env("RATERLIMITER_VERSION", "true"), func(t *testing.T, c config) {
			assert.False(t, c.version)
		}, ""},
		{"the environment cannot ask for a policies check", nil, env("RATERLIMITER_CHECK_POLICIES", "p.yaml"), func(t *testing.T, c config) {
			assert.Empty(t, c.pol.check)
		}, ""},
		{"a bad -redis-fail", []string{"-backend", "redis", "-redis-fail", "sometimes"}, noEnv, nil, `-redis-fail must be closed, open or local, not "sometimes"`},
		{"-redis-fail with the memory backend", []string{"-redis-fail", "open"}, noEnv, nil, "-redis-fail applies only to -backend redis"},
		{"-redis-url with the memory backend, from the environment", nil, env("RATERLIMITER_REDIS_URL", "redis://h:6379"), nil, "-redis-url applies only to -backend redis"},
		{"-redis-timeout with the memory backend", []string{"-redis-timeout", "1s"}, noEnv, nil, "-redis-timeout applies only to -backend redis"},
		{"-redis-url not a Redis URL", []string{"-backend", "redis", "-redis-url", "http://127.0.0.1:6379"}, noEnv, nil, `invalid value "http://127.0.0.1:6379" for -redis-url`},
		{"-redis-url not a URL", []string{"-backend", "redis", "-redis-url", "127.0.0.1:6379"}, noEnv, nil, `invalid value "127.0.0.1:6379" for -redis-url`},
		{"-shards with the redis backend", []string{"-backend", "redis", "-shards", "2"}, noEnv, nil, "-shards applies only to -backend memory (and to -backend redis with -redis-fail local); with -backend redis it would do nothing"},
		{"-sweep-interval with the redis backend", []string{"-backend", "redis", "-sweep-interval", "1s"}, noEnv, nil, "-sweep-interval applies only to -backend memory"},
		{"-shards with the redis backend's own counters", []string{"-backend", "redis", "-redis-fail", "local", "-shards", "2", "-max-scales-per-id", "8"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, 2, c.shards)
			assert.Equal(t, 8, c.maxScalesPerID)
		}, ""},
		{"the redis backend's flags with it", []string{"-backend", "redis", "-redis-url", "rediss://h:6380/1", "-redis-fail", "open", "-redis-timeout", "50ms"}, noEnv, func(t *testing.T, c config) {
			assert.Equal(t, "open", c.redisFail)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c config
			err := c.parse(tt.args, tt.env)
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

func TestRunHelpVersionAndCleanStop(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, noEnv, &out, &errOut))
	assert.Contains(t, out.String(), "\n  -listen string  (RATERLIMITER_LISTEN, default \"127.0.0.1:8080\")\n")

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-version"}, noEnv, &out, &errOut))
	assert.True(t, strings.HasPrefix(out.String(), "raterlimiter "))

	// A context that has already ended: start, log, shut down cleanly.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errOut.Reset()
	require.NoError(t, run(ctx, []string{"-listen", "127.0.0.1:0"}, noEnv, &out, &errOut))
	assert.Contains(t, errOut.String(), `msg="raterlimiter listening" addr=127.0.0.1:`)
	assert.Contains(t, errOut.String(), `msg="raterlimiter stopped"`)
	assert.NotContains(t, errOut.String(), "WARN")
}

// TestRunVersionNotFromTheEnvironment: a stray RATERLIMITER_VERSION=true
// does not turn the sidecar into a program that prints its version and
// exits; it serves.
func TestRunVersionNotFromTheEnvironment(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := func(k string) (string, bool) {
		if k == "RATERLIMITER_VERSION" {
			return "true", true
		}
		return "", false
	}
	var out, errOut bytes.Buffer
	require.NoError(t, run(ctx, []string{"-listen", "127.0.0.1:0"}, env, &out, &errOut))
	assert.Empty(t, out.String())
	assert.Contains(t, errOut.String(), `msg="raterlimiter listening"`)

	out.Reset()
	require.NoError(t, run(ctx, []string{"-h"}, noEnv, &out, &errOut))
	assert.Contains(t, out.String(), "\n  -version  (default false)\n        print the version and exit\n")
}
