package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raterlimiter/raterlimiter/internal/cli"
	"github.com/raterlimiter/raterlimiter/internal/snapshot"
	"github.com/raterlimiter/raterlimiter/memory"
)

// snapshotFlags are the flags of the memory backend's snapshots.
type snapshotFlags struct {
	path          string
	interval      time.Duration
	ignoreCorrupt bool
}

// snapshotFlagNames lists them in the order -h shows them.
func snapshotFlagNames() []string {
	return []string{"snapshot", "snapshot-interval", "snapshot-ignore-corrupt"}
}

func (f *snapshotFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "snapshot", "", "file the memory backend's counters are saved to on shutdown and loaded from on start; empty: none")
	fs.DurationVar(&f.interval, "snapshot-interval", 0, "also save the snapshot this often, so a crash loses at most one interval; 0: only on shutdown")
	fs.BoolVar(&f.ignoreCorrupt, "snapshot-ignore-corrupt", false, "start empty, with a warning, when the snapshot is corrupt or foreign, instead of refusing to start")
}

func (f *snapshotFlags) check(backend string) error {
	switch {
	case f.path != "" && backend != "memory":
		return cli.Usagef("-snapshot needs -backend memory (Redis keeps its own state)")
	case f.interval < 0:
		return cli.Usagef("-snapshot-interval must not be negative")
	case f.interval > 0 && f.path == "":
		return cli.Usagef("-snapshot-interval needs -snapshot")
	}
	return nil
}

// finalSnapshotTimeout bounds the snapshot written on shutdown.
const finalSnapshotTimeout = time.Minute

// snapshotState is what the sidecar knows of its periodic snapshots, for
// /metrics and /healthz.
type snapshotState struct {
	interval    time.Duration
	lastSuccess atomic.Int64 // Unix ms of the last write that succeeded, 0 before any
	started     time.Time
	failures    prometheus.Counter
	successTime prometheus.Gauge
}

func newSnapshotState(interval time.Duration) *snapshotState {
	return &snapshotState{
		interval: interval,
		started:  time.Now(),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_snapshot_failures_total",
			Help: "Snapshot writes that failed (the previous snapshot is kept).",
		}),
		successTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_snapshot_last_success_timestamp_seconds",
			Help: "When the last snapshot write succeeded, Unix seconds; 0 before the first.",
		}),
	}
}

func (st *snapshotState) collectors() []prometheus.Collector {
	return []prometheus.Collector{st.failures, st.successTime}
}

func (st *snapshotState) observe(_ snapshot.WriteStats, err error) {
	if err != nil {
		st.failures.Inc()
		return
	}
	now := time.Now()
	st.lastSuccess.Store(now.UnixMilli())
	st.successTime.Set(float64(now.UnixMilli()) / 1000)
}

// stale says, for /healthz, when no periodic snapshot has succeeded for
// three intervals (a crash would then lose more than the interval promises);
// "" otherwise, and always without periodic snapshots.
func (st *snapshotState) stale() string {
	if st == nil || st.interval <= 0 {
		return ""
	}
	last := time.UnixMilli(st.lastSuccess.Load())
	if st.lastSuccess.Load() == 0 {
		last = st.started
	}
	if age := time.Since(last); age > 3*st.interval {
		return "snapshot stale: no successful write for " + age.Round(time.Second).String()
	}
	return ""
}

// removeStaleTemps deletes the temporary files a crash in the middle of a
// write (or a probe) left beside path, or beside the file path links to
// (where writes go); no other writer is running yet.
func removeStaleTemps(path string, logger *slog.Logger) {
	paths := []string{path}
	if dest, err := snapshot.Resolve(path); err == nil && dest != path {
		paths = append(paths, dest)
	}
	for _, p := range paths {
		dir, name := filepath.Split(p)
		if dir == "" {
			dir = "."
		}
		for _, pattern := range []string{"." + name + ".tmp-*", "." + name + ".probe-*"} {
			matches, _ := filepath.Glob(filepath.Join(dir, pattern))
			for _, m := range matches {
				if err := os.Remove(m); err == nil {
					logger.Info("removed a snapshot's temporary file left by an earlier run", "file", m)
				}
			}
		}
	}
}

// openSnapshots loads the snapshot into m and starts saving it. It returns
// the function that writes the final snapshot; call it before m.Close.
func openSnapshots(ctx context.Context, f snapshotFlags, m *memory.Limiter, st *snapshotState, logger *slog.Logger) (func() error, error) {
	if f.path == "" {
		return func() error { return nil }, nil
	}
	removeStaleTemps(f.path, logger)
	if err := snapshot.Probe(f.path); err != nil {
		return nil, err
	}
	if _, err := snapshot.Load(ctx, f.path, m, snapshot.LoadOptions{IgnoreCorrupt: f.ignoreCorrupt, Logger: logger}); err != nil {
		if errors.Is(err, snapshot.ErrCorrupt) {
			return nil, fmt.Errorf("%w; refusing to start from it (-snapshot-ignore-corrupt starts empty instead)", err)
		}
		return nil, err
	}
	s := snapshot.StartSaver(m, snapshot.SaverConfig{Path: f.path, Interval: f.interval, Final: true, Logger: logger, OnWrite: st.observe})
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), finalSnapshotTimeout)
		defer cancel()
		t0 := time.Now()
		if err := s.Close(ctx); err != nil {
			return fmt.Errorf("the final snapshot was not written, the counts since the last one are lost: %w", err)
		}
		logger.Info("snapshot written", "snapshot", f.path, "took", time.Since(t0).String())
		return nil
	}, nil
}
