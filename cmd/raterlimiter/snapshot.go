package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
	"github.com/raterlimiter/raterlimiter/memory"
)

// The memory backend's snapshot file: memory.Limiter's Save and Load give
// the bytes; this file puts them on disk (writeSnapshot), so that a reader
// sees the old snapshot or the new one, never a mix, and through a
// -snapshot path that is a symbolic link (resolveSnapshot).

// snapshotFlags are the flags of the memory backend's snapshots.
type snapshotFlags struct {
	path          string
	interval      time.Duration
	ignoreCorrupt bool
}

// finalSnapshotTimeout bounds the snapshot written on shutdown.
const finalSnapshotTimeout = time.Minute

// snapshotState is what the sidecar knows of its periodic snapshots, for
// /metrics and /healthz.
type snapshotState struct {
	interval    time.Duration
	lastSuccess atomic.Int64 // Unix ms of the last write that succeeded, or of the start before any
	failures    prometheus.Counter
	successTime prometheus.Gauge
}

func newSnapshotState(interval time.Duration) *snapshotState {
	st := &snapshotState{
		interval: interval,
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_snapshot_failures_total",
			Help: "Snapshot writes that failed (the previous snapshot is kept).",
		}),
		successTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_snapshot_last_success_timestamp_seconds",
			Help: "When the last snapshot write succeeded, Unix seconds; 0 before the first.",
		}),
	}
	st.lastSuccess.Store(time.Now().UnixMilli())
	return st
}

func (st *snapshotState) collectors() []prometheus.Collector {
	return []prometheus.Collector{st.failures, st.successTime}
}

func (st *snapshotState) observe(err error) {
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
	if st.interval <= 0 {
		return ""
	}
	if age := time.Since(time.UnixMilli(st.lastSuccess.Load())); age > 3*st.interval {
		return "snapshot stale: no successful write for " + age.Round(time.Second).String()
	}
	return ""
}

// removeStaleTemps deletes the temporary files a crash in the middle of a
// write (or a probe) left beside path, or beside the file path links to
// (where writes go); no other writer is running yet.
func removeStaleTemps(path string, logger *slog.Logger) {
	paths := []string{path}
	if dest, err := resolveSnapshot(path); err == nil && dest != path {
		paths = append(paths, dest)
	}
	for _, p := range paths {
		dir, name := filepath.Dir(p), filepath.Base(p)
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
	if err := probeSnapshot(f.path); err != nil {
		return nil, err
	}
	if err := loadSnapshot(ctx, f.path, m, f.ignoreCorrupt, logger); err != nil {
		if errors.Is(err, memory.ErrCorruptSnapshot) {
			return nil, fmt.Errorf("%w; refusing to start from it (-snapshot-ignore-corrupt starts empty instead)", err)
		}
		return nil, err
	}
	s := startSaver(f.interval, func(ctx context.Context) error {
		err := writeSnapshot(ctx, f.path, m)
		if err != nil && ctx.Err() != nil {
			return err // cut short by the stop (the final write follows) or the final write's timeout
		}
		if err != nil {
			logger.Error("snapshot write failed; the previous snapshot is kept", "snapshot", f.path, "err", err)
		}
		st.observe(err)
		return err
	})
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), finalSnapshotTimeout)
		defer cancel()
		t0 := time.Now()
		if err := s.close(ctx); err != nil {
			return fmt.Errorf("the final snapshot was not written, the counts since the last one are lost: %w", err)
		}
		logger.Info("snapshot written", "snapshot", f.path, "took", time.Since(t0).String())
		return nil
	}, nil
}

// loadSnapshot restores the snapshot at path into m and logs what it did.
// A missing file is a fresh start. A file that is not a valid snapshot is
// refused before anything is restored, with an error that matches
// memory.ErrCorruptSnapshot and names path; with ignoreCorrupt it is moved
// aside to path+".corrupt" (replacing an older one, so the next write does
// not destroy it), a warning is logged, and m stays empty.
func loadSnapshot(ctx context.Context, path string, m *memory.Limiter, ignoreCorrupt bool, logger *slog.Logger) error {
	t0 := time.Now()
	// A regular file only (a FIFO would block the start, a device never
	// end it), read no further than the size of the file opened.
	f, fi, err := readfile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		logger.Info("no snapshot yet: starting empty", "snapshot", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapshot: %s %s", path, readfile.Reason(err))
	}
	defer f.Close()
	n, err := m.Load(ctx, f, fi.Size())
	if err != nil {
		err = fmt.Errorf("snapshot: %s: %w", path, err)
	}
	if err != nil && ignoreCorrupt && errors.Is(err, memory.ErrCorruptSnapshot) {
		// Through a link, its target moves: the link then names the file
		// the next write creates.
		bad := path
		if dest, rerr := resolveSnapshot(path); rerr == nil {
			bad = dest
		}
		aside := bad + ".corrupt"
		if rerr := os.Rename(bad, aside); rerr != nil {
			logger.Warn("could not move the refused snapshot aside", "snapshot", path, "err", rerr)
			aside = ""
		}
		logger.Warn("snapshot refused, ignoring it as configured: starting empty", "snapshot", path, "err", err, "moved_to", aside)
		return nil
	}
	if err != nil {
		return err
	}
	logger.Info("snapshot loaded", "snapshot", path, "records", n, "bytes", fi.Size(),
		"written", fi.ModTime().UTC().Format(time.RFC3339), "took", time.Since(t0).String())
	return nil
}

// writeSnapshot saves m to path atomically: it writes a temporary file
// beside path's target (resolveSnapshot), fsyncs it, renames it over the
// target and fsyncs the directory. On error the target is left as it was
// and the temporary file is removed.
func writeSnapshot(ctx context.Context, path string, m *memory.Limiter) error {
	dest, err := resolveSnapshot(path)
	if err != nil {
		return err
	}
	dir, name := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*") // mode 0600: ids may be user data
	if err != nil {
		return fmt.Errorf("snapshot: %s: %w", path, err)
	}
	tmp := f.Name()
	err = m.Save(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("snapshot: writing %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("snapshot: %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxLinks is how many symbolic links resolveSnapshot follows, as Linux
// does.
const maxLinks = 40

// resolveSnapshot returns the file a snapshot at path is read from and
// written to: path, or, when path is a symbolic link, the file it points
// to (following a chain of links; a link to a file that does not exist yet
// names the file to create). Only path's last element is resolved here:
// the system follows links among its directories. A relative link is read
// from the link's directory, as the system reads it. The link is resolved
// at each write, so a link repointed meanwhile is followed.
func resolveSnapshot(path string) (string, error) {
	cur := path
	for range maxLinks {
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return cur, nil // not a link; what is wrong with it, the write (or the probe) says
		}
		to, err := os.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("snapshot: %s: %w", path, readfile.Cause(err))
		}
		if !filepath.IsAbs(to) {
			// Not filepath.Join: cleaning "dir/../x" would be wrong where
			// dir is itself a link.
			to = filepath.Dir(cur) + string(filepath.Separator) + to
		}
		cur = to
	}
	return "", fmt.Errorf("snapshot: %s: more than %d symbolic links in a row", path, maxLinks)
}

// probeSnapshot checks that writeSnapshot can create its temporary file
// beside path, so the sidecar refuses to start rather than find out at
// shutdown that its snapshot cannot be saved. It leaves nothing behind.
func probeSnapshot(path string) error {
	dest, err := resolveSnapshot(path)
	if err != nil {
		return err
	}
	if dest != path {
		// Name the target too: its directory is the one that must be
		// writable.
		if err := probeSnapshot(dest); err != nil {
			return fmt.Errorf("%w (%s is a symbolic link to it)", err, path)
		}
		return nil
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	// The errors name path and its directory, never the probe's own file:
	// that is a name the user never gave.
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("snapshot: %s cannot be written: its directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("snapshot: %s cannot be written: directory %s: %w", path, dir, readfile.Cause(err))
	case !st.IsDir():
		return fmt.Errorf("snapshot: %s cannot be written: %s is not a directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("snapshot: %s cannot be written: it is a directory", path)
	}
	f, err := os.CreateTemp(dir, "."+name+".probe-*")
	if err != nil {
		return fmt.Errorf("snapshot: %s cannot be written: no file can be created in %s: %w", path, dir, readfile.Cause(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// saver runs a snapshot write every interval (never when the interval is
// not positive) and once more when it is closed. It is safe for concurrent
// use.
type saver struct {
	write  func(context.Context) error
	cancel context.CancelFunc // stops the periodic writes, and cuts one in progress short
	done   chan struct{}      // closed when the periodic writes have stopped
	once   sync.Once
	err    error
}

func startSaver(interval time.Duration, write func(context.Context) error) *saver {
	ctx, cancel := context.WithCancel(context.Background())
	s := &saver{write: write, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if interval <= 0 {
			return
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.write(ctx)
			}
		}
	}()
	return s
}

// close stops the periodic writes, waiting for one in progress to give up,
// then runs the final write within ctx and returns its error. Later calls
// return the first one's result.
func (s *saver) close(ctx context.Context) error {
	s.once.Do(func() {
		s.cancel()
		<-s.done
		s.err = s.write(ctx)
	})
	return s.err
}
