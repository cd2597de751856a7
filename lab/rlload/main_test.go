package main

import (
	"bytes"
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/rls"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// summary matches the one line rlload prints on stdout.
var summary = regexp.MustCompile(`^checks/s: ([0-9]+)  p50: ([0-9]+\.[0-9]{3})ms  p99: ([0-9]+\.[0-9]{3})ms  errors: ([0-9]+)\n$`)

type parsed struct {
	rate, p50, p99 float64
	errors         int64
}

func parseSummary(t *testing.T, out string) parsed {
	t.Helper()
	m := summary.FindStringSubmatch(out)
	require.NotNil(t, m, "summary line %q", out)
	var p parsed
	var err error
	p.rate, err = strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	p.p50, err = strconv.ParseFloat(m[2], 64)
	require.NoError(t, err)
	p.p99, err = strconv.ParseFloat(m[3], 64)
	require.NoError(t, err)
	p.errors, err = strconv.ParseInt(m[4], 10, 64)
	require.NoError(t, err)
	return p
}

// sidecar serves the API on lim on a loopback port and returns its URL.
func sidecar(t *testing.T, lim rl.Limiter) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.New(api.Config{Limiter: lim})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		<-done
	})
	return "http://" + ln.Addr().String()
}

// counted returns the sum of the fixed-window counts of ids user-0 ..
// user-(n-1), peeked without counting.
func counted(t *testing.T, lim rl.Limiter, n int, scale int64) int64 {
	t.Helper()
	var sum int64
	for i := range n {
		d, err := lim.CheckRate(context.Background(), rl.Request{ID: "user-" + strconv.Itoa(i), Scale: time.Duration(scale) * time.Millisecond, Limit: 1_000_000_000, Peek: true})
		require.NoError(t, err)
		sum += d.Count
	}
	return sum
}

// TestAgainstSidecar runs rlload briefly against an in-process sidecar, one
// request per check and batched, parses its summary line, and checks that
// the checks it counted are the ones the sidecar counted.
func TestAgainstSidecar(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"single", nil},
		{"batched", []string{"-batch", "-c", "64"}},
		{"batched sliding", []string{"-batch", "-c", "64", "-algo", "sliding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.T0) // one window for the whole run
			lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
			t.Cleanup(func() { lim.Close() })
			url := sidecar(t, lim)
			args := append([]string{"-url", url, "-d", "300ms", "-ids", "50", "-c", "8", "-progress", "-timeout", "30s"}, tc.args...)

			var cfg config
			require.NoError(t, cfg.parse(args, &bytes.Buffer{}))
			var stderr bytes.Buffer
			res, err := load(context.Background(), &cfg, &stderr)
			require.NoError(t, err)
			out := res.String() + "\n"
			p := parseSummary(t, out)

			assert.Zero(t, p.errors, "stderr: %s", stderr.String())
			assert.Positive(t, res.Checks)
			assert.InDelta(t, float64(res.Checks)/res.Elapsed.Seconds(), p.rate, 1, "the line shows checks/s")
			assert.GreaterOrEqual(t, res.Elapsed, 300*time.Millisecond, "measured for -d at least")
			assert.LessOrEqual(t, p.p50, p.p99)
			assert.Positive(t, p.p99)
			assert.LessOrEqual(t, res.Checks, res.Total)
			if cfg.algo == "fixed" {
				assert.Equal(t, res.Total, counted(t, lim, 50, cfg.scale), "every check answered was counted once by the sidecar")
			}
			assert.Contains(t, stderr.String(), "µs/check")
		})
	}
}

// TestRun goes through run: flags, the summary on stdout and nothing else.
func TestRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-embedded", "-d", "200ms", "-c", "4", "-ids", "10", "-algo", "token"}, &stdout, &stderr)
	require.NoError(t, err)
	p := parseSummary(t, stdout.String())
	assert.Zero(t, p.errors)
	assert.Positive(t, p.rate)
	assert.Empty(t, stderr.String(), "no progress when stderr is not a terminal")
}

// TestErrorsCounted: a sidecar that is not there gives errors, counted in
// the summary, and the first error is shown. Past -max-errors (1 % by
// default) the run fails: the summary says FAILED and run returns the error
// main turns into exit status 1; -max-errors 100 accepts any share.
func TestErrorsCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	args := []string{"-url", url, "-d", "200ms", "-c", "2", "-timeout", "100ms"}

	var stdout, stderr bytes.Buffer
	err = run(context.Background(), args, &stdout, &stderr)
	var tm *tooManyErrors
	require.ErrorAs(t, err, &tm)
	assert.Regexp(t, `^100\.00 % of checks got no decision \([0-9]+ of [0-9]+\), more than -max-errors 1 %$`, err.Error())
	assert.Regexp(t, `^checks/s: 0  p50: [0-9.]+ms  p99: [0-9.]+ms  errors: [1-9][0-9]*  FAILED: 100\.00 % errors > -max-errors 1 %\n$`, stdout.String())
	assert.Contains(t, stderr.String(), "first error")

	stdout.Reset()
	require.NoError(t, run(context.Background(), append(args, "-max-errors", "100"), &stdout, &stderr))
	p := parseSummary(t, stdout.String())
	assert.Positive(t, p.errors)
	assert.Zero(t, p.rate)
}

func TestErrorShare(t *testing.T) {
	for _, tc := range []struct {
		checks, errors int64
		want           float64
	}{{0, 0, 0}, {99, 1, 1}, {0, 5, 100}, {1000, 0, 0}, {3, 1, 25}} {
		assert.InDelta(t, tc.want, result{Checks: tc.checks, Errors: tc.errors}.errorShare(), 1e-9, "%d checks, %d errors", tc.checks, tc.errors)
	}
}

// TestCancel: the run ends early when its context does, and still reports.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-embedded", "-d", "1h", "-c", "2"}, &stdout, &bytes.Buffer{}) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	parseSummary(t, stdout.String())
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error; "" for none
	}{
		{"defaults", nil, ""},
		{"help", []string{"-h"}, "help requested"},
		{"no callers", []string{"-c", "0"}, "-c must be"},
		{"no ids", []string{"-ids", "0"}, "-ids must be"},
		{"no duration", []string{"-d", "0s"}, "-d must be"},
		{"embedded batch", []string{"-embedded", "-batch"}, "-batch"},
		{"embedded inproc", []string{"-embedded", "-inproc"}, "exclude"},
		{"bad algo", []string{"-algo", "gcra"}, "-algo"},
		{"bad scale", []string{"-scale", "0"}, "scale"},
		{"bad limit", []string{"-limit", "-1"}, "limit"},
		{"negative batch size", []string{"-batch-max", "-1"}, "must not be negative"},
		{"argument", []string{"extra"}, "unexpected argument"},
		{"unknown flag", []string{"-nope"}, "not defined"},
		{"negative max errors", []string{"-max-errors", "-1"}, "-max-errors must be a percentage from 0 to 100"},
		{"max errors over 100", []string{"-max-errors", "101"}, "-max-errors must be"},
		{"max errors NaN", []string{"-max-errors", "NaN"}, "-max-errors must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config
			var stderr bytes.Buffer
			err := cfg.parse(tc.args, &stderr)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.name == "help" {
				assert.ErrorIs(t, err, flag.ErrHelp)
				assert.True(t, strings.Contains(stderr.String(), "-batch-window"), "-h lists the flags")
				return
			}
			var ue *cli.UsageError
			assert.ErrorAs(t, err, &ue)
		})
	}
}

func TestHistogram(t *testing.T) {
	t.Run("buckets are contiguous and within 1/16", func(t *testing.T) {
		prev := -1
		for _, ns := range []int64{0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 1000, 999_999, 1 << 20, 1<<40 - 1} {
			i := histIndex(ns)
			assert.GreaterOrEqual(t, i, prev, "ns %d", ns)
			prev = i
			v := histValue(i)
			assert.InDelta(t, float64(ns), float64(v), float64(ns)/16+1, "ns %d bucket %d value %d", ns, i, v)
		}
		for i := 1; i < histBuckets; i++ {
			assert.Greater(t, histValue(i), histValue(i-1), "bucket %d", i)
		}
	})
	t.Run("quantiles", func(t *testing.T) {
		var a, b histogram
		for i := 1; i <= 1000; i++ {
			a.record(time.Duration(i) * time.Microsecond)
		}
		b.record(time.Hour) // beyond the last bucket: counted there
		a.merge(&b)
		assert.Equal(t, uint64(1001), a.n)
		assert.InEpsilon(t, 500e3, float64(a.quantile(0.5)), 1.0/16)
		assert.InEpsilon(t, 990e3, float64(a.quantile(0.99)), 1.0/16)
		assert.Equal(t, time.Duration(histValue(histBuckets-1)), a.quantile(1))
		var empty histogram
		assert.Zero(t, empty.quantile(0.5))
	})
}

// TestExitStatus runs the built binary: -h prints the usage and exits 0, a
// bad flag exits 2 with the flag named, and a run whose checks all fail
// exits 1 with FAILED in its summary.
func TestExitStatus(t *testing.T) {
	bin := tooltest.Build(t, ".")
	code, _, stderr := tooltest.Run(t, bin, "-h")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "-max-errors")
	code, _, stderr = tooltest.Run(t, bin, "-c", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "rlload: -c must be at least 1")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	code, stdout, stderr := tooltest.Run(t, bin, "-url", url, "-d", "200ms", "-c", "2", "-timeout", "100ms")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stdout, "FAILED: 100.00 % errors > -max-errors 1 %")
	assert.Contains(t, stderr, "rlload: 100.00 % of checks got no decision")
}

// TestAgainstRLS runs rlload -rls against an Envoy RLS server on a loopback
// port, with a limit most checks exceed: a denied call is a decision, not an
// error, and every call rlload made is one the server answered.
func TestAgainstRLS(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0) // one window for the whole run
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	path := filepath.Join(t.TempDir(), "bench.yaml")
	require.NoError(t, os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"), 0o600))
	cfg0, err := rls.LoadOptions{}.Load(path)
	require.NoError(t, err)
	srv := rls.New(rls.Options{Limiter: lim, Config: cfg0})
	reg := prometheus.NewRegistry()
	reg.MustRegister(srv.Collectors()...)
	g := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(g, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)

	var cfg config
	require.NoError(t, cfg.parse([]string{"-rls", ln.Addr().String(), "-rls-domain", "d", "-rls-key", "k",
		"-d", "300ms", "-ids", "3", "-c", "4", "-conns", "2", "-timeout", "30s"}, &bytes.Buffer{}))
	var stderr bytes.Buffer
	res, err := load(context.Background(), &cfg, &stderr)
	require.NoError(t, err)
	p := parseSummary(t, res.String()+"\n")
	assert.Zero(t, p.errors, "stderr: %s", stderr.String())
	assert.Greater(t, res.Total, int64(15), "more calls than the limits allow: most were denied")

	answered := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "raterlimiter_rls_requests_total" {
			for _, m := range mf.GetMetric() {
				answered[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	assert.Equal(t, float64(15), answered["OK"], "5 allowed for each of 3 ids")
	assert.Equal(t, float64(res.Total), answered["OK"]+answered["OVER_LIMIT"], "every call answered, none refused: %v", answered)

	for _, bad := range [][]string{{"-rls", "x:1", "-batch"}, {"-rls", "x:1", "-embedded"}, {"-rls", "x:1", "-rls-domain", ""}} {
		assert.Error(t, cfg.parse(bad, &bytes.Buffer{}), "%q", bad)
	}
}
