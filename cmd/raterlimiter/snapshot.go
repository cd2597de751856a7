package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/snapshot"
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
		return usagef("-snapshot needs -backend memory (Redis keeps its own state)")
	case f.interval < 0:
		return usagef("-snapshot-interval must not be negative")
	case f.interval > 0 && f.path == "":
		return usagef("-snapshot-interval needs -snapshot")
	}
	return nil
}

// finalSnapshotTimeout bounds the snapshot written on shutdown.
const finalSnapshotTimeout = time.Minute

// openSnapshots loads the snapshot into m and starts saving it. It returns
// the function that writes the final snapshot; call it before m.Close.
func openSnapshots(ctx context.Context, f snapshotFlags, m *memory.Limiter, logger *slog.Logger) (func() error, error) {
	if f.path == "" {
		return func() error { return nil }, nil
	}
	if err := snapshot.Probe(f.path); err != nil {
		return nil, err
	}
	if _, err := snapshot.Load(ctx, f.path, m, snapshot.LoadOptions{IgnoreCorrupt: f.ignoreCorrupt, Logger: logger}); err != nil {
		if errors.Is(err, snapshot.ErrCorrupt) {
			return nil, fmt.Errorf("%w; refusing to start from it (-snapshot-ignore-corrupt starts empty instead)", err)
		}
		return nil, err
	}
	s := snapshot.StartSaver(m, snapshot.SaverConfig{Path: f.path, Interval: f.interval, Final: true, Logger: logger})
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), finalSnapshotTimeout)
		defer cancel()
		t0 := time.Now()
		if err := s.Close(ctx); err != nil {
			return err // the saver has logged it
		}
		logger.Info("snapshot written", "snapshot", f.path, "took", time.Since(t0).String())
		return nil
	}, nil
}
