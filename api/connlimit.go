package api

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raterlimiter/raterlimiter/internal/clientip"
)

// Defaults of ConnLimits' zero fields.
const (
	// defaultMaxConnsPerIP is the most connections one client address may
	// hold: a sixteenth of defaultConcurrency, so one client cannot take
	// the server from the others.
	defaultMaxConnsPerIP = 1024
	// defaultMaxConnsPerProxy is the most connections one trusted proxy
	// may hold: it carries many clients.
	defaultMaxConnsPerProxy = 8192
	// defaultFirstByteTimeout is how long a new connection may stay silent
	// before its first request begins.
	defaultFirstByteTimeout = 2 * time.Second
	// defaultBodyBudget bounds the request bytes read and not yet answered,
	// over every connection: what clients that send bodies slowly, or never
	// finish them, can make the server hold.
	defaultBodyBudget = 32 << 20
	// bodyAllowance is what every connection may hold unanswered whatever
	// the budget: an ordinary request, so a full budget stops only the
	// connections holding big bodies.
	bodyAllowance = 16 << 10
)

// ConnLimits bounds what one client can hold of the server. The zero value
// means the defaults.
type ConnLimits struct {
	// PerIP is the most connections open at once from one address; more are
	// refused at accept. Default 1,024; negative: no bound.
	PerIP int
	// PerProxy replaces PerIP for the addresses of Proxies. Default 8,192;
	// negative: no bound.
	PerProxy int
	// Proxies are the trusted proxies (reverse proxies in gateway mode).
	Proxies clientip.Proxies
	// FirstByteTimeout closes a connection that sends nothing this long
	// after it was accepted. Default 2s.
	FirstByteTimeout time.Duration
	// BodyBudget bounds the bytes read from all connections and not yet
	// answered. Past it, a connection holding more than 16 KiB of an
	// unanswered request is closed, and a body announced bigger than that
	// is refused with 503 before it is read. Default 32 MiB; negative: no
	// bound.
	BodyBudget int64
}

// refusedAnswer is all a refused connection gets: a whole response, written
// without reading anything, then the connection closes.
var refusedAnswer = func() []byte {
	const body = `{"error":"api: too many connections; retry later"}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// limitListener refuses connections past a per-address bound and closes
// connections that stay silent, before fasthttp spends anything on them.
type limitListener struct {
	net.Listener
	lim ConnLimits
	// open counts the connections open by address and over every address,
	// and most bounds that total: past it a connection is refused here,
	// with Retry-After, before fasthttp's own bound (a bare 503) is reached.
	open    addrCount
	most    int
	refused prometheus.Counter
	// pending is the bytes read (or admitted) and not yet answered, over
	// every connection of every listener of the server; overBudget counts
	// connections closed for it.
	pending    *byteCount
	overBudget prometheus.Counter
	accepted   atomic.Uint32 // connections accepted, for their stripe of pending
	// lastOver is when a connection was last closed for the budget (Unix
	// ns); reclaiming is set while a goroutine waits to give the memory
	// back once the flood is over.
	lastOver   atomic.Int64
	reclaiming atomic.Bool
}

// reclaimAfter is how long after the flood's last connection closed (by
// the budget, or holding a big unanswered request within a minute of the
// budget's last closing) its memory is given back to the system.
const reclaimAfter = 2 * time.Second

// reclaimLater gives the flood's buffers back to the system once none of
// its connections has closed for reclaimAfter: without it the pools and
// the heap keep them for minutes. Two forced collections per flood.
func (l *limitListener) reclaimLater() {
	l.lastOver.Store(time.Now().UnixNano())
	if !l.reclaiming.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer l.reclaiming.Store(false)
		for {
			wait := time.Until(time.Unix(0, l.lastOver.Load()).Add(reclaimAfter))
			if wait <= 0 {
				// The flood's buffers sit in sync.Pools, which a
				// collection only moves to their victim caches: the
				// second one frees them, and gives them back.
				runtime.GC()
				debug.FreeOSMemory()
				return
			}
			time.Sleep(wait)
		}
	}()
}

// Accept returns the next connection within the bounds; the others are
// answered 503 and closed here.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := tcpIP(c.RemoteAddr())
		if !ok { // a unix socket: this host
			return c, nil
		}
		bound := l.lim.PerIP
		if l.lim.Proxies.Trusted(ip) {
			bound = l.lim.PerProxy
		}
		if !l.open.take(ip, bound, l.most) {
			l.refused.Inc()
			go refuse(c)
			continue
		}
		lc := &limitConn{Conn: c, l: l, ip: ip, firstBy: time.Now().Add(l.lim.FirstByteTimeout), stripe: l.accepted.Add(1)}
		_ = c.SetReadDeadline(lc.firstBy)
		return lc, nil
	}
}

func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(refusedAnswer)
	_ = c.Close()
}

// tcpIP is a TCP peer's IP address, IPv4 unmapped; false for any other
// kind of peer (a unix socket).
func tcpIP(addr net.Addr) (netip.Addr, bool) {
	a, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	return ip.Unmap(), ok
}

// limitConn is an accepted connection: it gives its place back on Close,
// and until its first byte arrives no read deadline is later than firstBy.
type limitConn struct {
	net.Conn
	l       *limitListener
	ip      netip.Addr
	firstBy time.Time
	// mu serialises the read deadline's changes until the first byte
	// (started, asked).
	mu sync.Mutex
	// started is set at the first byte read; asked is the read deadline
	// the server asked for before it.
	started atomic.Bool
	asked   time.Time
	// stripe is the connection's stripe of the listener's pending count.
	stripe    uint32
	closeOnce sync.Once
	// pending is the bytes read since the connection last wrote an answer,
	// and those reserved for the body being read; credit is what is left of
	// that reservation (only the serving goroutine reads and writes it).
	pending atomic.Int64
	credit  int64
	// head is the first bytes read since the last answer: the request
	// line of the request being read, for errorHandler (only the serving
	// goroutine reads and writes it).
	head  [128]byte
	headN int
}

// drainHead reads and drops the rest of a request head the server could
// not hold (up to its blank line, at most limit bytes, for at most d), so
// that the answer is not lost: a socket closed with bytes unread sends the
// peer a reset, and a proxy still writing the head reads that instead of
// the answer. It is called on the serving goroutine, after fasthttp gave
// the request up.
func (c *limitConn) drainHead(limit int, d time.Duration) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(d))
	var buf [4096]byte
	var tail []byte // the last bytes of the previous read
	for n := 0; n < limit; {
		m, err := c.Conn.Read(buf[:])
		if m > 0 {
			b := append(tail, buf[:m]...)
			if bytes.Contains(b, []byte("\r\n\r\n")) {
				break
			}
			tail = append(tail[:0], b[max(len(b)-3, 0):]...)
			n += m
		}
		if err != nil {
			break
		}
	}
	_ = c.Conn.SetReadDeadline(time.Time{})
}

// requestLine returns the request line of the request being read, as far
// as head holds it.
func (c *limitConn) requestLine() []byte {
	h := c.head[:c.headN]
	if i := bytes.IndexByte(h, '\n'); i >= 0 {
		h = h[:i]
	}
	return bytes.TrimRight(h, "\r")
}

// reserve admits a request body of n bytes before any of it is read past
// what fasthttp reads ahead: it reports false, and reserves nothing, when n
// is more than a connection may hold whatever the budget and the budget
// cannot hold it now. The reserved bytes count as read until the answer.
// head is the length of the request's line and headers: what was read past
// them is the body's, counted already, and not reserved twice.
func (c *limitConn) reserve(n, head int64) bool {
	ahead := min(max(c.pending.Load()-head, 0), n)
	more := n - ahead
	if b := c.l.lim.BodyBudget; b >= 0 && n > bodyAllowance && c.l.pending.load()+more > b {
		c.l.overBudget.Inc()
		c.l.reclaimLater()
		return false
	}
	c.pending.Add(more)
	c.l.pending.add(c.stripe, more)
	c.credit = more
	return true
}

// byteCount is a total of bytes that every connection adds to on each
// request and that is read only to check the budget of a big request: it
// is striped over cache lines, so that connections served on different
// processors do not contend for one word. Each connection adds to one
// stripe, and takes back from it what it added.
type byteCount struct {
	stripes [8]struct {
		n atomic.Int64
		_ [56]byte
	}
}

func (b *byteCount) add(stripe uint32, n int64) {
	b.stripes[stripe%uint32(len(b.stripes))].n.Add(n)
}

// load returns the total.
func (b *byteCount) load() int64 {
	var sum int64
	for i := range b.stripes {
		sum += b.stripes[i].n.Load()
	}
	return sum
}

// errOverBudget closes a connection holding a big unanswered request while
// the server holds its whole budget of such bytes.
var errOverBudget = errors.New("api: request bytes held past the server's budget")

func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if c.headN < len(c.head) {
			c.headN += copy(c.head[c.headN:], p[:n])
		}
		if !c.started.Load() {
			// The server's own deadline from now on, instead of firstBy.
			c.mu.Lock()
			c.started.Store(true)
			_ = c.Conn.SetReadDeadline(c.asked)
			c.mu.Unlock()
		}
		more := int64(n)
		if c.credit > 0 { // bytes of a reserved body: counted already
			used := min(c.credit, more)
			c.credit -= used
			more -= used
		}
		if more == 0 {
			return n, err
		}
		mine := c.pending.Add(more)
		c.l.pending.add(c.stripe, more)
		if b := c.l.lim.BodyBudget; b >= 0 && mine > bodyAllowance && c.l.pending.load() > b {
			c.l.overBudget.Inc()
			c.l.reclaimLater()
			_ = c.Close()
			return 0, errOverBudget
		}
	}
	return n, err
}

// Write answers the request read so far: its bytes leave the budget.
func (c *limitConn) Write(p []byte) (int, error) {
	c.credit, c.headN = 0, 0
	if held := c.pending.Swap(0); held != 0 {
		c.l.pending.add(c.stripe, -held)
	}
	return c.Conn.Write(p)
}

func (c *limitConn) SetReadDeadline(t time.Time) error {
	if !c.started.Load() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.started.Load() {
			c.asked = t
			if t.IsZero() || t.After(c.firstBy) {
				t = c.firstBy
			}
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.open.give(c.ip)
		if held := c.pending.Swap(0); held != 0 {
			c.l.pending.add(c.stripe, -held)
			// A big request left unanswered during a flood the budget
			// met: its buffers are the flood's too.
			if held > bodyAllowance && time.Since(time.Unix(0, c.l.lastOver.Load())) < time.Minute {
				c.l.reclaimLater()
			}
		}
	})
	return err
}
