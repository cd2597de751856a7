// Package sweeper periodically asks actors to delete the buckets no decision
// can read again (the Erlang original's cleanup). It never touches a store:
// it sends a sweep message and the actor does the deleting.
//
// Engine internals: use package memory. Only memory imports this package
// (the root package's TestEngineIsSealed checks it).
package sweeper

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/raterlimiter/raterlimiter/actor"
)

// DefaultInterval is the time between sweeps when Config.Interval is zero: the
// original's cleanup_rate.
const DefaultInterval = 10 * time.Second

// Target is what the sweeper sweeps: an *actor.Actor.
type Target interface {
	Sweep(ctx context.Context) (actor.SweepStats, error)
}

// Config configures a Sweeper. Zero fields mean the documented defaults.
type Config struct {
	// Interval is the time between the starts of two sweeps. Default
	// DefaultInterval.
	Interval time.Duration
	// Ticks, if set, replaces the ticker: a sweep starts on each value
	// received. For tests.
	Ticks <-chan time.Time
	// OnSweep, if set, is called after each target's sweep with its result.
	OnSweep func(target int, s actor.SweepStats, err error)
	// Logger receives sweep failures. Default slog.Default().
	Logger *slog.Logger
}

// Sweeper runs sweeps on a goroutine of its own until Close.
type Sweeper struct {
	cfg     Config
	targets []Target
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start starts sweeping targets.
func Start(cfg Config, targets ...Target) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sweeper{cfg: cfg, targets: targets}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.run)
	return s
}

func (s *Sweeper) run() {
	ticks := s.cfg.Ticks
	if ticks == nil {
		t := time.NewTicker(s.cfg.Interval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ticks:
			s.sweepAll()
		}
	}
}

// sweepAll sweeps the targets in parallel, each at its own pace.
func (s *Sweeper) sweepAll() {
	var wg sync.WaitGroup
	for i, t := range s.targets {
		wg.Go(func() {
			start := time.Now()
			st, err := t.Sweep(s.ctx)
			st.Took = time.Since(start)
			if err != nil && s.ctx.Err() == nil {
				s.cfg.Logger.Warn("sweeper: sweep failed", "target", i, "err", err)
			}
			if s.cfg.OnSweep != nil {
				s.cfg.OnSweep(i, st, err)
			}
		})
	}
	wg.Wait()
}

// Close stops the sweeper and waits for a sweep in progress to give up. It
// is idempotent.
func (s *Sweeper) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}
