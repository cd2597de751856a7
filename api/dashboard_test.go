package api_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
)

// fakeNow is a settable clock for the dashboard's rate samples.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) Add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

type dashData struct {
	Backend   string `json:"backend"`
	HashedIDs bool   `json:"hashed_ids"`
	Rates     []struct {
		T      int64   `json:"t"`
		Checks float64 `json:"checks"`
		Denied float64 `json:"denied"`
	} `json:"rates"`
	Top map[string][]struct {
		Key   string `json:"key"`
		Count uint64 `json:"count"`
	} `json:"top"`
	Sweep struct {
		SweptTotal  float64 `json:"swept_total"`
		Sweeps      int     `json:"sweeps"`
		LastMillis  float64 `json:"last_ms"`
		LiveBuckets *int    `json:"live_buckets"`
	} `json:"sweep"`
}

func dashboardHarness(t *testing.T, hash bool) (*harness, *fakeNow) {
	clock := &fakeNow{t: time.UnixMilli(t0)}
	h := newHarness(t, api.Config{AdminToken: "s3cret", Stats: func() api.BackendStats { return api.BackendStats{Live: 3} },
		Dashboard: api.DashboardConfig{Backend: "memory", Now: clock.Now, Sample: 1, HashIDs: hash, Interval: -1}})
	return h, clock
}

func (h *harness) dashData(t *testing.T) dashData {
	t.Helper()
	r := h.do(t, "GET", "/dashboard/data", "", "", "Authorization", "Bearer s3cret")
	require.Equal(t, 200, r.status, r.body)
	var d dashData
	require.NoError(t, json.Unmarshal([]byte(r.body), &d), r.body)
	return d
}

func TestDashboardData(t *testing.T) {
	h, clock := dashboardHarness(t, false)
	api.SampleDashboard(h.srv)
	for range 5 {
		h.get(t, "/check_rate?id=alice&scale=60000&limit=2")
	}
	h.do(t, "POST", "/check_rates", "application/json", `[{"id":"bob","scale":60000,"limit":5},{"id":"bob","scale":60000,"limit":5}]`)
	clock.Add(2 * time.Second)
	api.SampleDashboard(h.srv)
	h.srv.ObserveSweep(1500 * time.Microsecond)

	r := h.get(t, "/dashboard/data")
	assert.Equal(t, 401, r.status, "the data needs the admin token")
	d := h.dashData(t)
	assert.Equal(t, "memory", d.Backend)
	require.Len(t, d.Rates, 1)
	assert.Equal(t, 3.5, d.Rates[0].Checks, "7 checks in 2 s")
	assert.Equal(t, 1.5, d.Rates[0].Denied, "3 denials in 2 s")
	require.NotEmpty(t, d.Top["ids"])
	assert.Equal(t, "alice", d.Top["ids"][0].Key)
	assert.EqualValues(t, 5, d.Top["ids"][0].Count)
	assert.Equal(t, "bob", d.Top["ids"][1].Key)
	assert.EqualValues(t, 2, d.Top["ids"][1].Count)
	require.Len(t, d.Top["ids_denied"], 1)
	assert.EqualValues(t, 3, d.Top["ids_denied"][0].Count)
	require.Len(t, d.Top["policies"], 1)
	assert.Equal(t, "default", d.Top["policies"][0].Key)
	assert.EqualValues(t, 7, d.Top["policies"][0].Count)
	assert.Equal(t, 1, d.Sweep.Sweeps)
	assert.Equal(t, 1.5, d.Sweep.LastMillis)
	require.NotNil(t, d.Sweep.LiveBuckets)
	assert.Equal(t, 3, *d.Sweep.LiveBuckets)

	// The tables show the last one to two rotations (30 s each), not all
	// time: after two rotations with no traffic, alice is gone.
	for range 2 {
		clock.Add(31 * time.Second)
		api.SampleDashboard(h.srv)
	}
	d = h.dashData(t)
	assert.Empty(t, d.Top["ids"])
	assert.Len(t, d.Rates, 3)
}

func TestDashboardHashesIDs(t *testing.T) {
	h, _ := dashboardHarness(t, true)
	h.get(t, "/check_rate?id=alice&scale=60000&limit=2")
	d := h.dashData(t)
	assert.True(t, d.HashedIDs)
	require.Len(t, d.Top["ids"], 1)
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{12}$`), d.Top["ids"][0].Key)
	assert.NotContains(t, d.Top["ids"][0].Key, "alice")
}

func TestDashboardPage(t *testing.T) {
	h, _ := dashboardHarness(t, false)
	r := h.get(t, "/dashboard")
	require.Equal(t, 200, r.status, "the page holds no data and asks for the token itself")
	assert.Equal(t, "text/html; charset=utf-8", r.headers["Content-Type"])
	assert.Contains(t, r.headers["Content-Security-Policy"], "default-src 'none'")
	assert.Contains(t, r.body, "<canvas")
	assert.Contains(t, r.body, `fetch("dashboard/data"`)
	for _, outside := range []string{"http://", "https://", "src=\"//"} {
		assert.NotContains(t, r.body, outside, "the page loads nothing from elsewhere")
	}
	assert.Equal(t, 405, h.do(t, "POST", "/dashboard", "", "").status)
	assert.False(t, strings.Contains(h.get(t, "/dashboard/data").body, "alice"))
}

func TestDashboardCountsAuthByPolicy(t *testing.T) {
	clock := &fakeNow{t: time.UnixMilli(t0)}
	h, _ := newGateway(t, gatewayPolicies, api.Config{AdminToken: "s3cret", Dashboard: api.DashboardConfig{Now: clock.Now, Sample: 1, Interval: -1}})
	for range 5 {
		h.authAs(t, "POST", "/login", "198.51.100.7")
	}
	d := h.dashData(t)
	got := map[string]uint64{}
	for _, p := range d.Top["policies"] {
		got[p.Key] = p.Count
	}
	assert.Equal(t, map[string]uint64{"login": 5, "everyone": 5}, got)
	require.Len(t, d.Top["policies_denied"], 1)
	assert.Equal(t, "login", d.Top["policies_denied"][0].Key)
	assert.EqualValues(t, 2, d.Top["policies_denied"][0].Count, "login allows 3 a minute")
	assert.Empty(t, d.Top["ids"], "/auth's keys are not shown")
}

// TestChecksFamilyCoversEveryWayIn: raterlimiter_checks_total counts the
// checks of /check_rate, /check_rates and /auth, each under its via, and
// the dashboard's rates are drawn from all of them: a gateway that only
// asks /auth shows its checks and denials.
func TestChecksFamilyCoversEveryWayIn(t *testing.T) {
	clock := &fakeNow{t: time.UnixMilli(t0)}
	h, _ := newGateway(t, gatewayPolicies, api.Config{AdminToken: "s3cret", Dashboard: api.DashboardConfig{Now: clock.Now, Sample: 1, Interval: -1}})
	api.SampleDashboard(h.srv)
	for range 5 { // login: 3 allowed, 2 denied; everyone: 5 allowed
		h.authAs(t, "POST", "/login", "198.51.100.7")
	}
	require.Equal(t, 400, h.do(t, "GET", "/auth", "", "", "X-Original-URI", "/api/x").status, "no X-Original-Method")
	require.Equal(t, 400, h.do(t, "GET", "/auth?deny_status=500", "", "", "X-Original-Method", "GET", "X-Original-URI", "/api/x").status)
	h.get(t, "/check_rate?id=a&scale=60000&limit=1")
	h.get(t, "/check_rate?policy=api&id=k")
	h.do(t, "POST", "/check_rates", "application/json", `[{"id":"b","scale":60000,"limit":1,"algo":"token"},{"id":"b","scale":60000,"limit":1,"algo":"token"}]`)
	clock.Add(time.Second)
	api.SampleDashboard(h.srv)

	body := h.get(t, "/metrics").body
	for _, want := range []string{
		`raterlimiter_checks_total{algo="sliding",result="allowed",via="auth"} 3`,
		`raterlimiter_checks_total{algo="sliding",result="denied",via="auth"} 2`,
		`raterlimiter_checks_total{algo="fixed",result="allowed",via="auth"} 5`,
		`raterlimiter_checks_total{algo="fixed",result="invalid",via="auth"} 2`,
		`raterlimiter_checks_total{algo="fixed",result="allowed",via="http"} 2`,
		`raterlimiter_checks_total{algo="token",result="allowed",via="batch"} 1`,
		`raterlimiter_checks_total{algo="token",result="denied",via="batch"} 1`,
	} {
		assert.Contains(t, body, want)
	}
	d := h.dashData(t)
	require.NotEmpty(t, d.Rates)
	last := d.Rates[len(d.Rates)-1]
	assert.InDelta(t, 14, last.Checks, 1e-9, "10 /auth checks, 2 single, 2 in a batch, in one second")
	assert.InDelta(t, 3, last.Denied, 1e-9, "2 by login over /auth, 1 in the batch")
}

// TestDashboardSamplesFromStart: the rates are sampled from the moment the
// server serves, not from the first look at the page, so the first look
// after an incident shows the minutes before it.
func TestDashboardSamplesFromStart(t *testing.T) {
	h := newHarness(t, api.Config{Dashboard: api.DashboardConfig{Interval: 5 * time.Millisecond}})
	for range 10 {
		h.get(t, "/check_rate?id=incident&scale=60000&limit=5")
	}
	// Two samples after the checks: the rates between them and the one
	// before the checks (taken as Serve began) hold them.
	n := api.DashboardSamples(h.srv)
	require.Positive(t, n, "sampled as Serve began")
	require.Eventually(t, func() bool { return api.DashboardSamples(h.srv) >= n+2 }, 10*time.Second, time.Millisecond,
		"nobody asked for /dashboard/data: the sampler runs anyway")
	d := h.dashData(t)
	require.GreaterOrEqual(t, len(d.Rates), 2, "the first look finds rates already")
	busiest := 0.0
	for _, r := range d.Rates {
		busiest = max(busiest, r.Checks)
	}
	assert.Positive(t, busiest, "the checks made before anyone looked are in the rates")

	off := newHarness(t, api.Config{Dashboard: api.DashboardConfig{Off: true, Interval: time.Millisecond}})
	off.get(t, "/check_rate?id=x&scale=60000&limit=5")
	time.Sleep(20 * time.Millisecond)
	assert.Zero(t, api.DashboardSamples(off.srv), "-dashboard-off samples nothing")
}

// TestBucketsWithoutAnID: GET /buckets is one id's records, never a listing
// of every id; without id it says so, and docs/http-api.md says the same.
func TestBucketsWithoutAnID(t *testing.T) {
	h := newHarness(t, api.Config{})
	h.get(t, "/check_rate?id=alice&scale=60000&limit=2")
	for _, method := range []string{"GET", "DELETE"} {
		r := h.do(t, method, "/buckets", "", "")
		assert.Equal(t, 400, r.status, method)
		assert.Contains(t, r.body, `"field":"id"`)
		assert.Contains(t, r.body, "there is no listing of every id", method)
	}
	doc, err := os.ReadFile("../docs/http-api.md")
	require.NoError(t, err)
	for _, line := range strings.Split(string(doc), "\n") {
		if i := strings.Index(line, "`GET /buckets"); i >= 0 {
			assert.True(t, strings.HasPrefix(line[i:], "`GET /buckets?id=") || strings.Contains(line, "without"),
				"docs/http-api.md describes GET /buckets as one id's: %q", line)
		}
	}
}
