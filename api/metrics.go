package api

import (
	"bytes"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/checkmetric"
)

// endpoint labels the latency histogram, and says which via of
// raterlimiter_checks_total a check counts under (viaNames).
type endpoint uint8

const (
	endpointCheck endpoint = iota
	endpointBatch
	endpointAuth
	numEndpoints
)

var (
	endpointNames = [numEndpoints]string{"check_rate", "check_rates", "auth"}
	viaNames      = [numEndpoints]string{checkmetric.ViaHTTP, checkmetric.ViaBatch, checkmetric.ViaAuth}
)

// metrics are the server's Prometheus series, in a registry of its own (no
// global state). The hot path touches pre-resolved children only.
type metrics struct {
	reg *prometheus.Registry
	// checks are raterlimiter_checks_total's series of this server's ways
	// in, by endpoint.
	checks [numEndpoints]*checkmetric.Vec
	// otherChecks are the family's series that other faces count (the
	// RLS), given among Config.Collectors: /dashboard adds them.
	otherChecks []*checkmetric.Vec
	duration    [numEndpoints]prometheus.Observer
	batchSize   prometheus.Histogram
	swept       prometheus.Counter
	// refusedConns counts connections refused at accept.
	refusedConns prometheus.Counter
	// overBudget counts connections closed holding request bytes past the
	// body budget.
	overBudget prometheus.Counter
	// heldBytes is the request bytes read or admitted and not yet
	// answered, over every connection: what -body-budget bounds.
	heldBytes byteCount
	// sweepSeconds is the time of one shard's sweep.
	sweepSeconds prometheus.Histogram
	// held is the answers being held for their turn (wait.go).
	held prometheus.Gauge
	// heldRefused counts checks that asked to wait past the bounds on
	// held answers.
	heldRefused prometheus.Counter
}

func newMetrics(stats func() BackendStats, extra []prometheus.Collector) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	for e := range numEndpoints {
		m.checks[e] = checkmetric.New(viaNames[e])
		m.reg.MustRegister(m.checks[e])
	}
	for _, c := range extra {
		if t, ok := c.(*checkmetric.Vec); ok {
			m.otherChecks = append(m.otherChecks, t)
		}
	}
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "raterlimiter_request_duration_seconds",
		Help:    "Time to answer a successful /check_rate, /check_rates or /auth request, from parsed request to written body.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16), // 25µs .. 0.8s
	}, []string{"endpoint"})
	for e := range numEndpoints {
		m.duration[e] = duration.WithLabelValues(endpointNames[e])
	}
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "raterlimiter_batch_size",
		Help:    "Checks per accepted POST /check_rates.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000},
	})
	m.swept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "raterlimiter_swept_buckets_total",
		Help: "Stale bucket records removed by the sweeper.",
	})
	m.refusedConns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "raterlimiter_connections_refused_total",
		Help: "Connections refused at accept because their address held its bound (-max-conns-per-ip, -max-conns-per-proxy) or the server held all it serves at once.",
	})
	m.sweepSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "raterlimiter_sweep_duration_seconds",
		Help:    "Time of one shard's sweep of stale bucket records.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10), // 100µs .. 26s
	})
	m.overBudget = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "raterlimiter_connections_over_body_budget_total",
		Help: "Connections closed while holding more than 16 KiB of an unanswered request, or refused a body announced bigger, the server holding its whole budget of such bytes (-body-budget).",
	})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "raterlimiter_request_bytes_held",
		Help: "Request bytes read or admitted and not yet answered, over every connection: what -body-budget bounds.",
	}, func() float64 { return float64(m.heldBytes.load()) })
	m.held = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "raterlimiter_held_answers",
		Help: "Answers held until their request's turn (wait=1, a policy's wait: true; leaky), bounded by -max-wait, -max-held and -max-held-per-client.",
	})
	m.heldRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "raterlimiter_held_answers_refused_total",
		Help: "Checks that asked to wait while their client address (-max-held-per-client) or the server (-max-held) held its bound of held answers: a check that would have waited was denied at once, taking no place in the queue.",
	})
	m.reg.MustRegister(duration, m.batchSize, m.swept, m.refusedConns, m.overBudget, held, m.sweepSeconds, m.held, m.heldRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(extra...)
	if stats != nil {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "raterlimiter_live_buckets",
				Help: "Live bucket records in the backend.",
			}, func() float64 { return float64(stats().Live) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "raterlimiter_actor_restarts_total",
				Help: "Actor restarts after a panic.",
			}, func() float64 { return float64(stats().Restarts) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "raterlimiter_evicted_buckets_total",
				Help: "Live bucket records evicted to stay within -max-buckets.",
			}, func() float64 { return float64(stats().Evicted) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "raterlimiter_mailbox_depth",
				Help: "Checks waiting in the actors' mailboxes.",
			}, func() float64 { return float64(stats().Pending) }),
		)
	}
	return m
}

// check counts one check that arrived through e.
func (m *metrics) check(e endpoint, a rl.Algo, r checkmetric.Result) { m.checks[e].Inc(a, r) }

func (m *metrics) latency(e endpoint, start time.Time) {
	m.duration[e].Observe(time.Since(start).Seconds())
}

// serveMetrics writes the registry in the Prometheus text format.
func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx) {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		s.cfg.Logger.Error("api: gathering metrics", "err", err)
	}
	var buf bytes.Buffer
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			s.cfg.Logger.Error("api: encoding metrics", "err", err)
			break
		}
	}
	ctx.SetContentType(string(format))
	ctx.SetBody(buf.Bytes())
}
