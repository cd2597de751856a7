// Package actor runs a bucket store on one goroutine of its own: callers send
// messages over a channel and wait for the reply, so the store needs no locks
// (Erlang's gen_server). A supervisor restarts the goroutine after a panic,
// keeping the store, so no counter is lost.
package actor

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
)

// Config configures an Actor. The zero value is usable: every zero field
// means the default its comment names.
type Config struct {
	// Clock returns the time in Unix milliseconds. Default: a SteadyClock of
	// the system's clocks (of its own per actor), which advances with the
	// monotonic clock, anchored to the wall clock, so a wall-clock jump that
	// is soon corrected neither freezes nor rewinds decisions. Whatever the
	// clock, the actor never lets time go backwards: a reading earlier than
	// one it already used is taken as that one.
	Clock func() int64
	// Mailbox is how many messages may wait for the actor. Default
	// DefaultMailbox (1024).
	Mailbox int
	// SweepBudget is how many records one step of a sweep examines before the
	// actor answers waiting checks again. Default DefaultSweepBudget (256).
	SweepBudget int
	// Store configures the actor's store.
	Store buckets.Options
	// Logger receives the supervisor's reports. Default: slog.Default().
	Logger *slog.Logger
}

// Defaults for Config's zero fields.
const (
	DefaultMailbox     = 1024
	DefaultSweepBudget = 256
)

// ErrExpired is returned to a caller whose deadline passed while its
// message waited in the mailbox: the actor skipped it, so nothing was
// counted. It matches raterlimiter.ErrUnavailable and
// context.DeadlineExceeded.
var ErrExpired = fmt.Errorf("actor: the deadline passed before the actor took the check; not counted: %w (%w)", rl.ErrUnavailable, context.DeadlineExceeded)

// ErrPanicked is returned to the caller whose message was being handled when
// the actor's goroutine panicked. The actor restarts with its store intact.
var ErrPanicked = fmt.Errorf("actor: check aborted by a panic in the actor, which restarted: %w", rl.ErrUnavailable)

// SystemClock returns the system time in Unix milliseconds.
func SystemClock() int64 { return time.Now().UnixMilli() }

// SweepStats reports a finished sweep.
type SweepStats struct {
	Examined, Deleted int
	// Took is the sweep's duration, as the sweeper measured it.
	Took time.Duration
}

// Actor owns one store and the goroutine that serves it. It is safe for
// concurrent use. Make one with New; stop it with Close.
type Actor struct {
	cfg      Config
	store    *buckets.Store
	mailbox  chan *msg
	done     chan struct{} // closed by Close
	stopped  chan struct{} // closed when the goroutine has exited
	once     sync.Once
	restarts atomic.Uint64
	live     atomic.Int64  // records in the store, as of the last message
	evicted  atomic.Uint64 // records the store evicted to stay bounded

	// Owned by the actor's goroutine.
	now      int64
	wallNS   int64 // Unix ns for deadlines, read once per drain; 0: not yet
	current  *msg
	sweeping []*msg // sweep requests waiting for the pass to end
	batches  []*msg // large batches being decided, a chunk at a time
	swept    SweepStats
	hook     func(*msg) // test hook, run before each message
}

// spinPolls is how many times a caller polls for its reply, yielding in
// between, before it parks (see BENCHMARKS.md).
const spinPolls = 16

// actorSpins is how many times an idle actor yields, watching its mailbox,
// before it parks: callers about to send then find it awake, and spare the
// wake-up (see BENCHMARKS.md).
const actorSpins = 8

// maxDrain bounds how many queued messages share one reading of the clock.
const maxDrain = 256

// batchChunk is how many requests of a batch the actor decides before it
// answers the messages waiting behind it and yields its thread: a flood of
// large batches must not make a single check wait for whole batches. At the
// bucket bound a new id costs about 2.5 µs, so a chunk is about 40 µs; 16
// rather than 64 took the flood test's steady p99 ratio from a median of
// 1.77 (5 runs) to 1.28 (4 runs).
const batchChunk = 16

type kind uint8

const (
	kindCheck kind = iota
	kindBatch
	kindSweep
	kindFunc
)

// Message states (msg.state): a message is taken by the actor or abandoned
// by its caller, whichever comes first, exactly once.
const (
	queued    uint32 = iota
	taken            // the actor applies it and replies
	abandoned        // not applied: the caller gave up, or its deadline passed
)

// msg is one request to the actor. Check messages are pooled with their
// reply channel.
type msg struct {
	kind     kind
	state    atomic.Uint32
	deadline int64 // the caller's deadline in Unix ns, 0 if none
	req      rl.Request
	reqs     []rl.Request
	out      []rl.Decision
	next     int // a batch's first request not yet decided
	fn       func(s *buckets.Store, now int64)
	reply    chan result
}

type result struct {
	d     rl.Decision
	sweep SweepStats
	err   error
}

var msgPool = sync.Pool{New: func() any { return &msg{reply: make(chan result, 1)} }}

// New starts an actor with an empty store.
func New(cfg Config) *Actor {
	if cfg.Clock == nil {
		cfg.Clock = NewSteadyClock(nil, nil, 0, 0).Now
	}
	if cfg.Mailbox <= 0 {
		cfg.Mailbox = DefaultMailbox
	}
	if cfg.SweepBudget <= 0 {
		cfg.SweepBudget = DefaultSweepBudget
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Actor{
		cfg:     cfg,
		store:   buckets.New(cfg.Store),
		mailbox: make(chan *msg, cfg.Mailbox),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go a.supervise()
	return a
}

// CheckRate decides r. It fails with ctx's error if ctx ends before the
// actor took r, with ErrExpired if ctx's deadline had passed when the actor
// came to it, with raterlimiter.ErrClosed after Close, and with ErrPanicked
// if the actor panicked on it. After any error but ErrPanicked, r was not
// counted: the actor skips messages whose caller is gone.
func (a *Actor) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	m := msgPool.Get().(*msg)
	m.kind, m.req = kindCheck, r
	m.state.Store(queued)
	res, err := a.call(ctx, m)
	if err != nil {
		return rl.Decision{}, err
	}
	m.req = rl.Request{}
	msgPool.Put(m)
	return res.d, res.err
}

// CheckRates decides rs in order into out (len(out) == len(rs)), in one
// message. Invalid requests are refused before anything is counted.
//
// The message carries a copy of rs and decisions of its own: a caller whose
// context ends gets its error at once and may reuse both slices, while the
// message can still wait in the mailbox and be decided later.
func (a *Actor) CheckRates(ctx context.Context, rs []rl.Request, out []rl.Decision) error {
	ds, err := a.Decide(ctx, slices.Clone(rs))
	if err == nil {
		copy(out, ds)
	}
	return err
}

// Decide is CheckRates for a caller that hands rs over: the actor may read
// rs until it has decided them, even after Decide returned an error, so the
// caller must not change rs again. The decisions come in a slice of their
// own.
func (a *Actor) Decide(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	out := make([]rl.Decision, len(rs))
	if err := a.DecideInto(ctx, rs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecideInto is Decide writing the decisions into out, which must be as
// long as rs. Both are handed over until it returns nil: after an error the
// actor may still read rs and write out, so the caller must not touch
// either again.
func (a *Actor) DecideInto(ctx context.Context, rs []rl.Request, out []rl.Decision) error {
	if len(out) != len(rs) {
		return fmt.Errorf("actor: %d requests but room for %d decisions", len(rs), len(out))
	}
	m := &msg{kind: kindBatch, reqs: rs, out: out, reply: make(chan result, 1)}
	res, err := a.call(ctx, m)
	if err != nil {
		return err
	}
	return res.err
}

// Do runs fn on the actor's goroutine with its store and the time, and
// returns when fn has. fn must not keep the store.
func (a *Actor) Do(ctx context.Context, fn func(s *buckets.Store, now int64)) error {
	m := &msg{kind: kindFunc, fn: fn, reply: make(chan result, 1)}
	res, err := a.call(ctx, m)
	if err != nil {
		return err
	}
	return res.err
}

// Sweep deletes every record no decision can read again, in steps of
// Config.SweepBudget records between which the actor answers checks, and
// returns when the pass is done. Sweeps asked for during a pass join it.
func (a *Actor) Sweep(ctx context.Context) (SweepStats, error) {
	m := &msg{kind: kindSweep, reply: make(chan result, 1)}
	res, err := a.call(ctx, m)
	if err != nil {
		return SweepStats{}, err
	}
	return res.sweep, res.err
}

// Len returns the number of live records as of the last message handled.
func (a *Actor) Len() int { return int(a.live.Load()) }

// Evicted returns how many records the store evicted to stay within
// Config.Store.MaxRecords.
func (a *Actor) Evicted() uint64 { return a.evicted.Load() }

// Restarts returns how many times the supervisor restarted the goroutine.
func (a *Actor) Restarts() uint64 { return a.restarts.Load() }

// Pending returns how many messages wait in the mailbox.
func (a *Actor) Pending() int { return len(a.mailbox) }

// Close stops the actor: messages still waiting are answered with
// raterlimiter.ErrClosed, and so is every later call. It waits for the
// goroutine to exit. Close is idempotent and safe for concurrent use.
func (a *Actor) Close() error {
	a.once.Do(func() { close(a.done) })
	<-a.stopped
	return nil
}

// call sends m and waits for its reply. A non-nil error means m may still be
// in the actor's hands and must not be reused.
//
// A caller that gives up (its context ends) before the actor took m marks
// it abandoned, and the actor skips it: an error from call means m was not
// applied, so nothing it asked for was counted. Once the actor has taken m,
// the caller waits for the reply, which follows within the message's own
// handling time.
func (a *Actor) call(ctx context.Context, m *msg) (result, error) {
	if d, ok := ctx.Deadline(); ok {
		m.deadline = d.UnixNano()
	} else {
		m.deadline = 0
	}
	select {
	case a.mailbox <- m: // the common case, without locking three channels
	default:
		select {
		case a.mailbox <- m:
		case <-a.done:
			return result{}, rl.ErrClosed
		case <-ctx.Done():
			return result{}, gaveUp(ctx)
		}
	}
	// The actor answers within microseconds under load: poll for the reply,
	// yielding the processor, before parking on it. A poll of an empty
	// buffered channel takes no lock, and a reply that finds nobody parked
	// costs the actor no wake-up.
	for range spinPolls {
		select {
		case res := <-m.reply:
			return res, nil
		default:
		}
		runtime.Gosched()
	}
	select {
	case res := <-m.reply:
		return res, nil
	case <-ctx.Done():
		if m.state.CompareAndSwap(queued, abandoned) {
			return result{}, gaveUp(ctx)
		}
		// Taken (or found expired) by the actor: its reply is on the way.
		select {
		case res := <-m.reply:
			return res, nil
		case <-a.stopped:
			select {
			case res := <-m.reply:
				return res, nil
			default:
				return result{}, rl.ErrClosed
			}
		}
	case <-a.stopped:
		select {
		case res := <-m.reply:
			return res, nil
		default:
			return result{}, rl.ErrClosed
		}
	}
}

// supervise runs the loop, restarting it after a panic with the same store.
func (a *Actor) supervise() {
	defer close(a.stopped)
	for !a.loop() {
	}
}

// loop serves messages until Close. It returns false after recovering from
// a panic, true on a clean stop.
func (a *Actor) loop() (clean bool) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		a.restarts.Add(1)
		a.cfg.Logger.Error("actor: panic recovered; restarting with the store intact",
			"panic", fmt.Sprint(v), "restarts", a.restarts.Load(), "stack", string(debug.Stack()))
		if m := a.current; m != nil {
			a.current = nil
			a.batches = slices.DeleteFunc(a.batches, func(b *msg) bool { return b == m })
			m.reply <- result{err: ErrPanicked}
		}
		clean = false
	}()
	for {
		if len(a.sweeping) > 0 || len(a.batches) > 0 {
			if len(a.batches) > 0 {
				a.batchStep()
			}
			if len(a.sweeping) > 0 {
				a.sweepStep()
			}
			// Answer what waits before the next step, then yield: the
			// callers just answered wait to run, and on a busy processor
			// they would wait for a thread to wake up elsewhere; so does a
			// request the network just delivered. (Yielding only after
			// answering someone saved two fifths of a flood batch's CPU, but
			// the flood test's steady p99 ratio went from 1.45-1.74 in five
			// runs to 1.79-2.51 in four.)
			a.tick()
			for range len(a.mailbox) {
				a.handle(<-a.mailbox)
			}
			runtime.Gosched()
			if len(a.batches) > 0 {
				osYield()
			}
			select {
			case <-a.done:
				a.drain()
				return true
			default:
			}
			continue
		}
		for range actorSpins {
			if len(a.mailbox) > 0 {
				break
			}
			runtime.Gosched()
		}
		select {
		case m := <-a.mailbox:
			// One reading of the clock serves this message and those already
			// queued behind it: all were sent before the reading, so none is
			// decided at a time earlier than it was asked.
			a.tick()
			queued := min(len(a.mailbox), maxDrain)
			a.handle(m)
			for range queued {
				a.handle(<-a.mailbox)
			}
			a.publish()
		case <-a.done:
			a.drain()
			return true
		}
	}
}

// publish makes the store's gauges readable from other goroutines.
func (a *Actor) publish() {
	a.live.Store(int64(a.store.Len()))
	a.evicted.Store(a.store.Evicted)
}

// tick reads the clock, never going backwards.
func (a *Actor) tick() {
	a.wallNS = 0
	if t := a.cfg.Clock(); t > a.now {
		a.now = t
	}
}

// take claims m for applying. It reports false, and answers m's caller if
// it still waits, when m was abandoned or its deadline has passed: such a
// message is skipped, never applied.
func (a *Actor) take(m *msg) bool {
	if m.deadline != 0 {
		if a.wallNS == 0 {
			a.wallNS = time.Now().UnixNano()
		}
		if a.wallNS >= m.deadline {
			if m.state.CompareAndSwap(queued, abandoned) {
				m.reply <- result{err: ErrExpired}
			}
			return false
		}
	}
	return m.state.CompareAndSwap(queued, taken)
}

func (a *Actor) handle(m *msg) {
	if !a.take(m) {
		return
	}
	a.current = m
	if a.hook != nil {
		a.hook(m)
	}
	var res result
	switch m.kind {
	case kindCheck:
		res.d, res.err = a.store.Check(a.now, m.req)
	case kindBatch:
		if err := rl.ValidateBatch(m.reqs, a.cfg.Store.MaxIDBytes); err != nil {
			res.err = err
			break
		}
		if len(m.reqs) > batchChunk {
			// Decided a chunk at a time between other messages (batchStep).
			a.current = nil
			a.batches = append(a.batches, m)
			return
		}
		res.err = a.decide(m, len(m.reqs))
	case kindFunc:
		m.fn(a.store, a.now)
	case kindSweep:
		a.current = nil
		if len(a.sweeping) == 0 {
			a.swept = SweepStats{}
		}
		a.sweeping = append(a.sweeping, m)
		return
	}
	a.current = nil
	if m.kind != kindCheck {
		a.publish() // before the reply: its caller may read Len next
	}
	m.reply <- res
}

// decide decides up to n more requests of the batch m.
func (a *Actor) decide(m *msg, n int) error {
	end := min(len(m.reqs), m.next+n)
	for ; m.next < end; m.next++ {
		d, err := a.store.Check(a.now, m.reqs[m.next])
		if err != nil {
			return &rl.ItemError{Index: m.next, Err: err}
		}
		m.out[m.next] = d
	}
	return nil
}

// batchStep decides the next chunk of the oldest large batch, and answers
// it when it is done.
func (a *Actor) batchStep() {
	a.tick()
	m := a.batches[0]
	a.current = m
	if a.hook != nil {
		a.hook(m)
	}
	err := a.decide(m, batchChunk)
	a.current = nil
	if err == nil && m.next < len(m.reqs) {
		return
	}
	a.batches = a.batches[1:]
	a.publish() // before the reply: its caller may read Len next
	m.reply <- result{err: err}
}

func (a *Actor) sweepStep() {
	a.tick()
	ex, del, done := a.store.Sweep(a.now, a.cfg.SweepBudget)
	a.swept.Examined += ex
	a.swept.Deleted += del
	a.publish()
	if !done {
		return
	}
	for _, m := range a.sweeping {
		m.reply <- result{sweep: a.swept}
	}
	a.sweeping = a.sweeping[:0]
}

// drain answers everything still waiting with ErrClosed.
func (a *Actor) drain() {
	for _, m := range a.sweeping {
		m.reply <- result{err: rl.ErrClosed}
	}
	a.sweeping = nil
	for _, m := range a.batches {
		m.reply <- result{err: rl.ErrClosed}
	}
	a.batches = nil
	for {
		select {
		case m := <-a.mailbox:
			if m.state.CompareAndSwap(queued, abandoned) {
				m.reply <- result{err: rl.ErrClosed}
			}
		default:
			return
		}
	}
}

var _ interface {
	CheckRate(context.Context, rl.Request) (rl.Decision, error)
} = (*Actor)(nil)

// gaveUp is the error of a caller whose context ended before the actor
// answered: it matches both the context's error and
// raterlimiter.ErrUnavailable.
func gaveUp(ctx context.Context) error {
	return fmt.Errorf("actor: no answer before the context ended: %w (%w)", rl.ErrUnavailable, ctx.Err())
}
