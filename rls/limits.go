package rls

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Defaults of Limits' zero fields.
const (
	// DefaultMaxConnsPerIP is the most connections one client address may
	// hold on the RLS listener: an Envoy opens one a worker thread, and
	// more when a connection's streams are all taken.
	DefaultMaxConnsPerIP = 64
	// DefaultMaxConns is the most connections the RLS listener holds.
	DefaultMaxConns = 1024
	// DefaultMaxStreams is the most calls one connection may have open at
	// once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a call whose answer
	// the caller does not read stays open, so this also bounds what such a
	// caller pins.
	DefaultMaxStreams = 100
	// DefaultMaxArrivingPerIP is the most calls from one client address
	// whose request has not yet fully arrived: what one address can make
	// the server buffer is this many times MaxRequestBytes.
	DefaultMaxArrivingPerIP = 64
	// DefaultMaxArriving is the same bound over every address.
	DefaultMaxArriving = 1024
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

// MaxRequestBytes is the largest ShouldRateLimit request the server reads
// (a longer one is refused with ResourceExhausted before it is buffered):
// maxDescriptors descriptors of 16 entries whose keys and values take
// maxKeyBytes together (the most one descriptor's counter key may take),
// with each entry's and descriptor's protobuf framing, a limit override and
// hits_addend, and a domain of maxKeyBytes.
func MaxRequestBytes(maxDescriptors, maxKeyBytes int) int {
	const (
		perEntry      = 16 // entry, key and value tags and lengths
		perDescriptor = 64 // its own tag and length, a limit override, hits_addend
		perRequest    = 1024
	)
	return maxDescriptors*(maxKeyBytes+DefaultMaxEntries*perEntry+perDescriptor) + maxKeyBytes + perRequest
}

// Limits bounds what one client can take of the RLS listener. The zero
// value means the defaults; a negative count means no bound.
type Limits struct {
	// MaxConnsPerIP and MaxConns bound the connections open at once, from
	// one address and in all; past either a new connection is closed at
	// accept. Defaults DefaultMaxConnsPerIP, DefaultMaxConns.
	MaxConnsPerIP, MaxConns int
	// MaxStreams bounds the calls open at once on one connection. Default
	// DefaultMaxStreams.
	MaxStreams int
	// MaxArrivingPerIP and MaxArriving bound the calls whose request is
	// still arriving, from one address and in all; past either a new call
	// is refused with ResourceExhausted. Defaults DefaultMaxArrivingPerIP,
	// DefaultMaxArriving.
	MaxArrivingPerIP, MaxArriving int
	// MaxRequestBytes bounds one request message. Default
	// MaxRequestBytes(DefaultMaxDescriptors, raterlimiter.DefaultMaxIDBytes).
	MaxRequestBytes int
	// ReceiveTimeout bounds the time a request takes to arrive; a call
	// past it ends with DeadlineExceeded and its bytes are dropped. Default
	// DefaultReceiveTimeout.
	ReceiveTimeout time.Duration
	// HandshakeTimeout, IdleTimeout and Keepalive: see their defaults.
	HandshakeTimeout, IdleTimeout, Keepalive time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxConnsPerIP, DefaultMaxConnsPerIP)
	def(&l.MaxConns, DefaultMaxConns)
	def(&l.MaxStreams, DefaultMaxStreams)
	def(&l.MaxArrivingPerIP, DefaultMaxArrivingPerIP)
	def(&l.MaxArriving, DefaultMaxArriving)
	def(&l.MaxRequestBytes, MaxRequestBytes(DefaultMaxDescriptors, 1024))
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&l.ReceiveTimeout, DefaultReceiveTimeout)
	dur(&l.HandshakeTimeout, DefaultHandshakeTimeout)
	dur(&l.IdleTimeout, DefaultIdleTimeout)
	dur(&l.Keepalive, DefaultKeepalive)
	return l
}

// Guard applies Limits to a gRPC server and its listener: Listener bounds
// the connections, ServerOptions the calls. It is safe for concurrent use.
type Guard struct {
	lim Limits

	mu       sync.Mutex
	conns    map[netip.Addr]int
	nconns   int
	arriving map[netip.Addr]int
	narr     int

	connsRefused   prometheus.Counter
	callsRefused   prometheus.Counter
	receiveTimeout prometheus.Counter
}

// NewGuard returns a Guard for l.
func NewGuard(l Limits) *Guard {
	return &Guard{
		lim:   l.withDefaults(),
		conns: map[netip.Addr]int{}, arriving: map[netip.Addr]int{},
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_connections_refused_total",
			Help: "RLS connections closed at accept: their address, or the listener, held its bound of connections.",
		}),
		callsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_calls_refused_total",
			Help: "RLS calls refused (ResourceExhausted) at their headers: their address, or the server, held its bound of requests still arriving.",
		}),
		receiveTimeout: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_receive_timeouts_total",
			Help: "RLS calls ended because their request did not arrive within the receive timeout.",
		}),
	}
}

// Limits returns the limits in force, defaults applied.
func (g *Guard) Limits() Limits { return g.lim }

// Collectors are the guard's series for /metrics.
func (g *Guard) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.connsRefused, g.callsRefused, g.receiveTimeout}
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

// Accept returns the next connection within the bounds and closes the
// others at once, before grpc-go spends anything on them.
func (l *guardListener) Accept() (net.Conn, error) {
	g := l.g
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := addrIP(c.RemoteAddr())
		g.mu.Lock()
		if (g.lim.MaxConns >= 0 && g.nconns >= g.lim.MaxConns) ||
			(ok && g.lim.MaxConnsPerIP >= 0 && g.conns[ip] >= g.lim.MaxConnsPerIP) {
			g.mu.Unlock()
			g.connsRefused.Inc()
			_ = c.Close()
			continue
		}
		g.nconns++
		if ok {
			g.conns[ip]++
		}
		g.mu.Unlock()
		return &guardConn{Conn: c, g: g, ip: ip, hasIP: ok}, nil
	}
}

type guardConn struct {
	net.Conn
	g     *Guard
	ip    netip.Addr
	hasIP bool
	once  sync.Once
}

func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		g := c.g
		g.mu.Lock()
		g.nconns--
		if c.hasIP {
			release(g.conns, c.ip)
		}
		g.mu.Unlock()
	})
	return err
}

func release(m map[netip.Addr]int, ip netip.Addr) {
	if n := m[ip]; n <= 1 {
		delete(m, ip)
	} else {
		m[ip] = n - 1
	}
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

// arrival is a call whose request is arriving: it holds a place in the
// guard's counts until the request is read, the call ends, or the receive
// timeout cancels the call, whichever comes first.
type arrival struct {
	g      *Guard
	ip     netip.Addr
	hasIP  bool
	done   atomic.Bool
	cancel context.CancelCauseFunc
	timer  *time.Timer
	stop   func() bool
}

type arrivalKey struct{}

// tap runs on the connection's reader, as a call's headers arrive: it
// refuses the call past the bounds, and otherwise starts its receive
// timeout.
func (g *Guard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	var ip netip.Addr
	var hasIP bool
	if p, ok := peer.FromContext(ctx); ok {
		ip, hasIP = addrIP(p.Addr)
	}
	g.mu.Lock()
	if (g.lim.MaxArriving >= 0 && g.narr >= g.lim.MaxArriving) ||
		(hasIP && g.lim.MaxArrivingPerIP >= 0 && g.arriving[ip] >= g.lim.MaxArrivingPerIP) {
		g.mu.Unlock()
		g.callsRefused.Inc()
		return nil, status.Error(codes.ResourceExhausted, "rls: too many requests still arriving; retry later")
	}
	g.narr++
	if hasIP {
		g.arriving[ip]++
	}
	g.mu.Unlock()
	a := &arrival{g: g, ip: ip, hasIP: hasIP}
	ctx, a.cancel = context.WithCancelCause(ctx)
	a.timer = time.AfterFunc(g.lim.ReceiveTimeout, a.expire)
	a.stop = context.AfterFunc(ctx, func() { a.arrived() })
	return context.WithValue(ctx, arrivalKey{}, a), nil
}

// arrived gives the call's place back; it reports false if the receive
// timeout came first.
func (a *arrival) arrived() bool {
	if !a.done.CompareAndSwap(false, true) {
		return false
	}
	a.timer.Stop()
	a.stop()
	a.leave()
	return true
}

func (a *arrival) expire() {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	a.stop()
	a.leave()
	a.g.receiveTimeout.Inc()
	a.cancel(errReceiveTimeout)
}

func (a *arrival) leave() {
	g := a.g
	g.mu.Lock()
	g.narr--
	if a.hasIP {
		release(g.arriving, a.ip)
	}
	g.mu.Unlock()
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
