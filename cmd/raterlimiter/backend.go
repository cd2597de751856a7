package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	rlcheck "github.com/raterlimiter/raterlimiter/internal/check"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/cli"
	"github.com/raterlimiter/raterlimiter/internal/policy"
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
	switch cfg.backend {
	case "memory":
		m := memory.New(memory.Config{
			Shards:         cfg.shards,
			SweepInterval:  cfg.sweepInterval,
			MaxIDBytes:     limiterIDBytes(cfg),
			MaxBuckets:     maxBuckets(cfg),
			MaxBucketBytes: maxBucketBytes(cfg),
			MaxScalesPerID: cfg.maxScalesPerID,
			OnSweep:        func(s memory.SweepStats) { onSwept(s.Deleted, s.Took) },
			Logger:         logger,
		})
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
		fail, err := rlcheck.ParseFailMode("redis-fail", cfg.redisFail)
		if err != nil {
			return backend{}, cli.Usagef("-redis-fail must be closed, open or local, not %q", cfg.redisFail) // checked by parse
		}
		rc := redisbackend.Config{URL: cfg.redisURL, Timeout: cfg.redisTimeout, Fail: fail,
			MaxIDBytes: limiterIDBytes(cfg), Logger: logger, Deadlines: cfg.redisDeadlines}
		rc.DenyCache = cfg.redisDenyCache
		if cfg.redisDenyCache == 0 {
			rc.DenyCache = -1 // off
		}
		metrics := newRedisMetrics()
		metrics.hook(&rc)
		var fallback *memory.Limiter
		if fail == rl.FailLocal {
			fallback = memory.New(memory.Config{Shards: cfg.shards, SweepInterval: cfg.sweepInterval,
				MaxIDBytes: limiterIDBytes(cfg), MaxBuckets: maxBuckets(cfg), MaxScalesPerID: cfg.maxScalesPerID, Logger: logger,
				MaxBucketBytes: maxBucketBytes(cfg)})
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
				var m dto.Metric
				_ = metrics.up.Write(&m)
				return api.BackendState{Up: m.GetGauge().GetValue() == 1, FailMode: fail.String()}
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

// maxBuckets is memory.Config.MaxBuckets for -max-buckets, whose 0 means no
// bound.
func maxBuckets(cfg config) int {
	if cfg.maxBuckets == 0 {
		return -1
	}
	return cfg.maxBuckets
}

// maxBucketBytes is memory.Config.MaxBucketBytes for -max-bucket-bytes,
// whose 0 means no bound.
func maxBucketBytes(cfg config) int64 {
	if cfg.maxBucketBytes == 0 {
		return -1
	}
	return cfg.maxBucketBytes
}

// limiterIDBytes is the longest id the backend accepts: -max-id-bytes, and
// room for the policy name that a check by policy puts before its key. The
// API holds the ids and keys callers send to -max-id-bytes itself.
func limiterIDBytes(cfg config) int { return cfg.maxIDBytes + policy.IDOverhead }

// defaultRedisMaxScale is -redis-max-scale's default: a day. On Redis a
// record lives as long as its scale (plus a slack), and a caller that names
// its own scale under fresh ids leaves one record per id; a day covers the
// per-second to per-day limits callers name themselves, bounds how long a
// flood of fresh ids stays in Redis after it stops, and keeps what it holds
// meanwhile to the ids of one day. Longer quotas (a week, a month) belong in
// a policy, whose scale the operator chooses and the bound leaves alone, or
// the operator raises the flag.
const defaultRedisMaxScale = 24 * time.Hour

// apiMaxScale is api.Config.MaxScale: -redis-max-scale on the Redis
// backend; none on the memory backend, whose records -max-buckets bounds.
func apiMaxScale(cfg config) time.Duration {
	if cfg.backend != "redis" {
		return 0
	}
	return cfg.redisMaxScale
}
