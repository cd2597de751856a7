// Package actor runs a bucket store on one goroutine of its own: callers send
// messages and wait for the reply, so the store needs no locks (Erlang's
// gen_server). A supervisor restarts the goroutine after a panic, keeping
// the store, so no counter is lost.
//
// The mailbox is a lock-free stack: a caller pushes its message with one
// compare-and-swap and parks on the message's own reply channel; the actor
// takes the whole stack with one swap, puts it in order and answers every
// message in one pass, so thousands of callers cost it one pass, not one
// wake-up and one scheduler turn each. The actor parks when it finds the
// mailbox empty; the caller that finds it parked wakes it.
//
// Engine internals: use package memory. Only memory imports this package
// (the root package's TestEngineIsSealed checks it).
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
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Config configures an Actor. The zero value is usable: every zero field
// means the default its comment names.
type Config struct {
	// Clock returns the time in Unix milliseconds. Default: a SteadyClock of
	// the system's clocks, one per actor. Whatever the clock, the actor
	// never lets time go backwards: a reading earlier than one it already
	// used is taken as that one.
	Clock func() int64
	// Mailbox is about how many messages may wait for the actor; callers
	// past it wait for the actor to empty the mailbox. Default
	// DefaultMailbox (65,536): each caller has one message in the mailbox
	// at most, and waits the same whether it waits in the mailbox or for
	// room in it, so the bound only matters to bound a flood.
	Mailbox int
	// Store configures the actor's store.
	Store buckets.Options
	// Logger receives the supervisor's reports. Default: slog.Default().
	Logger *slog.Logger
}

// DefaultMailbox is Config.Mailbox's default.
const DefaultMailbox = 1 << 16

// sweepBudget is how many records one step of a sweep examines before the
// actor answers waiting checks again.
const sweepBudget = 256

// errExpired is returned to a caller whose deadline passed while its
// message waited in the mailbox: the actor skipped it, so nothing was
// counted. It matches raterlimiter.ErrUnavailable and
// context.DeadlineExceeded.
var errExpired = fmt.Errorf("actor: the deadline passed before the actor took the check; not counted: %w (%w)", rl.ErrUnavailable, context.DeadlineExceeded)

// errPanicked is returned to the caller whose message was being handled when
// the actor's goroutine panicked. The actor restarts with its store intact.
var errPanicked = fmt.Errorf("actor: check aborted by a panic in the actor, which restarted: %w", rl.ErrUnavailable)

// SweepStats reports a finished sweep.
type SweepStats struct {
	Examined, Deleted int
	// Took is the sweep's duration, as the sweeper measured it.
	Took time.Duration
}

// Actor owns one store and the goroutine that serves it. It is safe for
// concurrent use. Make one with New; stop it with Close.
type Actor struct {
	cfg   Config
	store *buckets.Store
	// head is the mailbox: the newest message of a stack that callers push
	// onto and the actor empties whole (see push and grab); closedQueue
	// once the actor has stopped.
	head atomic.Pointer[msg]
	// sleeping is set by an idle actor before it parks on wake; the caller
	// that clears it sends the one token that wakes it.
	sleeping atomic.Bool
	wake     chan struct{}
	// Callers that found the mailbox full wait for room here: the actor
	// closes room (and replaces it) when it empties the mailbox while
	// roomWaiters is not zero.
	roomMu      sync.Mutex
	room        chan struct{}
	roomWaiters atomic.Int32
	done        chan struct{} // closed by Close
	stopped     chan struct{} // closed when the goroutine has exited
	once        sync.Once
	restarts    atomic.Uint64
	live        atomic.Int64  // records in the store, as of the last message
	evicted     atomic.Uint64 // records the store evicted to stay bounded

	// Owned by the actor's goroutine.
	now      int64
	wallNS   int64 // Unix ns for deadlines, read once per drain; 0: not yet
	current  *msg
	pending  *msg   // the rest of the list being served, kept across a panic
	sweeping []*msg // sweep requests waiting for the pass to end
	batches  []*msg // large batches being decided, a chunk at a time
	swept    SweepStats
	hook     func(*msg) // test hook, run before each message
}

// maxDrain bounds how many queued messages share one reading of the clock,
// and how many the actor answers before it yields.
const maxDrain = 256

// batchChunk is how many requests of a batch the actor decides before it
// answers the messages waiting behind it and yields its thread: a flood of
// large batches must not make a single check wait for whole batches. Small
// enough that a chunk of new ids at the bucket bound (the costliest checks)
// stays in the tens of microseconds, the wait a steady check can meet
// behind a flood (lab/notes/perf-notes.md, "Floods at the bucket bound").
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
// ready channel.
type msg struct {
	kind  kind
	state atomic.Uint32
	// next is the message pushed before this one (the one after it, once
	// grab has put the list in order). depth is how many messages the
	// mailbox held with this one on top; other callers' pushes read it,
	// hence atomic.
	next     *msg
	depth    atomic.Int32
	deadline int64 // the caller's deadline in Unix ns, 0 if none
	req      millis.Request
	reqs     []millis.Request
	out      []millis.Decision
	decided  int // a batch's first request not yet decided
	fn       func(s *buckets.Store, now int64)
	res      result        // the reply, written before ready is signalled
	ready    chan struct{} // buffered 1
}

type result struct {
	d     millis.Decision
	sweep SweepStats
	err   error
}

// answer replies to m's caller; m belongs to the caller again afterwards.
func (m *msg) answer(res result) {
	m.res = res
	m.ready <- struct{}{}
}

var msgPool = sync.Pool{New: func() any { return &msg{ready: make(chan struct{}, 1)} }}

// New starts an actor with an empty store.
func New(cfg Config) *Actor {
	if cfg.Clock == nil {
		cfg.Clock = NewSteadyClock(nil, nil).Now
	}
	if cfg.Mailbox <= 0 {
		cfg.Mailbox = DefaultMailbox
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Actor{
		cfg:     cfg,
		store:   buckets.New(cfg.Store),
		wake:    make(chan struct{}, 1),
		room:    make(chan struct{}),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go a.supervise()
	return a
}

// CheckRate decides r. It fails with ctx's error if ctx ends before the
// actor took r, with errExpired if ctx's deadline had passed when the actor
// came to it, with raterlimiter.ErrClosed after Close, and with errPanicked
// if the actor panicked on it. After any error but errPanicked, r was not
// counted: the actor skips messages whose caller is gone.
func (a *Actor) CheckRate(ctx context.Context, r millis.Request) (millis.Decision, error) {
	m := msgPool.Get().(*msg)
	m.kind, m.req = kindCheck, r
	m.state.Store(queued)
	res, err := a.call(ctx, m)
	if err != nil {
		return millis.Decision{}, err
	}
	m.req, m.res = millis.Request{}, result{}
	msgPool.Put(m)
	return res.d, res.err
}

// Decide decides rs in order, in one message, and returns the decisions in
// a slice of their own. The requests must be valid: the limiter validates
// them where they come in (package memory). The caller hands rs over: the
// actor may read rs until it has decided them, even after Decide returned
// an error (a caller whose context ends gets its error at once, while the
// message can still wait in the mailbox), so the caller must not change rs
// again.
func (a *Actor) Decide(ctx context.Context, rs []millis.Request) ([]millis.Decision, error) {
	out := make([]millis.Decision, len(rs))
	if _, err := a.send(ctx, &msg{kind: kindBatch, reqs: rs, out: out}); err != nil {
		return nil, err
	}
	return out, nil
}

// Do runs fn on the actor's goroutine with its store and the time, and
// returns when fn has. fn must not keep the store.
func (a *Actor) Do(ctx context.Context, fn func(s *buckets.Store, now int64)) error {
	_, err := a.send(ctx, &msg{kind: kindFunc, fn: fn})
	return err
}

// Sweep deletes every record no decision can read again, in steps of
// sweepBudget (256) records between which the actor answers checks, and
// returns when the pass is done. Sweeps asked for during a pass join it.
func (a *Actor) Sweep(ctx context.Context) (SweepStats, error) {
	res, err := a.send(ctx, &msg{kind: kindSweep})
	return res.sweep, err
}

// Len returns the number of live records as of the last message handled.
func (a *Actor) Len() int { return int(a.live.Load()) }

// Evicted returns how many records the store evicted to stay within
// Config.Store.MaxRecords.
func (a *Actor) Evicted() uint64 { return a.evicted.Load() }

// Restarts returns how many times the supervisor restarted the goroutine.
func (a *Actor) Restarts() uint64 { return a.restarts.Load() }

// Pending returns how many messages wait in the mailbox.
func (a *Actor) Pending() int {
	if h := a.head.Load(); h != nil && h != closedQueue {
		return int(h.depth.Load())
	}
	return 0
}

// Close stops the actor: messages still waiting are answered with
// raterlimiter.ErrClosed, and so is every later call. It waits for the
// goroutine to exit. Close is idempotent and safe for concurrent use.
func (a *Actor) Close() error {
	a.once.Do(func() {
		close(a.done)
	})
	<-a.stopped
	return nil
}

// send sends m, a message of its own (never pooled), and waits for its
// reply. The error is call's, or else the reply's.
func (a *Actor) send(ctx context.Context, m *msg) (result, error) {
	m.ready = make(chan struct{}, 1)
	res, err := a.call(ctx, m)
	if err != nil {
		return result{}, err
	}
	return res, res.err
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
	if err := a.push(ctx, m); err != nil {
		return result{}, err
	}
	// Every message pushed is answered: by the actor, by its supervisor
	// after a panic, or by drain after Close. So the caller parks on its
	// reply at once, with no polling: the actor answers a whole drain of
	// callers in one pass, and a parked caller costs it one wake-up, where
	// thousands of callers polling with runtime.Gosched would queue the
	// actor behind them all (lab/notes/perf-notes.md, "The actor's hand-off").
	done := ctx.Done()
	if done == nil {
		<-m.ready
		return m.res, nil
	}
	select {
	case <-m.ready:
		return m.res, nil
	case <-done:
		if m.state.CompareAndSwap(queued, abandoned) {
			return result{}, gaveUp(ctx)
		}
		// Taken (or found expired) by the actor: its reply is on the way.
		<-m.ready
		return m.res, nil
	}
}

// closedQueue is the mailbox's head once the actor has stopped: pushes
// fail with raterlimiter.ErrClosed.
var closedQueue = new(msg)

// push puts m in the mailbox, waiting for room while it holds
// Config.Mailbox messages, and wakes the actor if it sleeps.
func (a *Actor) push(ctx context.Context, m *msg) error {
	for {
		h := a.head.Load()
		if h == closedQueue {
			return rl.ErrClosed
		}
		var depth int32 = 1
		if h != nil {
			// h may have been answered and pushed again meanwhile: the
			// depth read is then stale, and the bound approximate; the
			// CompareAndSwap below still links m only to the real head.
			depth += h.depth.Load()
			if int(depth) > a.cfg.Mailbox {
				if err := a.waitRoom(ctx); err != nil {
					return err
				}
				continue
			}
		}
		m.next = h
		m.depth.Store(depth)
		if a.head.CompareAndSwap(h, m) {
			break
		}
	}
	if a.sleeping.Load() && a.sleeping.CompareAndSwap(true, false) {
		a.wake <- struct{}{} // the only token: it never blocks
	}
	return nil
}

// waitRoom waits until the actor empties the mailbox, ctx ends or the actor
// closes.
func (a *Actor) waitRoom(ctx context.Context) error {
	a.roomMu.Lock()
	room := a.room
	a.roomWaiters.Add(1)
	a.roomMu.Unlock()
	defer a.roomWaiters.Add(-1)
	// Registered before this look: an actor that empties the mailbox after
	// it sees the waiter and closes room.
	if h := a.head.Load(); h == nil || h == closedQueue || int(h.depth.Load()) < a.cfg.Mailbox {
		return nil
	}
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		return gaveUp(ctx)
	case <-a.done:
		return rl.ErrClosed
	}
}

// grab empties the mailbox and returns its messages, oldest first.
func (a *Actor) grab() *msg {
	h := a.head.Swap(nil)
	if h == nil {
		return nil
	}
	if a.roomWaiters.Load() > 0 {
		a.roomMu.Lock()
		close(a.room)
		a.room = make(chan struct{})
		a.roomMu.Unlock()
	}
	var first *msg
	for h != nil {
		next := h.next
		h.next = first
		first = h
		h = next
	}
	return first
}

// serve handles the list l, oldest first. One reading of the clock serves
// up to maxDrain messages: all of them were sent before the reading, so none
// is decided at a time earlier than it was asked.
func (a *Actor) serve(l *msg) {
	n := 0
	for m := l; m != nil; n++ {
		if n%maxDrain == 0 {
			if n > 0 {
				// The callers just answered are runnable on this
				// processor, whose run queue holds 256: let them run and
				// send again before answering more, rather than overflow
				// it to the global queue, whose lock every processor then
				// takes.
				runtime.Gosched()
			}
			a.tick()
		}
		// Read before handling: once answered, m belongs to its caller.
		next := m.next
		a.pending = next
		a.handle(m)
		m = next
	}
	a.pending = nil
}

// idle parks until a caller wakes it, and returns the mailbox's messages,
// or nil if Close came first.
func (a *Actor) idle() *msg {
	a.sleeping.Store(true)
	if a.head.Load() != nil {
		if !a.sleeping.CompareAndSwap(true, false) {
			<-a.wake // a caller saw it set and sends the token
		}
		return a.grab()
	}
	select {
	case <-a.wake:
		return a.grab()
	case <-a.done:
		return nil
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
			m.answer(result{err: errPanicked})
		}
		clean = false
	}()
	if a.pending != nil { // the rest of a list a panic interrupted
		a.serve(a.pending)
	}
	for {
		select {
		case <-a.done:
			a.drain()
			return true
		default:
		}
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
			// request the network just delivered. Yielding only when
			// someone was answered would cost a batch less CPU, but a
			// steady check behind a flood of batches would wait longer.
			a.serve(a.grab())
			runtime.Gosched()
			if len(a.batches) > 0 {
				osYield()
			}
			continue
		}
		l := a.grab()
		if l == nil {
			if l = a.idle(); l == nil {
				continue
			}
		}
		a.serve(l)
		a.publish()
		// The callers just answered are runnable on this processor: let
		// them run and send again, so that the next grab finds them all,
		// rather than serving the other processors' callers a few at a
		// time while these wait.
		runtime.Gosched()
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
				m.answer(result{err: errExpired})
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
	m.answer(res)
}

// decide decides up to n more requests of the batch m.
func (a *Actor) decide(m *msg, n int) error {
	end := min(len(m.reqs), m.decided+n)
	for ; m.decided < end; m.decided++ {
		d, err := a.store.Check(a.now, m.reqs[m.decided])
		if err != nil {
			return &rl.ItemError{Index: m.decided, Err: err}
		}
		m.out[m.decided] = d
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
	if err == nil && m.decided < len(m.reqs) {
		return
	}
	a.batches = a.batches[1:]
	a.publish() // before the reply: its caller may read Len next
	m.answer(result{err: err})
}

func (a *Actor) sweepStep() {
	a.tick()
	ex, del, done := a.store.Sweep(a.now, sweepBudget)
	a.swept.Examined += ex
	a.swept.Deleted += del
	a.publish()
	if !done {
		return
	}
	for _, m := range a.sweeping {
		m.answer(result{sweep: a.swept})
	}
	a.sweeping = a.sweeping[:0]
}

// drain answers everything still waiting with ErrClosed, and closes the
// mailbox to later pushes.
func (a *Actor) drain() {
	for _, m := range a.sweeping {
		m.answer(result{err: rl.ErrClosed})
	}
	a.sweeping = nil
	for _, m := range a.batches {
		m.answer(result{err: rl.ErrClosed})
	}
	a.batches = nil
	closeAll(a.pending)
	a.pending = nil
	closeAll(a.head.Swap(closedQueue))
}

// closeAll answers the messages of the list l that no caller gave up on
// with ErrClosed.
func closeAll(l *msg) {
	for m := l; m != nil; {
		next := m.next
		if m.state.CompareAndSwap(queued, abandoned) {
			m.answer(result{err: rl.ErrClosed})
		}
		m = next
	}
}

// gaveUp is the error of a caller whose context ended before the actor
// answered: it matches both the context's error and
// raterlimiter.ErrUnavailable.
func gaveUp(ctx context.Context) error {
	return fmt.Errorf("actor: no answer before the context ended: %w (%w)", rl.ErrUnavailable, ctx.Err())
}
