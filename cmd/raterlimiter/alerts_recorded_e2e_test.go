package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

var updateRecorded = flag.Bool("update-recorded-alerts", false, "rewrite the recorded part of deploy/prometheus/alerts_test.yml from real runs")

const (
	alertsFile     = "../../deploy/prometheus/alerts.yml"
	alertsTestFile = "../../deploy/prometheus/alerts_test.yml"
	recordedBegin  = "  # BEGIN RECORDED\n"
	recordedEnd    = "  # END RECORDED\n"
	// rounds of traffic in a run: one scrape after each, one minute apart
	// in the alert tests.
	rounds = 25
)

// recordedSeries are the samples the alerts read, kept from a scrape.
var recordedSeries = map[string]bool{
	"raterlimiter_checks_total": true, "raterlimiter_redis_up": true, "raterlimiter_evicted_buckets_total": true,
	"raterlimiter_policy_reloads_total": true, "raterlimiter_rls_reloads_total": true,
}

// recording is one run's series, by their labels, one value a scrape.
type recording struct {
	instance string
	series   map[string][]float64
}

func (r *recording) scrape(t *testing.T, s *sidecar) {
	t.Helper()
	body := s.get(t, "/metrics").body
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	n := 0
	for name, mf := range mfs {
		if !recordedSeries[name] {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := []string{`instance="` + r.instance + `"`}
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(labels)
			key := name + "{" + strings.Join(labels, ", ") + "}"
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			r.series[key] = append(r.series[key], v)
			n = max(n, len(r.series[key]))
		}
	}
	for k, vs := range r.series {
		require.Len(t, vs, n, "%s disappeared from /metrics", k)
	}
}

// yaml is the recording as promtool's input_series: series that never
// moved from 0 are left out, but raterlimiter_redis_up.
func (r *recording) yaml() string {
	var keys []string
	for k, vs := range r.series {
		if strings.HasPrefix(k, "raterlimiter_redis_up") || slices.ContainsFunc(vs, func(v float64) bool { return v != 0 }) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		vals := make([]string, len(r.series[k]))
		for i, v := range r.series[k] {
			vals[i] = strconv.FormatFloat(v, 'f', -1, 64)
		}
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", k, strings.Join(vals, " "))
	}
	return b.String()
}

// startRedisDown starts a sidecar on a private redis-server, then stops
// Redis and asks /healthz (which counts no check) until the sidecar's
// circuit is open, so that every check after it is answered 503 at once.
func startRedisDown(t *testing.T, args ...string) *sidecar {
	t.Helper()
	redistest.Available(t)
	rs := redistest.Start(t)
	s := start(t, nil, append(args, "-backend", "redis", "-redis-url", rs.URL())...)
	rs.Kill()
	s.WaitUntil(t, 20*time.Second, "raterlimiter_redis_up 0", func() bool {
		s.get(t, "/healthz")
		return strings.Contains(s.get(t, "/metrics").body, "\nraterlimiter_redis_up 0\n")
	})
	return s
}

// waitFor polls s's /metrics until it contains line (10 s at most).
func waitFor(t *testing.T, s *sidecar, line string) {
	t.Helper()
	s.WaitUntil(t, 10*time.Second, line, func() bool { return strings.Contains(s.get(t, "/metrics").body, line) })
}

const recordedPolicies = "policies:\n  - {name: api, key: 'header:X-Api-Key', limit: 2, scale: 8760h}\n"

// recordGateway runs sidecars that only answer /auth (as nginx asks it),
// one on memory and one on a Redis that does not answer.
func recordGateway(t *testing.T) (mem, down *recording) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policies.yaml")
	require.NoError(t, writeFile(pol, recordedPolicies))
	// One shard holding at most 4 records: every round's new key evicts
	// the least recently counted one once there are 4 (key k, counted
	// every round, fixed windows counting denials too, is never it).
	// Reloads by POST /reload only: a file watch would add reloads as the
	// test writes the file, when the machine's timing says.
	s := start(t, nil, "-policies", pol, "-auth-headers", "nginx", "-shards", "1", "-max-buckets", "4", "-sweep-interval", "1h", "-watch-files=false")
	d := startRedisDown(t, "-policies", pol, "-auth-headers", "nginx", "-watch-files=false")
	mem = &recording{instance: "gateway", series: map[string][]float64{}}
	down = &recording{instance: "gateway-redis-down", series: map[string][]float64{}}
	auth := func(s *sidecar, key string) int {
		return s.do(t, "GET", "/auth", "", "", "X-Original-Method", "GET", "X-Original-URI", "/api/x", "X-Api-Key", key).status
	}
	for round := range rounds {
		for range 10 {
			auth(s, "k")
			require.Equal(t, 503, auth(d, "k"))
		}
		require.Equal(t, 200, auth(s, fmt.Sprintf("new-%d", round)), "a new key has its 2")
		if round == rounds-6 { // a bad file: the reload fails, the rules stay
			require.NoError(t, writeFile(pol, "policies: [\n"))
			require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
			waitFor(t, s, `raterlimiter_policy_reloads_total{result="failed"} 1`)
			require.NoError(t, writeFile(pol, recordedPolicies))
		}
		mem.scrape(t, s)
		down.scrape(t, d)
	}
	return mem, down
}

// recordRLS runs sidecars that only answer Envoy's ShouldRateLimit, one on
// memory and one on a Redis that does not answer.
func recordRLS(t *testing.T) (mem, down *recording) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rls.yaml")
	const good = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 2}\n" // a window no run ends
	require.NoError(t, writeFile(cfg, good))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", cfg, "-watch-files=false")
	d := startRedisDown(t, "-rls-listen", "127.0.0.1:0", "-rls-config", cfg, "-watch-files=false")
	client := func(s *sidecar) rlspb.RateLimitServiceClient {
		conn, err := grpc.NewClient(s.listenAddr(t, "rls"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return rlspb.NewRateLimitServiceClient(conn)
	}
	sc, dc := client(s), client(d)
	mem = &recording{instance: "rls", series: map[string][]float64{}}
	down = &recording{instance: "rls-redis-down", series: map[string][]float64{}}
	for round := range rounds {
		for range 10 {
			ask(t, sc, "d", 0, desc("k", "v"))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := dc.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "v")}})
			cancel()
			require.Error(t, err, "Redis does not answer: Unavailable")
		}
		if round == rounds-6 {
			require.NoError(t, writeFile(cfg, "domain: d\ndescriptors: [\n"))
			require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
			waitFor(t, s, `raterlimiter_rls_reloads_total{result="failed"} 1`)
			require.NoError(t, writeFile(cfg, good))
		}
		mem.scrape(t, s)
		down.scrape(t, d)
	}
	return mem, down
}

// expected are the alerts a recorded test expects at its end: alert name,
// instance, and the summary's value where it has one.
type expected struct{ alert, instance, value string }

// recordedTest is one promtool test case on recorded runs.
func recordedTest(t *testing.T, name string, recs []*recording, exp []expected) string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &rules))
	var sb strings.Builder
	fmt.Fprintf(&sb, "  - name: %s\n    interval: 1m\n    input_series:\n", name)
	for _, r := range recs {
		sb.WriteString(r.yaml())
	}
	sb.WriteString("    alert_rule_test:\n")
	for _, g := range rules.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "RaterlimiterDown" || rule.Alert == "RaterlimiterSweepSlow" {
				continue // not the checks' series: up is Prometheus's, sweeps the engine's
			}
			fmt.Fprintf(&sb, "      - eval_time: %dm\n        alertname: %s\n", rounds-1, rule.Alert)
			var firing []expected
			for _, e := range exp {
				if e.alert == rule.Alert {
					firing = append(firing, e)
				}
			}
			if len(firing) == 0 {
				sb.WriteString("        exp_alerts: []\n")
				continue
			}
			sb.WriteString("        exp_alerts:\n")
			for _, e := range firing {
				fmt.Fprintf(&sb, "          - exp_labels: {severity: %s, instance: %s}\n            exp_annotations:\n", rule.Labels["severity"], e.instance)
				for _, k := range []string{"summary", "description"} {
					a := strings.NewReplacer("{{ $labels.instance }}", e.instance, "{{ $value | humanizePercentage }}", e.value).Replace(rule.Annotations[k])
					require.NotContains(t, a, "{{", "a template this test does not render")
					fmt.Fprintf(&sb, "              %s: %q\n", k, a)
				}
			}
		}
	}
	return sb.String()
}

// TestE2EAlertsOnRecordedRuns runs a gateway-only deployment (/auth) and
// an RLS-only one (Envoy's gRPC), each on memory and on a Redis that does
// not answer, scrapes their /metrics after each round of traffic, and has
// promtool test the alert rules on those series: the denial, unavailable,
// eviction, Redis and reload alerts fire for both deployment modes. The
// series are deterministic (fixed counts, windows of a day), so the copy in
// deploy/prometheus/alerts_test.yml, which TestAlertRules (deploy/) runs,
// must be what this run recorded.
func TestE2EAlertsOnRecordedRuns(t *testing.T) {
	promtool := tooltest.Need(t, "promtool", "prometheus")
	var block string
	for attempt := 0; ; attempt++ {
		day := time.Now().UTC().YearDay()
		gw, gwDown := recordGateway(t)
		rl, rlDown := recordRLS(t)
		block = recordedTest(t, "recorded, gateway only (/auth as nginx asks it), on memory and on a Redis that does not answer",
			[]*recording{gw, gwDown}, []expected{
				{"RaterlimiterDenialRatioHigh", "gateway", "90.91%"}, // 10 denied, 1 allowed a round
				{"RaterlimiterUnavailable", "gateway-redis-down", ""},
				{"RaterlimiterRedisFailMode", "gateway-redis-down", ""},
				{"RaterlimiterEvicting", "gateway", ""},
				{"RaterlimiterPolicyReloadFailed", "gateway", ""},
			}) + "\n" + recordedTest(t, "recorded, RLS only (Envoy's ShouldRateLimit), on memory and on a Redis that does not answer",
			[]*recording{rl, rlDown}, []expected{
				{"RaterlimiterDenialRatioHigh", "rls", "100%"},
				{"RaterlimiterUnavailable", "rls-redis-down", ""},
				{"RaterlimiterRedisFailMode", "rls-redis-down", ""},
				{"RaterlimiterPolicyReloadFailed", "rls", ""},
			})
		if time.Now().UTC().YearDay() == day || attempt == 1 {
			break // a day's window turned over mid-run: record again
		}
	}

	b, err := os.ReadFile(alertsTestFile)
	require.NoError(t, err)
	src := string(b)
	i, j := strings.Index(src, recordedBegin), strings.Index(src, recordedEnd)
	require.True(t, i >= 0 && j > i, "alerts_test.yml has no recorded part")
	fresh := src[:i+len(recordedBegin)] + block + src[j:]

	// promtool tests the rules on this run's series.
	dir := t.TempDir()
	abs, err := filepath.Abs(alertsFile)
	require.NoError(t, err)
	test := filepath.Join(dir, "alerts_test.yml")
	require.NoError(t, os.WriteFile(test, []byte(strings.Replace(fresh, "  - alerts.yml\n", "  - "+abs+"\n", 1)), 0o600))
	out, err := exec.Command(promtool, "test", "rules", test).CombinedOutput()
	require.NoError(t, err, "promtool test rules on the recorded series:\n%s", out)

	if *updateRecorded {
		require.NoError(t, os.WriteFile(alertsTestFile, []byte(fresh), 0o644))
		return
	}
	require.Equal(t, src, fresh, "the recorded series in alerts_test.yml are not what the sidecar records now: run go test ./cmd/raterlimiter -run AlertsOnRecordedRuns -update-recorded-alerts")
}
