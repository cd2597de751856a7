package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// redisMetrics are the Redis backend's series on /metrics, fed by its hooks.
type redisMetrics struct {
	calls       *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	up          prometheus.Gauge
	degraded    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	local       prometheus.Counter
}

func newRedisMetrics() *redisMetrics {
	m := &redisMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_redis_calls_total",
			Help: "Calls to Redis, by operation and result (ok, error).",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "raterlimiter_redis_call_seconds",
			Help:    "Time of a call to Redis, by operation, failures included.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14), // 50µs .. 0.4s
		}, []string{"op"}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_redis_up",
			Help: "1 while Redis answers (the circuit is closed), 0 while it is open: down, or refusing writes (OOM, MISCONF).",
		}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_redis_degraded_total",
			Help: "Checks answered without Redis, by fail mode (closed, open, local).",
		}, []string{"mode"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_redis_circuit_transitions_total",
			Help: "Changes of the Redis circuit, by the state entered (open, closed) and why (refused, reset, closed, loading, clusterdown, oom, misconf, no_answer, ..., answered).",
		}, []string{"state", "reason"}),
		local: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_redis_local_denials_total",
			Help: "Checks denied by this sidecar's cache of denials, without asking Redis (-redis-deny-cache).",
		}),
	}
	m.up.Set(1)
	return m
}

// hook installs the metrics in a backend's configuration and options.
func (m *redisMetrics) hook(rc *redisbackend.Config) {
	rc.OnCall = func(op string, d time.Duration, err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.calls.WithLabelValues(op, result).Inc()
		m.latency.WithLabelValues(op).Observe(d.Seconds())
	}
	rc.OnDegraded = func(e rl.DegradedEvent) {
		m.degraded.WithLabelValues(e.Mode.String()).Add(float64(e.Checks))
	}
	rc.OnLocalDenials = func(n int) { m.local.Add(float64(n)) }
	rc.OnCircuit = func(open bool, reason string) {
		up, state := 1.0, "closed"
		if open {
			up, state = 0, "open"
		}
		m.up.Set(up)
		m.transitions.WithLabelValues(state, reason).Inc()
	}
}

func (m *redisMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.latency, m.up, m.degraded, m.transitions, m.local}
}
