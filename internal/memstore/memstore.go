// Package memstore is the memory backend's plumbing for the sidecar and
// its tools, kept off package memory's public surface: the record
// iterator and restore calls the snapshots use, a store without an actor
// for replaying checks at given times, holding a shard for drills, the
// batch into lent buffers the sidecar's /check_rates uses, the check
// without a second validation its /check_rate uses (Validated), the gauges its
// metrics and dashboard read (Stats), a sweep on demand (Sweep), and the
// actors' tuning (New with a Tuning: mailbox size, sweep budget, a hook
// after each periodic sweep).
//
// Package memory registers its implementation when it is linked in (Of,
// NewStore, New); a program that imports memstore imports memory too.
package memstore

import (
	"context"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
)

// MaxIDBytes is the longest id a record can hold (1 MiB - 1), whatever a limiter's
// configured bound.
const MaxIDBytes = 1<<20 - 1

// Record is one live bucket record as the store holds it.
type Record struct {
	// ID is the record's id.
	ID string
	// Scale is the window, in milliseconds.
	Scale int64
	// Algo is the algorithm that counts in it.
	Algo rl.Algo
	// State is the record itself.
	State algo.Record
	// Log is, for a Log record, its timestamps in the store's own
	// encoding (lent for the call only); nil otherwise.
	Log []byte
}

// Limiter is what a *memory.Limiter offers beyond its public methods.
type Limiter interface {
	Into
	Validated
	// CopyRecords calls fn with every live record, a chunk at a time per
	// shard (each chunk one visit to the shard's goroutine, after which
	// endVisit learns how long it held the shard); records come in key
	// order within a shard, and a record lent to fn is valid during the
	// call only.
	CopyRecords(ctx context.Context, chunk int, fn func(Record) error, endVisit func(took time.Duration) error) error
	// Restore puts a record back (a snapshot's), replacing any of its key.
	Restore(ctx context.Context, id string, scale int64, a rl.Algo, r algo.Record) error
	// RestoreLog puts a Log record's timestamps back.
	RestoreLog(ctx context.Context, id string, scale, created int64, data []byte) error
	// Scan calls fn with every record, shard by shard, until fn returns
	// false.
	Scan(ctx context.Context, fn func(Record) bool) error
	// Pause holds shard's goroutine until release is called: checks on
	// it wait, as they would behind a stalled shard.
	Pause(ctx context.Context, shard int) (release func() error, err error)
	// Sweep runs a sweep of every shard now and returns the totals (Took
	// is zero). With memory.Config.SweepInterval negative it is how a
	// program sweeps on a schedule of its own.
	Sweep(ctx context.Context) (SweepStats, error)
	// Stats returns the limiter's gauges and counters.
	Stats() Stats
}

// Stats is a snapshot of a memory limiter's gauges and counters.
//
// Live and Evicted are eventually consistent: an actor may publish them
// after it has answered the checks it just served (CheckRate, Wait,
// CheckRates, CheckRatesInto), so a caller that reads them as soon as its
// check returns may see the values from before it; they catch up without
// any further call, and tests wait for them with a condition. After Sweep,
// Reset, Restore and RestoreLog they are current when the call returns.
// Restarts is counted before the caller whose check panicked is answered.
// Pending is read at the moment of the call: it counts the messages no
// actor has taken yet, those of callers that gave up included, so it too
// drains as the actors run, or when a watched context ends and its
// watcher answers the callers still queued (a test waits for it with a
// condition).
// Shards never changes.
type Stats struct {
	// Live is the number of live bucket records (eventually consistent).
	Live int
	// Evicted counts records evicted to stay within MaxBuckets or
	// MaxBucketBytes (eventually consistent).
	Evicted uint64
	// Restarts counts actor restarts after a panic.
	Restarts uint64
	// Pending is the number of messages waiting in the mailboxes.
	Pending int
	// Shards is the number of actors.
	Shards int
}

// SweepStats is what a sweep did: the records it examined and deleted,
// and how long it took.
type SweepStats struct {
	Examined, Deleted int
	// Took is the sweep's duration, as the sweeper measured it (zero for
	// Limiter.Sweep).
	Took time.Duration
}

// Tuning is what New sets beyond a memory.Config: the actors' knobs the
// sidecar and the tests turn. The zero Tuning is memory.New's.
type Tuning struct {
	// Mailbox is about how many messages may wait for each actor; callers
	// past it wait for room. Default 65,536.
	Mailbox int
	// SweepBudget is how many records a sweep step examines before the
	// actor answers checks again. Default 256.
	SweepBudget int
	// OnSweep, if set, is called after each shard's periodic sweep.
	OnSweep func(shard int, s SweepStats, err error)
}

// Into decides a batch into the caller's buffers: CheckRates writing the
// decisions into out, which must be as long as rs, without copying rs.
// Both are lent to the limiter until it returns nil, and each request of
// rs is left counted (check.Counted); after an error the caller must not
// touch rs or out again, for a part already taken by a shard may still be
// read and written.
type Into interface {
	CheckRatesInto(ctx context.Context, rs []rl.Request, out []rl.Decision) error
}

// Validated decides a check its caller has already validated: the
// sidecar's API, which parses and validates every request with
// check.Validate before it asks the limiter, skips the limiter's second
// validation this way. CheckValidated is CheckRate for an r that
// check.Validate accepts with some bound on the id's length: only the id's
// length is checked again, against the limiter's own bound (an id longer
// fails as CheckRate fails it). An r that check.Validate refuses otherwise
// is decided as it stands, which CheckRate never does.
type Validated interface {
	CheckValidated(ctx context.Context, r rl.Request) (rl.Decision, error)
}

// ValidatedOf returns l's Validated: l itself when it has the method, a
// memory limiter's through its registered plumbing, or false.
func ValidatedOf(l any) (Validated, bool) {
	if v, ok := l.(Validated); ok {
		return v, true
	}
	return Of(l)
}

// IntoOf returns l's Into: l itself when it has the method, a memory
// limiter's through its registered plumbing, or false.
func IntoOf(l any) (Into, bool) {
	if i, ok := l.(Into); ok {
		return i, true
	}
	return Of(l)
}

// Store is a memory backend's store without its goroutine, for a single
// caller that gives the time of each call (tools that replay a trace).
type Store interface {
	// Check decides r at now (Unix milliseconds).
	Check(now int64, r rl.Request) (rl.Decision, error)
	// Sweep removes expired records, examining at most budget.
	Sweep(now int64, budget int) (examined, deleted int, done bool)
	// Scan calls fn with every record until fn returns false.
	Scan(fn func(Record) bool)
}

// StoreConfig configures NewStore.
type StoreConfig struct {
	// MaxIDBytes bounds an id's length; zero means rl's default.
	MaxIDBytes int
	// NoCache turns the store's lookup cache off.
	NoCache bool
}

var (
	of       func(any) (Limiter, bool)
	newStore func(StoreConfig) Store
	newTuned func(cfg any, t Tuning) any
)

// Register is called by package memory when it is initialized: view
// returns a limiter's plumbing, store makes a Store, and tuned starts a
// limiter of a memory.Config with a Tuning.
func Register(view func(any) (Limiter, bool), store func(StoreConfig) Store, tuned func(cfg any, t Tuning) any) {
	of, newStore, newTuned = view, store, tuned
}

// New starts a memory limiter as memory.New(cfg) does, with t's tuning:
// memstore.New[*memory.Limiter](cfg, t). It panics when cfg is not a
// memory.Config or L not a *memory.Limiter.
func New[L, C any](cfg C, t Tuning) L {
	if newTuned == nil {
		panic("memstore: package memory is not linked in")
	}
	return newTuned(cfg, t).(L)
}

// Of returns the plumbing of l, a *memory.Limiter, or false when l is
// something else.
func Of(l any) (Limiter, bool) {
	if of == nil {
		return nil, false
	}
	return of(l)
}

// MustOf is Of for a caller that holds a *memory.Limiter.
func MustOf(l any) Limiter {
	m, ok := Of(l)
	if !ok {
		panic("memstore: not a memory limiter")
	}
	return m
}

// NewStore returns a store without a goroutine. It panics when package
// memory is not linked in.
func NewStore(cfg StoreConfig) Store {
	return newStore(cfg)
}
