package api

import (
	"cmp"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/topk"
)

// dashboardPage is GET /dashboard: one page, no outside resources, that
// asks for the admin token (when the server has one) and polls
// /dashboard/data with it in a header.
//
//go:embed dashboard/index.html
var dashboardPage []byte

// The dashboard's fixed settings.
const (
	// dashboardWindow is how far back /dashboard/data's rates go.
	dashboardWindow = 5 * time.Minute
	// dashboardTop is how many ids and policies each table shows.
	dashboardTop = 10
	// dashboardRotate is how often the top-k sketches start afresh: the
	// tables show the last one to two periods, not all time.
	dashboardRotate = 30 * time.Second
)

// DashboardConfig configures GET /dashboard and /dashboard/data.
type DashboardConfig struct {
	// Off turns the dashboard off: /dashboard and /dashboard/data answer
	// 404 and checks feed nothing.
	Off bool
	// HashIDs shows ids as a keyed hash (HMAC-SHA-256 under a key drawn at
	// start, 12 hex digits), for deployments where ids are secrets.
	HashIDs bool
	// Backend names the backend on the page ("memory", "redis").
	Backend string
	// State, if set, describes the backend's state on the page, e.g. the
	// Redis circuit and its fail mode.
	State func() BackendState
	// Now is the clock of the rate samples. Default time.Now.
	Now func() time.Time
	// Sample is the top-k sketches' sampling: one check in Sample is
	// counted (rounded up to a power of two). Default 16; 1 counts every
	// check.
	Sample int
	// Interval is how often the rates are sampled, from the first Serve
	// on, whether anyone looks or not: an operator who opens the page
	// after an incident sees the minutes before it. Default 1s; negative:
	// never in the background.
	Interval time.Duration
}

// Defaults of DashboardConfig's zero fields.
const (
	// defaultDashboardInterval is how often the dashboard samples the rates.
	defaultDashboardInterval = time.Second
	// defaultDashboardSample is the top-k sketches' sampling: one check in
	// 16 feeds them.
	defaultDashboardSample = 16
)

// BackendState is the backend's health as the dashboard shows it.
type BackendState struct {
	// Up is false while the backend does not answer (Redis's circuit open).
	Up bool `json:"up"`
	// FailMode is what checks get while it does not: closed, open or
	// local; empty when the backend cannot fail that way.
	FailMode string `json:"fail_mode,omitempty"`
}

// dashboard is the state behind /dashboard/data: rate samples and four
// heavy-hitter sketches, two generations of each.
type dashboard struct {
	cfg  DashboardConfig
	key  [32]byte  // of the id hash
	mask uint32    // a check feeds the sketches when rand&mask == 0
	once sync.Once // starts the sampler

	// cur is fed on the hot path: an atomic load, then topk.Sketch.Add,
	// which never waits for a lock. tick swaps it for a fresh
	// one every dashboardRotate, keeping the previous one in old.
	cur atomic.Pointer[sketches]

	mu      sync.Mutex // guards what follows
	old     *sketches
	samples []sample // one a second, the last dashboardWindow
	lastRot time.Time
	sweeps  int
	lastSw  time.Time
	tookSw  time.Duration
}

type sketches struct{ ids, idsDenied, pols, polsDenied *topk.Sketch }

func newSketches() *sketches {
	n := topk.DefaultSize
	return &sketches{ids: topk.New(n), idsDenied: topk.New(n), pols: topk.New(n), polsDenied: topk.New(n)}
}

// sample is the counters at one moment.
type sample struct {
	at             time.Time
	checks, denied float64
}

func newDashboard(cfg DashboardConfig) *dashboard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval == 0 {
		cfg.Interval = defaultDashboardInterval
	}
	d := &dashboard{cfg: cfg, old: newSketches()}
	d.cur.Store(newSketches())
	if cfg.Sample <= 0 {
		cfg.Sample = defaultDashboardSample
	}
	for d.mask+1 < uint32(cfg.Sample) {
		d.mask = d.mask<<1 | 1
	}
	crand.Read(d.key[:])
	return d
}

// observe feeds one answered check: its id as the caller gave it ("" for
// an answer of /auth, whose key values, client addresses and API keys, are
// not shown), the policy it was checked by (headers.PolicyName for none),
// and whether it was denied.
func (d *dashboard) observe(id, policyName string, denied bool) {
	// One random draw decides for the four sketches: the common path is
	// this draw and a branch.
	if d.cfg.Off || rand.Uint32()&d.mask != 0 {
		return
	}
	g := d.cur.Load()
	w := uint64(d.mask) + 1
	g.pols.Add(policyName, w)
	if denied {
		g.polsDenied.Add(policyName, w)
	}
	if id != "" {
		g.ids.Add(id, w)
		if denied {
			g.idsDenied.Add(id, w)
		}
	}
}

// tick records the counters at now and rotates the sketches when due.
func (d *dashboard) tick(now time.Time, checks, denied float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.samples = append(d.samples, sample{at: now, checks: checks, denied: denied})
	cut := 0
	for cut < len(d.samples) && now.Sub(d.samples[cut].at) > dashboardWindow {
		cut++
	}
	d.samples = append(d.samples[:0], d.samples[cut:]...)
	if d.lastRot.IsZero() {
		d.lastRot = now
	}
	if now.Sub(d.lastRot) >= dashboardRotate {
		d.old = d.cur.Swap(newSketches())
		d.lastRot = now
	}
}

// startDashboard begins sampling every Interval until Shutdown closes
// stopping; the first Serve calls it, so the rates cover the minutes before
// anyone looks.
func (s *Server) startDashboard() {
	d := s.dash
	if d.cfg.Off || d.cfg.Interval < 0 {
		return
	}
	d.once.Do(func() {
		s.sampleDashboard()
		go func() {
			t := time.NewTicker(d.cfg.Interval)
			defer t.Stop()
			for {
				select {
				case <-s.stopping:
					return
				case <-t.C:
					s.sampleDashboard()
				}
			}
		}()
	})
}

// sampleDashboard records the counters now: raterlimiter_checks_total's
// allowed and denied series, and its denied ones alone, summed over every
// way in (the RLS's too).
func (s *Server) sampleDashboard() {
	var checks, denied float64
	for _, v := range slices.Concat(s.metrics.checks[:], s.metrics.otherChecks) {
		c, d := v.Totals()
		checks, denied = checks+c, denied+d
	}
	s.dash.tick(s.dash.cfg.Now(), checks, denied)
}

// dashboardData is the body of GET /dashboard/data.
type dashboardData struct {
	Now       int64             `json:"now"` // Unix ms
	Backend   string            `json:"backend"`
	State     *BackendState     `json:"state,omitempty"`
	HashedIDs bool              `json:"hashed_ids"`
	Rates     []ratePoint       `json:"rates"`
	Top       map[string][]hits `json:"top"`
	Sweep     sweepFigures      `json:"sweep"`
}

type ratePoint struct {
	T      int64   `json:"t"` // Unix ms, end of the interval
	Checks float64 `json:"checks"`
	Denied float64 `json:"denied"`
}

type hits struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
}

type sweepFigures struct {
	SweptTotal   float64 `json:"swept_total"`
	Sweeps       int     `json:"sweeps"`
	LastMillis   float64 `json:"last_ms"`
	LastAt       int64   `json:"last_at,omitempty"` // Unix ms
	LiveBuckets  *int    `json:"live_buckets,omitempty"`
	EvictedTotal *uint64 `json:"evicted_total,omitempty"`
}

// data assembles the body of GET /dashboard/data.
func (s *Server) dashboardData() dashboardData {
	d := s.dash
	out := dashboardData{
		Now:       d.cfg.Now().UnixMilli(),
		Backend:   d.cfg.Backend,
		HashedIDs: d.cfg.HashIDs,
		Rates:     []ratePoint{},
		Top:       map[string][]hits{},
	}
	if d.cfg.State != nil {
		st := d.cfg.State()
		out.State = &st
	}
	cur := d.cur.Load()
	d.mu.Lock()
	for i := 1; i < len(d.samples); i++ {
		a, b := d.samples[i-1], d.samples[i]
		secs := b.at.Sub(a.at).Seconds()
		if secs <= 0 {
			continue
		}
		out.Rates = append(out.Rates, ratePoint{T: b.at.UnixMilli(),
			Checks: max(0, b.checks-a.checks) / secs, Denied: max(0, b.denied-a.denied) / secs})
	}
	old := d.old
	out.Sweep.Sweeps, out.Sweep.LastMillis = d.sweeps, float64(d.tookSw.Microseconds())/1000
	if !d.lastSw.IsZero() {
		out.Sweep.LastAt = d.lastSw.UnixMilli()
	}
	d.mu.Unlock()
	out.Top["ids"] = d.merge(cur.ids, old.ids, true)
	out.Top["ids_denied"] = d.merge(cur.idsDenied, old.idsDenied, true)
	out.Top["policies"] = d.merge(cur.pols, old.pols, false)
	out.Top["policies_denied"] = d.merge(cur.polsDenied, old.polsDenied, false)
	var m dto.Metric
	if s.metrics.swept.Write(&m) == nil {
		out.Sweep.SweptTotal = m.GetCounter().GetValue()
	}
	if s.cfg.Stats != nil {
		st := s.cfg.Stats()
		out.Sweep.LiveBuckets, out.Sweep.EvictedTotal = &st.Live, &st.Evicted
	}
	return out
}

// merge adds two generations of a sketch and returns the heaviest keys.
func (d *dashboard) merge(a, b *topk.Sketch, ids bool) []hits {
	sum := map[string]uint64{}
	for _, sk := range []*topk.Sketch{a, b} {
		for _, it := range sk.Top(topk.DefaultSize) {
			sum[it.Key] += it.Count
		}
	}
	out := make([]hits, 0, len(sum))
	for k, n := range sum {
		if ids && d.cfg.HashIDs {
			k = d.hash(k)
		}
		out = append(out, hits{Key: k, Count: n})
	}
	slices.SortFunc(out, func(x, y hits) int {
		if c := cmp.Compare(y.Count, x.Count); c != 0 {
			return c
		}
		return strings.Compare(x.Key, y.Key)
	})
	return out[:min(len(out), dashboardTop)]
}

// hash is the id as the page shows it under HashIDs.
func (d *dashboard) hash(id string) string {
	h := hmac.New(sha256.New, d.key[:])
	h.Write([]byte(id))
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// serveDashboard serves GET /dashboard: the page itself holds no data, so
// it needs no token; the page asks for one when /dashboard/data says 401.
func (s *Server) serveDashboard(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(dashboardPage)
}

// serveDashboardData serves GET /dashboard/data (admin).
func (s *Server) serveDashboardData(ctx *fasthttp.RequestCtx) {
	if !s.requireAdmin(ctx, "/dashboard/data") {
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	s.writeJSON(ctx, fasthttp.StatusOK, s.dashboardData())
}

// ObserveSweep records one sweep of the backend that took took: the
// dashboard shows the last one and /metrics their histogram.
func (s *Server) ObserveSweep(took time.Duration) {
	s.metrics.sweepSeconds.Observe(took.Seconds())
	d := s.dash
	d.mu.Lock()
	d.sweeps++
	d.lastSw, d.tookSw = d.cfg.Now(), took
	d.mu.Unlock()
}
