package rls

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/raterlimiter/raterlimiter/internal/check"
)

// Defaults of Limits' zero fields.
const (
	// DefaultMaxConnsPerIP is the most connections one client address may
	// hold on the RLS listener: an Envoy opens one a worker thread, and
	// more when a connection's streams are all taken.
	DefaultMaxConnsPerIP = 64
	// DefaultMaxConns is the most connections the RLS listener holds.
	DefaultMaxConns = 1024
	// MaxHandshakesPerIP is the most connections one client address may
	// have in their handshake at once (TLS, then the HTTP/2 preface):
	// a client stalling its handshakes holds no more than this of the
	// listener, whatever its connections' bound.
	MaxHandshakesPerIP = 16
	// DefaultMaxStreams is the most calls one connection may have open at
	// once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a call whose answer
	// the caller does not read stays open, so this also bounds what such a
	// caller pins.
	DefaultMaxStreams = 100
	// DefaultArrivingBudget bounds the bytes of requests begun and not
	// yet whole, over every connection: what callers that announce big
	// requests and stall can make the server hold.
	DefaultArrivingBudget = 8 << 20
	// DefaultReceiveTimeout is how long a call's request may take to
	// arrive, from its headers to its last byte.
	DefaultReceiveTimeout = 2 * time.Second
	// DefaultHandshakeTimeout is how long a new connection may take to
	// send its HTTP/2 preface.
	DefaultHandshakeTimeout = 2 * time.Second
	// DefaultIdleTimeout closes a connection with no call open this long.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultKeepalive is how long a connection may send nothing before
	// the server pings it; one that does not answer within
	// KeepaliveAckTimeout is closed, with what it held.
	DefaultKeepalive = 30 * time.Second
	// KeepaliveAckTimeout is how long the server waits for a ping's answer.
	KeepaliveAckTimeout = 10 * time.Second
	// KeepaliveMinTime is the shortest interval at which a client may ping;
	// a client pinging more often is sent GOAWAY and disconnected.
	KeepaliveMinTime = 10 * time.Second
	// Window is the HTTP/2 flow-control window the server grants, per
	// call and per connection. A fixed window turns off grpc-go's window
	// growth (up to 16 MiB a call, by its bandwidth estimate), so a call
	// is sent no more than this before the server reads its request, and
	// then no more than the request's announced length, within
	// MaxRequestBytes.
	Window = 64 << 10
	// MaxHeaderBytes bounds the header block of a call.
	MaxHeaderBytes = 16 << 10
)

// EnvoyHeaderBytes is Envoy's default bound on the headers of a request
// (its max_request_headers_kb, 60): the most a client can make Envoy copy
// into descriptors from one request's headers, path included.
const EnvoyHeaderBytes = 60 << 10

// MaxRequestBytes is the largest ShouldRateLimit request the server reads
// (a longer one is refused with ResourceExhausted before it is buffered):
// maxDescriptors descriptors of 16 entries whose keys and values take
// maxKeyBytes together, with each entry's and descriptor's protobuf
// framing, a limit override and hits_addend, a domain of maxKeyBytes, and
// room for twice EnvoyHeaderBytes: a route that copies a client's headers
// into up to two descriptors, whatever the client sends within Envoy's
// default bound, is read and counted (a descriptor longer than maxKeyBytes
// is counted under its digest).
func MaxRequestBytes(maxDescriptors, maxKeyBytes int) int {
	const (
		perEntry      = 16 // entry, key and value tags and lengths
		perDescriptor = 64 // its own tag and length, a limit override, hits_addend
		perRequest    = 1024
	)
	return maxDescriptors*(maxKeyBytes+DefaultMaxEntries*perEntry+perDescriptor) + maxKeyBytes + perRequest + 2*EnvoyHeaderBytes
}

// Limits bounds what one client can take of the RLS listener. The zero
// value means the defaults; a negative count means no bound.
type Limits struct {
	// MaxConnsPerIP and MaxConns bound the connections open at once, from
	// one address and in all. A new connection past either takes the
	// place of the connection idle longest (no call in flight) among those
	// of its address, or among all: that one is closed. With none idle, the
	// new one is closed at accept. Defaults DefaultMaxConnsPerIP,
	// DefaultMaxConns.
	MaxConnsPerIP, MaxConns int
	// MaxStreams bounds the calls open at once on one connection. Default
	// DefaultMaxStreams.
	MaxStreams int
	// ArrivingBudget bounds the bytes of requests begun and not yet whole,
	// over every connection, as read off the wire. Past it, a connection
	// that holds more than MaxRequestBytes of such bytes is closed. Default
	// DefaultArrivingBudget; negative: no bound.
	ArrivingBudget int64
	// MaxRequestBytes bounds one request message. Default
	// MaxRequestBytes(DefaultMaxDescriptors, check.DefaultMaxIDBytes).
	MaxRequestBytes int
	// ReceiveTimeout bounds the time a request takes to arrive; a call
	// past it ends with DeadlineExceeded and its bytes are dropped. Default
	// DefaultReceiveTimeout. A call whose own deadline comes first is left
	// to it.
	ReceiveTimeout time.Duration
	// HandshakeTimeout, IdleTimeout and Keepalive: see their defaults.
	HandshakeTimeout, IdleTimeout, Keepalive time.Duration
}

func (l Limits) withDefaults() Limits {
	l.MaxConnsPerIP = cmp.Or(l.MaxConnsPerIP, DefaultMaxConnsPerIP)
	l.MaxConns = cmp.Or(l.MaxConns, DefaultMaxConns)
	l.MaxStreams = cmp.Or(l.MaxStreams, DefaultMaxStreams)
	l.ArrivingBudget = cmp.Or(l.ArrivingBudget, DefaultArrivingBudget)
	l.MaxRequestBytes = cmp.Or(l.MaxRequestBytes, MaxRequestBytes(DefaultMaxDescriptors, check.DefaultMaxIDBytes))
	positive := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	positive(&l.ReceiveTimeout, DefaultReceiveTimeout)
	positive(&l.HandshakeTimeout, DefaultHandshakeTimeout)
	positive(&l.IdleTimeout, DefaultIdleTimeout)
	positive(&l.Keepalive, DefaultKeepalive)
	return l
}

// Guard applies Limits to a gRPC server and its listener: Listener bounds
// the connections, ServerOptions the calls. It is safe for concurrent use.
type Guard struct {
	lim Limits

	mu    sync.Mutex
	addrs map[netip.Addr]*addrConns
	live  map[*guardConn]struct{}
	// arriving is the bytes of requests begun and not yet whole, over
	// every connection.
	arriving atomic.Int64
	// tick orders the moments connections fall idle: the one with the
	// lowest idle mark has been idle longest.
	tick atomic.Int64

	connsRefused   prometheus.Counter
	connsEvicted   prometheus.Counter
	overBudget     prometheus.Counter
	receiveTimeout prometheus.Counter
	open           prometheus.GaugeFunc
}

// addrConns are one client address's connections: all, and those still in
// their handshake.
type addrConns struct{ conns, handshaking int }

// NewGuard returns a Guard for l.
func NewGuard(l Limits) *Guard {
	g := &Guard{
		lim:   l.withDefaults(),
		addrs: map[netip.Addr]*addrConns{},
		live:  map[*guardConn]struct{}{},
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_connections_refused_total",
			Help: "RLS connections closed at accept: their address held its bound of connections or of handshakes, or the listener its bound of connections, with none idle to give way.",
		}),
		connsEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_connections_evicted_total",
			Help: "Idle RLS connections closed to admit a new one: their address, or the listener, held its bound of connections.",
		}),
		overBudget: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_connections_over_budget_total",
			Help: "RLS connections closed for holding unfinished requests while the server held its budget of them.",
		}),
		receiveTimeout: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_receive_timeouts_total",
			Help: "RLS calls ended because their request did not arrive within the receive timeout.",
		}),
	}
	g.open = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "raterlimiter_rls_connections",
		Help: "RLS connections open.",
	}, func() float64 {
		g.mu.Lock()
		defer g.mu.Unlock()
		return float64(len(g.live))
	})
	return g
}

// Limits returns the limits in force, defaults applied.
func (g *Guard) Limits() Limits { return g.lim }

// Collectors are the guard's series for /metrics.
func (g *Guard) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.connsRefused, g.connsEvicted, g.overBudget, g.receiveTimeout, g.open}
}

// ServerOptions are the grpc.Server options that apply the limits.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	l := g.lim
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(max(l.MaxStreams, 0))),
		grpc.MaxRecvMsgSize(l.MaxRequestBytes),
		grpc.MaxHeaderListSize(MaxHeaderBytes),
		grpc.InitialWindowSize(Window),
		grpc.InitialConnWindowSize(Window),
		grpc.ConnectionTimeout(l.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.IdleTimeout, Time: l.Keepalive, Timeout: KeepaliveAckTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.InTapHandle(g.tap),
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

// Listener returns ln bounded by MaxConnsPerIP and MaxConns.
func (g *Guard) Listener(ln net.Listener) net.Listener { return &guardListener{Listener: ln, g: g} }

type guardListener struct {
	net.Listener
	g *Guard
}

// Accept returns the next connection within the bounds, making room as
// Limits.MaxConnsPerIP says; one refused (past MaxHandshakesPerIP, or with
// no connection idle to give way) is closed at once, before grpc-go spends
// anything on it.
func (l *guardListener) Accept() (net.Conn, error) {
	g := l.g
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc, victim := g.admit(c)
		if victim != nil {
			victim.cut()
		}
		if gc == nil {
			_ = c.Close()
			continue
		}
		return gc, nil
	}
}

// admit counts c in, making room as Accept says; it returns nil when c is
// refused, and the connection closed to make room, if any.
func (g *Guard) admit(c net.Conn) (gc, victim *guardConn) {
	ip, hasIP := addrIP(c.RemoteAddr())
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.addrs[ip]
	if hasIP && a != nil {
		if a.handshaking >= MaxHandshakesPerIP {
			g.connsRefused.Inc()
			return nil, nil
		}
		if g.lim.MaxConnsPerIP >= 0 && a.conns >= g.lim.MaxConnsPerIP {
			if victim = g.idlest(&ip); victim == nil {
				g.connsRefused.Inc()
				return nil, nil
			}
		}
	}
	if victim == nil && g.lim.MaxConns >= 0 && len(g.live) >= g.lim.MaxConns {
		if victim = g.idlest(nil); victim == nil {
			g.connsRefused.Inc()
			return nil, nil
		}
	}
	if victim != nil {
		g.connsEvicted.Inc()
		g.releaseLocked(victim)
	}
	gc = &guardConn{Conn: c, g: g, ip: ip, hasIP: hasIP, handshaking: true,
		m: meter{streams: map[uint32]*message{}, maxStreams: trackedStreams(g.lim.MaxStreams)}}
	gc.idle.Store(g.tick.Add(1))
	g.live[gc] = struct{}{}
	if hasIP {
		if a == nil {
			a = &addrConns{}
			g.addrs[ip] = a
		}
		a.conns++
		a.handshaking++
	}
	return gc, victim
}

// idlest is the connection with no call in flight that has been so
// longest, of the address ip (nil: of any); nil when every one has a call
// in flight. g.mu is held.
func (g *Guard) idlest(ip *netip.Addr) *guardConn {
	var best *guardConn
	var mark int64
	for c := range g.live {
		if ip != nil && (!c.hasIP || c.ip != *ip) || c.inflight.Load() > 0 {
			continue
		}
		if m := c.idle.Load(); best == nil || m < mark {
			best, mark = c, m
		}
	}
	return best
}

// releaseLocked takes c out of the counts, once. g.mu is held.
func (g *Guard) releaseLocked(c *guardConn) {
	if c.released {
		return
	}
	c.released = true
	delete(g.live, c)
	if !c.hasIP {
		return
	}
	a := g.addrs[c.ip]
	a.conns--
	if c.handshaking {
		a.handshaking--
	}
	if a.conns == 0 {
		delete(g.addrs, c.ip)
	}
}

// handshaken counts c's handshake as over.
func (g *Guard) handshaken(c *guardConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !c.handshaking {
		return
	}
	c.handshaking = false
	if c.hasIP && !c.released {
		g.addrs[c.ip].handshaking--
	}
}

type guardConn struct {
	net.Conn
	g     *Guard
	ip    netip.Addr
	hasIP bool
	// m is read and written by the connection's one reader only.
	m meter
	// held is what the connection counts in the guard's arriving bytes.
	mu     sync.Mutex
	held   int64
	closed bool

	// The calls in flight: streams the client opened that neither side
	// has ended, under smu with the writer's frame reader.
	smu      sync.Mutex
	w        frameHeads
	inflight atomic.Int32
	calls    []uint32
	ended    []uint32 // scratch of Write
	// idle is the guard's tick when the connection last had no call in
	// flight (its accept, or its last call's end).
	idle atomic.Int64

	// Under the guard's mu: whether the connection is out of its counts,
	// and whether it is still in its handshake.
	released, handshaking bool
}

// errOverBudget closes a connection holding unfinished requests while the
// server holds its budget of them.
var errOverBudget = errors.New("rls: unfinished requests held past the server's budget")

// errTooManyStreams closes a connection sending request bytes on more
// streams than it may have open.
var errTooManyStreams = errors.New("rls: request bytes on more streams than a connection may have open")

// trackedStreams is how many streams the meter follows on one connection:
// the MaxStreams a client may have open, and as many again of streams the
// server has ended (a receive timeout) while the client still sends, until
// they go stale.
func trackedStreams(maxStreams int) int { return 2*maxStreams + 16 }

// Read meters what the connection reads: the bytes of requests begun and
// not yet whole, the end of its handshake, and the calls it opens and
// resets. Past the budget, a connection holding more than the largest
// request of them is closed.
func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		g := c.g
		prefaced := c.m.prefaced()
		c.m.read(p[:n], time.Now(), g.lim.ReceiveTimeout+time.Second)
		if !prefaced && c.m.prefaced() {
			g.handshaken(c)
		}
		if len(c.m.opened) > 0 || len(c.m.reset) > 0 {
			c.track(c.m.opened, c.m.reset)
			c.m.opened, c.m.reset = c.m.opened[:0], c.m.reset[:0]
		}
		if c.m.overflow {
			g.overBudget.Inc()
			_ = c.Close()
			return 0, errTooManyStreams
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return n, err
		}
		all := g.arriving.Add(c.m.pending - c.held)
		c.held = c.m.pending
		c.mu.Unlock()
		if b := g.lim.ArrivingBudget; b >= 0 && all > b && c.m.pending > int64(g.lim.MaxRequestBytes) {
			g.overBudget.Inc()
			_ = c.Close()
			return 0, errOverBudget
		}
	}
	return n, err
}

// Write meters what the server writes: the calls it ends.
func (c *guardConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.smu.Lock()
	c.ended = c.w.scan(p[:n], c.ended[:0])
	if len(c.ended) > 0 {
		c.endLocked(c.ended)
	}
	c.smu.Unlock()
	return n, err
}

// track counts the calls the client opened in flight, and those it reset
// out of it.
func (c *guardConn) track(opened, reset []uint32) {
	c.smu.Lock()
	defer c.smu.Unlock()
	for _, id := range opened {
		// A client opens at most MaxStreams calls at once; streams past
		// twice that are ones the server refuses, not followed.
		if len(c.calls) < trackedStreams(c.g.lim.MaxStreams) {
			c.calls = append(c.calls, id)
		}
	}
	c.endLocked(reset)
}

// endLocked takes the calls ids out of flight; the connection falls idle
// when none is left. c.smu is held.
func (c *guardConn) endLocked(ids []uint32) {
	for _, id := range ids {
		if i := slices.Index(c.calls, id); i >= 0 {
			c.calls[i] = c.calls[len(c.calls)-1]
			c.calls = c.calls[:len(c.calls)-1]
			if len(c.calls) == 0 {
				c.idle.Store(c.g.tick.Add(1))
			}
		}
	}
	c.inflight.Store(int32(len(c.calls)))
}

// Close closes the connection and takes it out of the guard's counts.
func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// release takes the connection out of the guard's counts and its
// unfinished requests out of the arriving bytes, once.
func (c *guardConn) release() {
	g := c.g
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		g.arriving.Add(-c.held)
		c.held = 0
	}
	c.mu.Unlock()
	g.mu.Lock()
	g.releaseLocked(c)
	g.mu.Unlock()
}

// cut closes a connection the guard has taken out of its counts to admit
// another: the socket under TLS, so that no close alert waits on a client
// that reads nothing. grpc-go's reader then fails and closes the rest.
func (c *guardConn) cut() {
	raw := c.Conn
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	_ = raw.Close()
	c.release()
}

// addrIP is a TCP address's IP; a unix socket has none (this host).
func addrIP(a net.Addr) (netip.Addr, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(t.IP)
	return ip.Unmap(), ok
}

// errReceiveTimeout is the cause of a call cancelled because its request
// did not arrive in time.
var errReceiveTimeout = errors.New("rls: the request did not arrive within the receive timeout")

// arrival is a call whose request is arriving: its receive timeout runs
// until the request is read or the call ends.
type arrival struct {
	g      *Guard
	done   atomic.Bool
	cancel context.CancelCauseFunc
	timer  *time.Timer
	stop   func() bool
}

type arrivalKey struct{}

// tap runs on the connection's reader as a call's headers arrive: it
// starts the call's receive timeout. A call whose own deadline
// (grpc-timeout, which Envoy's filter always sends) comes within the
// receive timeout needs none: grpc-go's timer ends it at that deadline,
// request arrived or not (DeadlineExceeded, not counted as a receive
// timeout), and the call costs no timer, contexts or allocations of ours.
func (g *Guard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= g.lim.ReceiveTimeout {
		return ctx, nil
	}
	a := &arrival{g: g}
	ctx, a.cancel = context.WithCancelCause(ctx)
	a.timer = time.AfterFunc(g.lim.ReceiveTimeout, a.expire)
	a.stop = context.AfterFunc(ctx, func() { a.arrived() })
	return context.WithValue(ctx, arrivalKey{}, a), nil
}

// arrived stops the call's receive timeout; it reports false if the
// timeout came first.
func (a *arrival) arrived() bool {
	if !a.done.CompareAndSwap(false, true) {
		return false
	}
	a.timer.Stop()
	a.stop()
	return true
}

func (a *arrival) expire() {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	a.stop()
	a.g.receiveTimeout.Inc()
	a.cancel(errReceiveTimeout)
}

// errLate answers a call whose request arrived after the receive timeout.
var errLate = status.Error(codes.DeadlineExceeded, "rls: the request did not arrive within the receive timeout")

// unary runs once a unary call's request has been read.
func (g *Guard) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if a, ok := ctx.Value(arrivalKey{}).(*arrival); ok && !a.arrived() {
		return nil, errLate
	}
	return handler(ctx, req)
}

// stream runs as a streaming call starts (health's Watch, reflection):
// its first request arrives under the same timeout as a unary call's.
func (g *Guard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	a, ok := ss.Context().Value(arrivalKey{}).(*arrival)
	if !ok {
		return handler(srv, ss)
	}
	return handler(srv, &firstArrival{ServerStream: ss, a: a})
}

type firstArrival struct {
	grpc.ServerStream
	a     *arrival
	first bool
}

func (s *firstArrival) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if !s.first {
		s.first = true
		if !s.a.arrived() && err == nil {
			return errLate
		}
	}
	return err
}
