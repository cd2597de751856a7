// Package memory is the embedded limiter: raterlimiter in the application's
// own process. It spreads ids over shards, each an actor (package actor)
// that alone owns its B-tree of buckets (package buckets), and sweeps them
// periodically (package sweeper). No other package imports those three:
// what an application or the sidecar needs of the store (its gauges, a
// sweep on demand, snapshots) is a method of Limiter.
//
// # Memory
//
// Two bounds hold the records, whichever a new record meets first:
// Config.MaxBuckets records (default 4,000,000) and Config.MaxBucketBytes
// of them (default 256 MiB), where a record counts 48 bytes and its id's
// (rounded up to 8), and a sliding window log its entries' bytes. Ids are
// the caller's choice, so the byte budget is what holds in the worst case:
//
//   - 16-byte ids: 4,000,000 records, 64 bytes each, 244 MiB;
//   - 1,000-byte ids (with algo slices, one id's 599 slice counts of up to
//     600 slices each, or a flood of fresh ids): about 256,000 records of
//     1,048 bytes, 256 MiB.
//
// That is the live data. Beside it: Go's allocator rounds a record up to
// its size class (at most an eighth more below 32 KiB), each shard keeps a
// cache of 512 KiB and up to 16,384 denied ids (about 18 MB a shard with
// 1,000-byte ids), and between two collections the heap grows to about
// twice the live data (GOGC=100). With the defaults a full store's heap
// thus reaches about 2 × (288 MiB + 19 MB a shard) at worst: about 650 MB
// with one shard, 760 MB with four. Set GOMEMLIMIT, or smaller bounds,
// where less must do.
package memory

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/sweeper"
)

// Config configures a Limiter. The zero value is ready to use: every zero
// field means the default its comment names.
type Config struct {
	// Shards is the number of actors ids are spread over. Default: half of
	// GOMAXPROCS, at least 1: one processor runs each actor and the others
	// its callers; more shards than that cost more CPU a check than they
	// save in waiting (lab/notes/perf-notes.md, "The actor's hand-off").
	Shards int
	// Clock gives the time decisions are made at. Default: a steady clock
	// per shard that advances with the system's monotonic clock, anchored
	// to its wall clock: a wall-clock jump corrected within a minute never
	// rewinds or freezes windows, a lasting one is adopted (see
	// docs/reliability.md).
	Clock func() time.Time
	// SweepInterval is the time between sweeps of stale buckets. Default
	// 10s; negative disables the sweeper (records then leave only when
	// the bounds below evict them or Reset deletes them).
	SweepInterval time.Duration
	// MaxIDBytes is the longest id accepted. Default
	// 1024.
	MaxIDBytes int
	// MaxBuckets bounds the live bucket records, spread evenly over the
	// shards; past it a new record evicts a sampled old one, sparing ids
	// being denied (see docs/embedded.md).
	// Default 4,000,000; negative means no bound.
	MaxBuckets int
	// MaxBucketBytes bounds the bytes of the live records, spread evenly
	// over the shards: each record counts 48 bytes and its id's (ids are
	// the caller's choice: a 1,000-byte id makes a record 16 times the size
	// of a 16-byte one's), and a sliding window log its entries. Past it a
	// new record evicts as past MaxBuckets; whichever bound a record meets
	// first applies (see the package doc, "Memory"). Default
	// 256 MiB; negative means no bound.
	MaxBucketBytes int64
	// MaxScalesPerID bounds the distinct scales one id may have records
	// of; a check that would add another is refused with a
	// *raterlimiter.FieldError of "scale" (matching
	// raterlimiter.ErrInvalid).
	// Default 64; negative means no bound.
	MaxScalesPerID int
	// OnSweep, if set, is called after each periodic sweep of a shard with
	// what it did: the hook for sweep metrics. It runs on the sweeper's
	// goroutine and must not block.
	OnSweep func(SweepStats)
	// Logger receives the actors' and the sweeper's reports. Default
	// slog.Default().
	Logger *slog.Logger
}

// Stats is a snapshot of a Limiter's gauges and counters.
//
// Live and Evicted are eventually consistent: an actor may publish them
// after it has answered the checks it just served, so a caller that reads
// them as soon as its check returns may see the values from before it; they
// catch up without any further call. After Sweep and Reset they are current
// when the call returns.
type Stats struct {
	// Live is the number of live bucket records.
	Live int
	// Evicted counts the records evicted to stay within MaxBuckets or
	// MaxBucketBytes.
	Evicted uint64
	// Restarts counts the shards' restarts after a panic (a shard keeps
	// its records through one).
	Restarts uint64
	// Pending is the number of checks waiting for their shard, read at the
	// moment of the call.
	Pending int
}

// SweepStats is what a sweep did.
type SweepStats struct {
	// Examined and Deleted are the records the sweep looked at and those it
	// deleted (no decision could read them any more).
	Examined, Deleted int
	// Took is how long the sweep took.
	Took time.Duration
}

// The defaults of Config's bounds. How the two bounds on the records share
// the work is the package doc's "Memory".
const (
	defaultMaxBuckets     = 4_000_000
	defaultMaxBucketBytes = 256 << 20
	// defaultMaxScalesPerID is far more than any real use (a per-second,
	// -minute, -hour and -day limit per algorithm), and a bound on what
	// one id can be made to hold.
	defaultMaxScalesPerID = 64
)

// Limiter is the embedded rate limiter. It is safe for concurrent use. A
// Limiter must be made with New: the zero value's methods fail with an
// error that says so.
type Limiter struct {
	actors  []*actor.Actor
	sweeper *sweeper.Sweeper
	seed    maphash.Seed
	maxID   int
	logger  *slog.Logger // Config.Logger, or slog.Default()
	once    sync.Once
}

var _ rl.Limiter = (*Limiter)(nil)

// New starts a limiter. Close stops it.
func New(cfg Config) *Limiter {
	if cfg.Shards <= 0 {
		cfg.Shards = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = check.DefaultMaxIDBytes
	}
	cfg.MaxIDBytes = min(cfg.MaxIDBytes, buckets.MaxIDBytes)
	// A negative bound (none) reaches the store, which reads every bound
	// of 0 or less as none; so does its share of the shards, rounded up.
	if cfg.MaxScalesPerID == 0 {
		cfg.MaxScalesPerID = defaultMaxScalesPerID
	}
	if cfg.MaxBuckets == 0 {
		cfg.MaxBuckets = defaultMaxBuckets
	}
	if cfg.MaxBucketBytes == 0 {
		cfg.MaxBucketBytes = defaultMaxBucketBytes
	}
	perShard := (cfg.MaxBuckets + cfg.Shards - 1) / cfg.Shards
	perShardBytes := int(min((cfg.MaxBucketBytes+int64(cfg.Shards)-1)/int64(cfg.Shards), math.MaxInt))
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var clock func() int64 // nil: each actor's steady clock
	if cfg.Clock != nil {
		clock = func() int64 { return cfg.Clock().UnixMilli() }
	}
	l := &Limiter{seed: maphash.MakeSeed(), maxID: cfg.MaxIDBytes, logger: cfg.Logger} // MaxIDBytes > 0 here
	for i := range cfg.Shards {
		l.actors = append(l.actors, actor.New(actor.Config{
			Clock: clock,
			Store: buckets.Options{MaxIDBytes: cfg.MaxIDBytes, MaxRecords: perShard, Seed: uint64(i) + 1,
				MaxScalesPerID: cfg.MaxScalesPerID, MaxBytes: perShardBytes},
			Logger: cfg.Logger,
		}))
	}
	if cfg.SweepInterval >= 0 {
		targets := make([]sweeper.Target, len(l.actors))
		for i, a := range l.actors {
			targets[i] = a
		}
		var onSweep func(int, actor.SweepStats, error)
		if cfg.OnSweep != nil {
			onSweep = func(_ int, s actor.SweepStats, err error) {
				if err == nil {
					cfg.OnSweep(SweepStats(s))
				}
			}
		}
		l.sweeper = sweeper.Start(sweeper.Config{
			Interval: cfg.SweepInterval,
			OnSweep:  onSweep,
			Logger:   cfg.Logger,
		}, targets...)
	}
	return l
}

func (l *Limiter) shard(id string) *actor.Actor {
	if len(l.actors) == 1 {
		return l.actors[0]
	}
	return l.actors[maphash.String(l.seed, id)%uint64(len(l.actors))]
}

// CheckRate decides r. Invalid requests fail with an error matching
// raterlimiter.ErrInvalid and cost the actors nothing. A check that fails
// because ctx ended (or its deadline passed in the mailbox) was not counted:
// the actor skips messages whose caller is gone (so a caller that times out may retry without
// double counting).
func (l *Limiter) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	if l.actors == nil {
		return rl.Decision{}, errNotNew
	}
	if err := check.Validate(r, l.maxID); err != nil {
		return rl.Decision{}, err
	}
	d, err := l.shard(r.ID).CheckRate(ctx, millis.Of(check.Counted(r)))
	return d.Public(), err
}

// Wait waits for capacity: it returns once r is allowed (after its delay,
// with algo Leaky), checking again after each denial's RetryAfter, or with
// an error once ctx ends. It is raterlimiter.Wait(ctx, l, r); see there.
func (l *Limiter) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Wait(ctx, l, r)
}

// CheckRates decides a batch, one message per shard, the shards in parallel.
// If any request is invalid nothing is counted. A batch that fails because
// ctx ended was not counted on a single shard; over several shards, a shard
// that had already taken its part counted it.
func (l *Limiter) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	if l.actors == nil {
		return nil, errNotNew
	}
	if err := check.Batch(rs, l.maxID); err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return []rl.Decision{}, nil
	}
	if len(l.actors) == 1 {
		// The actor gets a copy: the caller may reuse rs once we return,
		// even if the message is still waiting in the mailbox.
		ds, err := l.actors[0].Decide(ctx, counted(rs))
		return public(ds), err
	}
	ds, err := l.checkShards(ctx, rs)
	return public(ds), err
}

// counted is a copy of rs as the limiter decides it (Request.Counted).
func counted(rs []rl.Request) []millis.Request {
	out := make([]millis.Request, len(rs))
	for i, r := range rs {
		out[i] = millis.Of(check.Counted(r))
	}
	return out
}

// public returns ds as a Go caller holds them.
func public(ds []millis.Decision) []rl.Decision {
	if ds == nil {
		return nil
	}
	out := make([]rl.Decision, len(ds))
	for i, d := range ds {
		out[i] = d.Public()
	}
	return out
}

// checkShards decides a valid batch over several shards.
func (l *Limiter) checkShards(ctx context.Context, rs []rl.Request) ([]millis.Decision, error) {
	// Group the requests by shard, keeping their order within a shard; each
	// shard's group is a slice of its own, handed over to its actor.
	n := len(l.actors)
	idx := make([][]int, n)
	for i := range rs {
		s := int(maphash.String(l.seed, rs[i].ID) % uint64(n))
		idx[s] = append(idx[s], i)
	}
	out := make([]millis.Decision, len(rs))
	var wg sync.WaitGroup
	errs := make([]error, n)
	for s := range n {
		if len(idx[s]) == 0 {
			continue
		}
		wg.Go(func() {
			sub := make([]millis.Request, len(idx[s]))
			for j, i := range idx[s] {
				sub[j] = millis.Of(check.Counted(rs[i]))
			}
			var dec []millis.Decision
			if dec, errs[s] = l.actors[s].Decide(ctx, sub); errs[s] == nil {
				for j, i := range idx[s] {
					out[i] = dec[j]
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Buckets lists the live records of id.
func (l *Limiter) Buckets(ctx context.Context, id string) ([]rl.Bucket, error) {
	if l.actors == nil {
		return nil, errNotNew
	}
	if err := check.Validate(rl.Request{ID: id, Scale: time.Millisecond}, l.maxID); err != nil {
		return nil, err
	}
	var out []millis.Bucket
	err := l.shard(id).Do(ctx, func(s *buckets.Store, _ int64) { out = s.Buckets(id) })
	return millis.Buckets(out), err
}

// Reset deletes the records of id (of every scale when scale is 0) and
// returns how many it deleted.
func (l *Limiter) Reset(ctx context.Context, id string, scale time.Duration) (int, error) {
	if l.actors == nil {
		return 0, errNotNew
	}
	if err := check.Reset(id, scale, l.maxID); err != nil {
		return 0, err
	}
	var n int
	err := l.shard(id).Do(ctx, func(s *buckets.Store, _ int64) { n = s.Delete(id, scale.Milliseconds()) })
	return n, err
}

// Sweep deletes now, on every shard, the records no decision can read any
// more, and returns the totals. The periodic sweeper does the same every
// Config.SweepInterval; with a negative SweepInterval, Sweep is how an
// application sweeps on a schedule of its own.
func (l *Limiter) Sweep(ctx context.Context) (SweepStats, error) {
	start := time.Now()
	if l.actors == nil {
		return SweepStats{}, errNotNew
	}
	var total SweepStats
	for _, a := range l.actors {
		st, err := a.Sweep(ctx)
		if err != nil {
			return total, err
		}
		total.Examined += st.Examined
		total.Deleted += st.Deleted
	}
	total.Took = time.Since(start)
	return total, nil
}

// Stats returns the limiter's gauges and counters.
func (l *Limiter) Stats() Stats {
	var st Stats
	for _, a := range l.actors {
		st.Live += a.Len()
		st.Evicted += a.Evicted()
		st.Restarts += a.Restarts()
		st.Pending += a.Pending()
	}
	return st
}

// errNotNew is the error of a Limiter's methods when it was not made by New.
var errNotNew = errors.New("memory: a Limiter must be made with memory.New")

// Close stops the sweeper and the actors; later calls fail with
// raterlimiter.ErrClosed. It is idempotent.
func (l *Limiter) Close() error {
	l.once.Do(func() {
		if l.sweeper != nil {
			l.sweeper.Close()
		}
		for _, a := range l.actors {
			a.Close()
		}
	})
	return nil
}
