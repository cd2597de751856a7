// Package memstore is the memory backend's plumbing for the sidecar and
// its tools, kept off package memory's public surface: the record
// iterator and restore calls the snapshots use, a store without an actor
// for replaying checks at given times, holding a shard for drills, and the
// batch into lent buffers the sidecar's /check_rates uses.
//
// Package memory registers its implementation when it is linked in (Of,
// NewStore); a program that imports memstore imports memory too.
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
)

// Register is called by package memory when it is initialized.
func Register(view func(any) (Limiter, bool), store func(StoreConfig) Store) {
	of, newStore = view, store
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
