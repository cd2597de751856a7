// Package memory is the embedded limiter: raterlimiter in the application's
// own process. It spreads ids over shards, each an actor (package actor)
// that alone owns its B-tree of buckets (package buckets), and sweeps them
// periodically (package sweeper). No other package imports those three:
// the sidecar's snapshots and replay tools reach the store through
// internal/memstore, which this package registers itself with.
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
	"fmt"
	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/defaults"
	"github.com/raterlimiter/raterlimiter/internal/ms"
	"hash/maphash"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"github.com/raterlimiter/raterlimiter/sweeper"
)

// Config configures a Limiter. The zero value is ready to use: every zero
// field means the default its comment names.
type Config struct {
	// Shards is the number of actors ids are spread over. Default: half of
	// GOMAXPROCS, at least 1: one processor runs each actor and the others
	// its callers; more shards than that cost more CPU a check than they
	// save in waiting (docs/perf-notes.md, "The actor's hand-off").
	Shards int
	// Clock gives the time decisions are made at. Default: a steady clock
	// per shard that advances with the system's monotonic clock, anchored
	// to its wall clock: a wall-clock jump corrected within a minute never
	// rewinds or freezes windows, a lasting one is adopted (see
	// docs/reliability.md).
	Clock func() time.Time
	// SweepInterval is the time between sweeps of stale buckets. Default
	// 10 s; negative disables the sweeper (records then leave only when
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
	// of; a check that would add another is refused with
	// ErrTooManyScales (matching raterlimiter.ErrInvalid).
	// Default 64; negative means no bound.
	MaxScalesPerID int
	// Logger receives the actors' and the sweeper's reports. Default
	// slog.Default().
	Logger *slog.Logger
}

// ErrTooManyScales refuses a check that would give an id records of more
// distinct scales than Config.MaxScalesPerID allows. It matches
// raterlimiter.ErrInvalid.
var ErrTooManyScales = buckets.ErrTooManyScales

// The defaults of Config's bounds (internal/defaults names them for the
// sidecar's flags).
const (
	defaultMaxBuckets     = defaults.MaxBuckets
	defaultMaxBucketBytes = defaults.MaxBucketBytes
	defaultMaxScalesPerID = defaults.MaxScalesPerID
)

// Limiter is the embedded rate limiter. It is safe for concurrent use.
type Limiter struct {
	actors  []*actor.Actor
	sweeper *sweeper.Sweeper
	seed    maphash.Seed
	maxID   int
	once    sync.Once
}

var (
	_ rl.Limiter   = (*Limiter)(nil)
	_ check.Waiter = (*Limiter)(nil)
	_ rl.Admin     = (*Limiter)(nil)
)

// New starts a limiter. Close stops it.
func New(cfg Config) *Limiter {
	return newLimiter(cfg, memstore.Tuning{})
}

// newLimiter is New with the actors' tuning, which the sidecar and the
// tests set through internal/memstore (memstore.New).
func newLimiter(cfg Config, t memstore.Tuning) *Limiter {
	if cfg.Shards <= 0 {
		cfg.Shards = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = bounds.DefaultMaxIDBytes
	}
	cfg.MaxIDBytes = min(cfg.MaxIDBytes, buckets.MaxIDBytes)
	switch {
	case cfg.MaxScalesPerID == 0:
		cfg.MaxScalesPerID = defaultMaxScalesPerID
	case cfg.MaxScalesPerID < 0:
		cfg.MaxScalesPerID = 0
	}
	if cfg.MaxBuckets == 0 {
		cfg.MaxBuckets = defaultMaxBuckets
	}
	perShard := 0
	if cfg.MaxBuckets > 0 {
		perShard = (cfg.MaxBuckets + cfg.Shards - 1) / cfg.Shards
	}
	if cfg.MaxBucketBytes == 0 {
		cfg.MaxBucketBytes = defaultMaxBucketBytes
	}
	perShardBytes := 0
	if cfg.MaxBucketBytes > 0 {
		perShardBytes = int(min((cfg.MaxBucketBytes+int64(cfg.Shards)-1)/int64(cfg.Shards), math.MaxInt))
	}
	var clock func() int64
	if cfg.Clock != nil {
		clock = ms.Clock(cfg.Clock)
	}
	l := &Limiter{seed: maphash.MakeSeed(), maxID: cfg.MaxIDBytes} // MaxIDBytes > 0 here
	for i := range cfg.Shards {
		l.actors = append(l.actors, actor.New(actor.Config{
			Clock:       clock,
			Mailbox:     t.Mailbox,
			SweepBudget: t.SweepBudget,
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
		if t.OnSweep != nil {
			onSweep = func(shard int, s actor.SweepStats, err error) {
				t.OnSweep(shard, memstore.SweepStats(s), err)
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
	if err := check.Validate(r, l.maxID); err != nil {
		return rl.Decision{}, err
	}
	d, err := l.shard(r.ID).CheckRate(ctx, ms.Of(check.Counted(r)))
	return d.Public(), err
}

// checkValidated is CheckRate for a request its caller has validated with
// check.Validate (memstore.Validated, the sidecar's /check_rate): of the
// bounds only the id's length, which the caller may have held to another
// bound, is checked again.
func (l *Limiter) checkValidated(ctx context.Context, r rl.Request) (rl.Decision, error) {
	if len(r.ID) > l.maxID {
		return rl.Decision{}, check.Validate(r, l.maxID)
	}
	d, err := l.shard(r.ID).CheckRate(ctx, ms.Of(check.Counted(r)))
	return d.Public(), err
}

// Wait decides r and, when it is allowed with a delay (algo Leaky), sleeps
// until its turn (raterlimiter.Wait): a delay that would outlast ctx's
// deadline is refused before it takes a place in the queue, and a ctx that
// ends during the sleep returns early with its error.
func (l *Limiter) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return check.Wait(ctx, l, r)
}

// CheckRates decides a batch, one message per shard, the shards in parallel.
// If any request is invalid nothing is counted. A batch that fails because
// ctx ended was not counted on a single shard; over several shards, a shard
// that had already taken its part counted it.
func (l *Limiter) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
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

// checkRatesInto is CheckRates writing the decisions into out, which must be
// as long as rs, without copying rs: both are lent to the limiter until it
// returns nil, and each request of rs is left counted (check.Counted).
// After an error the caller must not touch rs or out again: a part already
// taken by a shard's actor may still be read and written. A server that
// reuses its buffers saves two allocations per batch this way; the sidecar
// reaches it through internal/memstore.
func (l *Limiter) checkRatesInto(ctx context.Context, rs []rl.Request, out []rl.Decision) error {
	if len(out) != len(rs) {
		return fmt.Errorf("memory: %d requests but room for %d decisions", len(rs), len(out))
	}
	if err := check.Batch(rs, l.maxID); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	for i := range rs {
		rs[i] = check.Counted(rs[i])
	}
	var ds []ms.Decision
	var err error
	if len(l.actors) == 1 {
		ds, err = l.actors[0].Decide(ctx, counted(rs))
	} else {
		ds, err = l.checkShards(ctx, rs)
	}
	if err == nil {
		for i, d := range ds {
			out[i] = d.Public()
		}
	}
	return err
}

// counted is a copy of rs as the limiter decides it (Request.Counted).
func counted(rs []rl.Request) []ms.Request {
	out := make([]ms.Request, len(rs))
	for i, r := range rs {
		out[i] = ms.Of(check.Counted(r))
	}
	return out
}

// public returns ds as a Go caller holds them.
func public(ds []ms.Decision) []rl.Decision {
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
func (l *Limiter) checkShards(ctx context.Context, rs []rl.Request) ([]ms.Decision, error) {
	// Group the requests by shard, keeping their order within a shard; each
	// shard's group is a slice of its own, handed over to its actor.
	n := len(l.actors)
	idx := make([][]int, n)
	for i := range rs {
		s := int(maphash.String(l.seed, rs[i].ID) % uint64(n))
		idx[s] = append(idx[s], i)
	}
	out := make([]ms.Decision, len(rs))
	var wg sync.WaitGroup
	errs := make([]error, n)
	for s := range n {
		if len(idx[s]) == 0 {
			continue
		}
		wg.Go(func() {
			sub := make([]ms.Request, len(idx[s]))
			for j, i := range idx[s] {
				sub[j] = ms.Of(check.Counted(rs[i]))
			}
			var dec []ms.Decision
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
	if err := check.Validate(rl.Request{ID: id, Scale: time.Millisecond}, l.maxID); err != nil {
		return nil, err
	}
	var out []ms.Bucket
	err := l.shard(id).Do(ctx, func(s *buckets.Store, _ int64) { out = s.Buckets(id) })
	return ms.Buckets(out), err
}

// Reset deletes the records of id (of every scale when scale is 0) and
// returns how many it deleted.
func (l *Limiter) Reset(ctx context.Context, id string, scale time.Duration) (int, error) {
	if err := check.Reset(id, scale, l.maxID); err != nil {
		return 0, err
	}
	var n int
	err := l.shard(id).Do(ctx, func(s *buckets.Store, _ int64) { n = s.Delete(id, scale.Milliseconds()) })
	return n, err
}

// restore stores a record, as read from a snapshot, in the shard that owns
// id, replacing the record with the same key.
func (l *Limiter) restore(ctx context.Context, id string, scale int64, a rl.Algo, r algo.Record) error {
	var err error
	if derr := l.shard(id).Do(ctx, func(s *buckets.Store, _ int64) { err = s.Put(id, scale, a, r) }); derr != nil {
		return derr
	}
	return err
}

// restoreLog stores a Log record, as read from a snapshot (its entries
// marshalled by algo.Log.AppendBinary), in the shard that owns id. Entries
// that do not decode are refused with an error matching
// raterlimiter.ErrInvalid.
func (l *Limiter) restoreLog(ctx context.Context, id string, scale, created int64, data []byte) error {
	var err error
	if derr := l.shard(id).Do(ctx, func(s *buckets.Store, _ int64) { err = s.PutLog(id, scale, created, data) }); derr != nil {
		return derr
	}
	return err
}

// sweep runs a sweep of every shard now and returns the totals
// (memstore.Limiter.Sweep).
func (l *Limiter) sweep(ctx context.Context) (memstore.SweepStats, error) {
	var total memstore.SweepStats
	for _, a := range l.actors {
		st, err := a.Sweep(ctx)
		if err != nil {
			return total, err
		}
		total.Examined += st.Examined
		total.Deleted += st.Deleted
	}
	return total, nil
}

// stats returns the limiter's gauges and counters (memstore.Stats).
func (l *Limiter) stats() memstore.Stats {
	st := memstore.Stats{Shards: len(l.actors)}
	for _, a := range l.actors {
		st.Live += a.Len()
		st.Evicted += a.Evicted()
		st.Restarts += a.Restarts()
		st.Pending += a.Pending()
	}
	return st
}

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
