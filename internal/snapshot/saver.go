package snapshot

import (
	"context"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"github.com/raterlimiter/raterlimiter/memory"
	"log/slog"
	"sync"
	"time"
)

// SaverConfig configures a Saver. Path is required; every other zero field
// means the default its comment names.
type SaverConfig struct {
	// Path is the snapshot file.
	Path string
	// Interval is the time between periodic writes, so a crash loses at most
	// about one interval of counts. 0 or negative: no periodic writes.
	Interval time.Duration
	// Final makes Close write one last snapshot after the periodic writes
	// have stopped.
	Final bool
	// Write configures each write.
	Write WriteOptions
	// OnWrite, if set, is called after each write, periodic or final.
	OnWrite func(WriteStats, error)
	// Logger receives a line per failed write. Default slog.Default().
	Logger *slog.Logger
}

// Saver writes snapshots of a source periodically. It is safe for concurrent
// use. Make one with StartSaver; stop it with Close.
type Saver struct {
	cfg  SaverConfig
	src  Source
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error
}

// StartSaver starts writing snapshots of src every cfg.Interval.
func StartSaver(lim *memory.Limiter, cfg SaverConfig) *Saver {
	var src Source = memstore.MustOf(lim)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Saver{cfg: cfg, src: src, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *Saver) run() {
	defer close(s.done)
	if s.cfg.Interval <= 0 {
		<-s.stop
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel() // a write in progress gives up: Close writes the final one
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.write(ctx)
		}
	}
}

func (s *Saver) write(ctx context.Context) error {
	st, err := writeFile(ctx, s.cfg.Path, s.src, s.cfg.Write)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Error("snapshot write failed; the previous snapshot is kept", "snapshot", s.cfg.Path, "err", err)
	}
	if s.cfg.OnWrite != nil {
		s.cfg.OnWrite(st, err)
	}
	return err
}

// Close stops the periodic writes, waiting for one in progress to give up,
// then writes the final snapshot when SaverConfig.Final asks for it, within
// ctx. It returns that write's error. Close is idempotent; later calls return
// the first one's result. The source must still be open.
func (s *Saver) Close(ctx context.Context) error {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		if s.cfg.Final {
			s.err = s.write(ctx)
		}
	})
	return s.err
}
