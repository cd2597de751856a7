package main

import (
	"errors"
	"log/slog"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/memory"
)

// backend is an open limiter with what the sidecar needs around it.
type backend struct {
	rl.Limiter
	// Stats feeds /metrics; nil when the backend has none to give.
	Stats func() api.BackendStats
	// Close releases the backend.
	Close func() error
}

// openBackend opens the backend cfg names. onSwept is called with the number
// of records each sweep removed.
func openBackend(cfg config, logger *slog.Logger, onSwept func(n int)) (backend, error) {
	switch cfg.backend {
	case "memory":
		m := memory.New(memory.Config{
			Shards:        cfg.shards,
			SweepInterval: cfg.sweepInterval,
			MaxIDBytes:    cfg.maxIDBytes,
			Logger:        logger,
			OnSweep: func(_ int, s actor.SweepStats, err error) {
				if err == nil {
					onSwept(s.Deleted)
				}
			},
		})
		return backend{
			Limiter: m,
			Stats: func() api.BackendStats {
				st := m.Stats()
				return api.BackendStats{Live: st.Live, Restarts: st.Restarts, Pending: st.Pending}
			},
			Close: m.Close,
		}, nil
	case "redis":
		return backend{}, errors.New("the redis backend is not available yet in this build; use -backend memory")
	}
	return backend{}, errors.New("unknown backend " + cfg.backend)
}
