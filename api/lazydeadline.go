package api

import (
	"sync"
	"sync/atomic"
	"time"
)

// Lazy deadlines. fasthttp sets three socket deadlines a request on a
// keep-alive connection (the idle wait, the read, the write), each a timer
// change under the poller's lock and two clock readings: about a twentieth
// of the sidecar's CPU a request (docs/perf-notes.md, "The sidecar's HTTP
// path"). A limitConn takes them as asked, to the nanosecond, and puts one
// on the socket only when it comes near: a watchdog goroutine of the
// listener looks at every connection each tick, and arms the deadlines due
// within the horizon (four ticks). A request answered well within its
// timeouts, the usual case, touches no timer at all; a deadline that comes
// due fires when it would have, as long as the watchdog keeps to its ticks
// (a tick is a twentieth of the shortest timeout, at most 250 ms).
//
// The handshake between the connection's goroutine, which changes what it
// wants, and the watchdog, which arms it: each writes its own word and then
// reads the other's (want then armed; armed then want), so at least one of
// them sees the other's change. The connection that sees a deadline armed
// settles it under limitConn.mu: the socket gets what is wanted if it is
// due soon, no deadline otherwise. The watchdog that sees want change under
// it arms nothing. Only limitConn.mu's holder changes armed.

// lazyDeadline is one of a connection's deadlines, as Unix nanoseconds; 0
// is none.
type lazyDeadline struct {
	want  atomic.Int64 // what the server asked for last
	armed atomic.Int64 // what the socket has
}

// Bounds on the watchdog's tick.
const (
	maxWatchTick = 250 * time.Millisecond
	minWatchTick = time.Millisecond
)

// watchTick is the watchdog's period for connections whose shortest timeout
// is shortest; no timeout: the longest tick.
func watchTick(timeouts ...time.Duration) time.Duration {
	tick := maxWatchTick
	for _, d := range timeouts {
		if d > 0 {
			tick = min(tick, d/20)
		}
	}
	return max(tick, minWatchTick)
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if ns := t.UnixNano(); ns != 0 {
		return ns
	}
	return 1
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// watchdog arms the deadlines of a listener's connections as they come
// near.
type watchdog struct {
	tick, horizon int64 // ns
	// now is the time of the last tick, in Unix ns (a lower bound on the
	// time: a deadline within the horizon of it is armed at once).
	now atomic.Int64
	// clock reads the time; time.Now but in tests.
	clock func() time.Time

	mu    sync.Mutex
	conns map[*limitConn]struct{}
	due   []*limitConn // scratch of one tick

	stop     chan struct{}
	stopOnce sync.Once
	// closed is set when the watchdog stops: from then on every deadline
	// is armed as it is asked for.
	closed atomic.Bool
}

func newWatchdog(tick time.Duration, clock func() time.Time) *watchdog {
	if clock == nil {
		clock = time.Now
	}
	w := &watchdog{tick: int64(tick), horizon: 4 * int64(tick), clock: clock, conns: map[*limitConn]struct{}{}, stop: make(chan struct{})}
	w.now.Store(clock().UnixNano())
	return w
}

// run ticks until close.
func (w *watchdog) run() {
	t := time.NewTicker(time.Duration(w.tick))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.sweep()
		case <-w.stop:
			return
		}
	}
}

// close stops the watchdog: it arms every deadline wanted, and the
// connections arm theirs themselves from then on (their listener closed,
// they may still be serving a request).
func (w *watchdog) close() {
	w.stopOnce.Do(func() {
		w.closed.Store(true)
		close(w.stop)
		w.mu.Lock()
		conns := make([]*limitConn, 0, len(w.conns))
		for c := range w.conns {
			conns = append(conns, c)
		}
		w.mu.Unlock()
		for _, c := range conns {
			_ = c.settle(true)
			_ = c.settle(false)
		}
	})
}

func (w *watchdog) add(c *limitConn) {
	w.mu.Lock()
	w.conns[c] = struct{}{}
	w.mu.Unlock()
}

func (w *watchdog) remove(c *limitConn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// soon reports whether the deadline ns is to be armed now: it is within
// the horizon, or the watchdog has stopped.
func (w *watchdog) soon(ns int64) bool {
	return ns != 0 && (ns-w.now.Load() < w.horizon || w.closed.Load())
}

// sweep is one tick: it arms every deadline due within the horizon.
func (w *watchdog) sweep() {
	now := w.clock().UnixNano()
	w.now.Store(now)
	w.mu.Lock()
	due := w.due[:0]
	for c := range w.conns {
		if c.rd.pending(now, w.horizon) || c.wd.pending(now, w.horizon) {
			due = append(due, c)
		}
	}
	w.mu.Unlock()
	for i, c := range due {
		c.watchArm(true, now, w.horizon)
		c.watchArm(false, now, w.horizon)
		due[i] = nil
	}
	w.due = due[:0]
}

// pending reports whether d wants a deadline within horizon of now that
// the socket does not have.
func (d *lazyDeadline) pending(now, horizon int64) bool {
	want := d.want.Load()
	return want != 0 && want != d.armed.Load() && want-now < horizon
}

// deadline returns c's read or write deadline.
func (c *limitConn) deadline(read bool) *lazyDeadline {
	if read {
		return &c.rd
	}
	return &c.wd
}

func (c *limitConn) setSocket(read bool, ns int64) error {
	if read {
		return c.Conn.SetReadDeadline(fromUnixNano(ns))
	}
	return c.Conn.SetWriteDeadline(fromUnixNano(ns))
}

// armNow puts t on the socket at once, as wanted and armed: the watchdog
// leaves it alone.
func (c *limitConn) armNow(read bool, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ns := c.deadline(read), unixNano(t)
	d.want.Store(ns)
	d.armed.Store(ns)
	_ = c.setSocket(read, ns)
}

// want records the deadline the server asks for; the socket gets it now
// only if it is due soon or another is armed.
func (c *limitConn) want(read bool, t time.Time) error {
	d := c.deadline(read)
	ns := unixNano(t)
	d.want.Store(ns)
	if d.armed.Load() != 0 || c.l.watch.soon(ns) {
		return c.settle(read)
	}
	return nil
}

// settle gives the socket the deadline wanted if it is due soon, none
// otherwise (the watchdog arms it when it comes near).
func (c *limitConn) settle(read bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settleLocked(read)
}

func (c *limitConn) settleLocked(read bool) error {
	d := c.deadline(read)
	if read && !c.started.Load() {
		return nil // until the first byte, Read's own (firstBy)
	}
	ns := d.want.Load()
	if !c.l.watch.soon(ns) {
		ns = 0
	}
	if d.armed.Load() == ns {
		return nil
	}
	d.armed.Store(ns)
	return c.setSocket(read, ns)
}

// watchArm is the watchdog's: it arms the deadline wanted if it is due
// within horizon of now and the socket does not have it.
func (c *limitConn) watchArm(read bool, now, horizon int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.deadline(read)
	if read && !c.started.Load() {
		return
	}
	ns := d.want.Load()
	was := d.armed.Load()
	if ns == 0 || ns == was || ns-now >= horizon {
		return
	}
	d.armed.Store(ns)
	if d.want.Load() != ns {
		// Changed under us: its connection sees armed and settles it
		// (after us, under mu); the socket keeps what it had.
		d.armed.Store(was)
		return
	}
	_ = c.setSocket(read, ns)
}
