package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// monitoringFiles are the files of the monitoring kit that name metrics.
var monitoringFiles = []string{"../../deploy/prometheus/alerts.yml", "../../deploy/grafana/raterlimiter.json"}

// Metrics the kit uses that a memory sidecar does not export: checked
// against a Redis sidecar instead (redisOnly), or exported only once their
// event has happened (afterEvent: the Redis backend's degraded answers).
var (
	redisOnly  = regexp.MustCompile(`^raterlimiter_redis_`)
	rlsOnly    = regexp.MustCompile(`^raterlimiter_rls_`)
	afterEvent = map[string]bool{"raterlimiter_redis_degraded_total": true}
)

// usedMetrics returns the sample names the monitoring kit's queries use.
func usedMetrics(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\b(?:raterlimiter|go|process)_[a-z0-9_]+\b`)
	set := map[string]bool{}
	for _, f := range monitoringFiles {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllString(string(b), -1) {
			set[m] = true
		}
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// exported returns the sample names of a /metrics body.
func exported(text string) map[string]bool {
	set := map[string]bool{}
	for line := range strings.Lines(text) {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			set[line[:i]] = true
		}
	}
	return set
}

// TestE2EMonitoringMetricsExist scrapes live sidecars and checks that every
// metric the alert rules and the Grafana dashboard use is exported.
func TestE2EMonitoringMetricsExist(t *testing.T) {
	used := usedMetrics(t)
	require.Contains(t, used, "raterlimiter_checks_total")
	require.Contains(t, used, "raterlimiter_sweep_duration_seconds_bucket")

	dir := t.TempDir()
	policies := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(policies, []byte("policies:\n  - name: api\n    key: header:X-Api-Key\n    limit: 2\n    scale: 1m\n"), 0o600))
	s := start(t, nil, "-policies", policies, "-auth-headers", "nginx", "-sweep-interval", "50ms")
	s.get(t, "/check_rate?id=a&scale=60000&limit=1")
	s.get(t, "/check_rate?id=a&scale=60000&limit=1")
	require.Equal(t, 200, s.do(t, "GET", "/auth", "", "", "X-Original-Method", "GET", "X-Original-URI", "/", "X-Api-Key", "k").status)
	mem := exported(s.get(t, "/metrics").body)

	var redisNames, rlsNames []string
	for _, n := range used {
		if redisOnly.MatchString(n) {
			redisNames = append(redisNames, n)
			continue
		}
		if rlsOnly.MatchString(n) {
			rlsNames = append(rlsNames, n)
			continue
		}
		assert.True(t, mem[n], "%s is used by the monitoring kit but not on a memory sidecar's /metrics", n)
	}
	require.NotEmpty(t, redisNames)
	require.NotEmpty(t, rlsNames)
	rs, c, _ := startRLS(t)
	ask(t, c, "messaging", 0, desc("message_type", "marketing", "to_number", "1"))
	rlsm := exported(rs.get(t, "/metrics").body)
	for _, n := range rlsNames {
		assert.True(t, rlsm[n], "%s is used by the monitoring kit but not on an RLS sidecar's /metrics", n)
	}

	redistest.Available(t)
	red0 := redistest.Start(t)
	r := start(t, nil, "-backend", "redis", "-redis-url", red0.URL())
	r.get(t, "/check_rate?id=a&scale=60000&limit=1")
	red := exported(r.get(t, "/metrics").body)
	for _, n := range redisNames {
		if afterEvent[n] {
			continue
		}
		assert.True(t, red[n], "%s is used by the monitoring kit but not on a Redis sidecar's /metrics", n)
	}
}
