package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	rlcheck "github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// backend is an open limiter with what the sidecar needs around it.
type backend struct {
	rl.Limiter
	// Stats feeds /metrics; nil when the backend has none to give.
	Stats func() api.BackendStats
	// Collectors are the backend's own series for /metrics.
	Collectors []prometheus.Collector
	// State, if set, is the backend's health for the dashboard.
	State func() api.BackendState
	// Close releases the backend.
	Close func() error
	// Stale, if set, says what /healthz should report as stale ("": nothing).
	Stale func() string
}

// openBackend opens the backend cfg names. onSwept is called with the number
// of records each sweep removed.
func openBackend(cfg config, logger *slog.Logger, onSwept func(n int, took time.Duration)) (backend, error) {
	// The memory backend's, or the Redis backend's own (-redis-fail local).
	mc := memory.Config{
		Shards:         cfg.shards,
		SweepInterval:  cfg.sweepInterval,
		MaxIDBytes:     limiterIDBytes(cfg),
		MaxBuckets:     cfg.maxBuckets,
		MaxBucketBytes: cfg.maxBucketBytes,
		MaxScalesPerID: cfg.maxScalesPerID,
		Logger:         logger,
	}
	switch cfg.backend {
	case "memory":
		mc.OnSweep = func(s memory.SweepStats) { onSwept(s.Deleted, s.Took) }
		m := memory.New(mc)
		snaps := newSnapshotState(cfg.snap.interval)
		finalSnapshot, err := openSnapshots(context.Background(), cfg.snap, m, snaps, logger)
		if err != nil {
			m.Close()
			return backend{}, err
		}
		return backend{
			Limiter: m,
			Stats: func() api.BackendStats {
				st := m.Stats()
				return api.BackendStats{Live: st.Live, Restarts: st.Restarts, Pending: st.Pending, Evicted: st.Evicted}
			},
			Close:      func() error { return errors.Join(finalSnapshot(), m.Close()) },
			Collectors: snaps.collectors(),
			Stale:      snaps.stale,
		}, nil
	case "redis":
		fail, _ := rlcheck.ParseFailMode("redis-fail", cfg.redisFail) // validated by parse
		rc := redisbackend.Config{URL: cfg.redisURL, Timeout: cfg.redisTimeout, Fail: fail,
			MaxIDBytes: limiterIDBytes(cfg), Logger: logger, Deadlines: cfg.redisDeadlines, DenyCache: cfg.redisDenyCache}
		metrics := newRedisMetrics()
		metrics.hook(&rc)
		var fallback *memory.Limiter
		if fail == rl.FailLocal {
			fallback = memory.New(mc)
			rc.Fallback = fallback
		}
		rb, err := redisbackend.New(rc)
		if err != nil {
			if fallback != nil {
				fallback.Close()
			}
			return backend{}, err
		}
		return backend{
			Limiter:    rb,
			Collectors: metrics.collectors(),
			State: func() api.BackendState {
				return api.BackendState{Up: rb.Up(), FailMode: fail.String()}
			},
			Close: func() error {
				err := rb.Close()
				if fallback != nil {
					fallback.Close()
				}
				return err
			},
		}, nil
	}
	return backend{}, errors.New("unknown backend " + cfg.backend)
}

// limiterIDBytes is the longest id the backend accepts: -max-id-bytes, and
// room for the policy name that a check by policy puts before its key. The
// API holds the ids and keys callers send to -max-id-bytes itself.
func limiterIDBytes(cfg config) int { return cfg.maxIDBytes + policy.IDOverhead }

// apiMaxScale is api.Config.MaxScale: -redis-max-scale on the Redis
// backend; none on the memory backend, whose records -max-buckets bounds.
func apiMaxScale(cfg config) time.Duration {
	if cfg.backend != "redis" {
		return 0
	}
	return cfg.redisMaxScale
}
