package snapshot

import (
	"context"
	"errors"
	"fmt"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"github.com/raterlimiter/raterlimiter/memory"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
)

// Target is what Load fills: a memory limiter's Restore (memstore), which puts a record
// into the shard that owns its id, and RestoreLog, which does the same for a
// Log record and its marshalled entries.
type Target interface {
	Restore(ctx context.Context, id string, scale int64, a rl.Algo, r algo.Record) error
	RestoreLog(ctx context.Context, id string, scale, created int64, data []byte) error
}

// LoadOptions configures Load. The zero value is ready to use.
type LoadOptions struct {
	// Clock returns the time: records expired at that time are not
	// loaded. Default: time.Now.
	Clock func() time.Time
	// IgnoreCorrupt makes a file that matches ErrCorrupt a warning in the log
	// and an empty start instead of an error. The file is renamed to
	// path+".corrupt" (replacing an older one), so the next write does not
	// destroy it.
	IgnoreCorrupt bool
	// Workers is how many goroutines restore records at once. Default 4.
	Workers int
	// Logger receives what Load did. Default slog.Default().
	Logger *slog.Logger
}

// LoadStats reports what Load did.
type LoadStats struct {
	// Missing is true when there was no file: a fresh start.
	Missing bool
	// Ignored is true when the file was corrupt and IgnoreCorrupt let the
	// start go on empty. Err holds why; MovedTo is where the file was moved
	// (empty if it could not be).
	Ignored bool
	Err     error
	MovedTo string
	// Written is when the snapshot was begun, Unix ms.
	Written int64
	// Loaded is how many records were restored; Expired how many were left
	// out because no decision could read them any more; Refused how many the
	// target refused as invalid (an id longer than it accepts).
	Loaded, Expired, Refused int
}

// restoreBatch is how many records one hand-off to a worker carries.
const restoreBatch = 256

// Load restores the snapshot at path into dst, leaving out the records that
// expired meanwhile. A missing file is a fresh start: LoadStats.Missing and
// no error. A corrupt, truncated or foreign file is refused before anything
// is restored, with an error that matches ErrCorrupt and names path, unless
// opts.IgnoreCorrupt (then dst stays empty, the log says so, and the error is
// in LoadStats.Err).
func Load(ctx context.Context, path string, lim *memory.Limiter, opts LoadOptions) (LoadStats, error) {
	var dst Target = memstore.MustOf(lim)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var st LoadStats
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Info("no snapshot yet: starting empty", "snapshot", path)
		return LoadStats{Missing: true}, nil
	}
	if err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	// Check the whole file before restoring anything, so a bad file leaves
	// dst empty.
	info, err := Read(f, fi.Size(), nil)
	if err != nil {
		var ce *corruptError
		if !errors.As(err, &ce) {
			return st, err // an I/O error, which names the file
		}
		err = &corruptError{path: path, msg: ce.msg}
		if opts.IgnoreCorrupt {
			// Keep the bad file for a post-mortem: the next write would
			// replace it.
			// Through a link, its target: the link then names the file
			// the next write creates.
			bad := path
			if dest, rerr := Resolve(path); rerr == nil {
				bad = dest
			}
			aside := bad + ".corrupt"
			if rerr := os.Rename(bad, aside); rerr != nil {
				log.Warn("could not move the refused snapshot aside", "snapshot", path, "err", rerr)
				aside = ""
			}
			log.Warn("snapshot refused, ignoring it as configured: starting empty", "snapshot", path, "err", err, "moved_to", aside)
			return LoadStats{Ignored: true, Err: err, MovedTo: aside}, nil
		}
		return st, err
	}
	st.Written = info.Written

	now := opts.Clock().UnixMilli()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan []Record, opts.Workers)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range opts.Workers {
		wg.Go(func() {
			var loaded, refused int
			var err error
			for batch := range work {
				for _, r := range batch {
					if err != nil {
						break
					}
					var e error
					if r.Algo == rl.Log {
						e = dst.RestoreLog(ctx, r.ID, r.Scale, r.State.Created, r.Log)
					} else {
						e = dst.Restore(ctx, r.ID, r.Scale, r.Algo, r.State)
					}
					switch {
					case e == nil:
						loaded++
					case errors.Is(e, rl.ErrInvalid):
						refused++
					default:
						err = e
						cancel()
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			st.Loaded += loaded
			st.Refused += refused
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	batch := make([]Record, 0, restoreBatch)
	_, rerr := decode(sectionOf(f, fi.Size()), func(r Record) error {
		if algo.Expired(r.Algo, r.Scale, r.State, now) {
			st.Expired++
			return nil
		}
		batch = append(batch, r)
		if len(batch) == restoreBatch {
			select {
			case work <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			batch = make([]Record, 0, restoreBatch)
		}
		return nil
	})
	if rerr == nil && len(batch) > 0 {
		select {
		case work <- batch:
		case <-ctx.Done():
			rerr = ctx.Err()
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return st, fmt.Errorf("snapshot: loading %s: %w", path, firstErr)
	}
	if rerr != nil {
		return st, fmt.Errorf("snapshot: loading %s: %w", path, rerr)
	}
	log.Info("snapshot loaded", "snapshot", path, "records", st.Loaded, "expired", st.Expired, "refused", st.Refused,
		"written_unix_ms", st.Written)
	if st.Refused > 0 {
		log.Warn("records refused by the limiter (ids longer than -max-id-bytes?) were not loaded", "snapshot", path, "refused", st.Refused)
	}
	return st, nil
}
