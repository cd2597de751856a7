package main

import (
	"context"
	binenc "encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/rls"
)

// The hostile RLS callers of issue 31, row 5, against the binary with a
// real grpc-go client: streams that announce a big request and stall, and
// callers that send many requests and never read an answer. Each attacker
// has its own address; a well-behaved caller on another address is
// measured throughout, and the sidecar's resident memory before and after.

const (
	hostileRLSConfig = `domain: victim
descriptors:
  - key: user
    rate_limit: {unit: year, requests_per_unit: 1000000}
`
	attackRLSConfig = `domain: attack
descriptors:
  - key: k
    rate_limit: {unit: day, requests_per_unit: 4000000000}
`
	shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	clientPreface   = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" // RFC 9113, 3.4
)

// startHostileRLS runs the binary with the RLS on a free port and two
// domains: the well-behaved caller's and the attackers'.
func startHostileRLS(t *testing.T) (*sidecar, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs hostile RLS callers for seconds")
	}
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "victim.yaml"), hostileRLSConfig))
	require.NoError(t, writeFile(filepath.Join(dir, "attack.yaml"), attackRLSConfig))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", dir)
	return s, s.listenAddr(t, "rls")
}

// grpcFrom is a grpc-go client of addr whose connections come from the
// local address from (127.0.0.x: distinct client addresses on one host).
func grpcFrom(t *testing.T, from, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) })}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	return cc
}

// wellBehaved is a caller that asks about its own descriptor, one call at
// a time, and checks that each answer is the one it would get alone: the
// n-th call leaves 1,000,000 - n of the year's limit.
type wellBehaved struct {
	c              rlspb.RateLimitServiceClient
	calls          int
	failures       []string
	slowest, total time.Duration
}

func newWellBehaved(t *testing.T, addr string) *wellBehaved {
	t.Helper()
	// The year's window (365 days from the epoch) must not end during the
	// test: it does so for two minutes a year, when the test waits.
	const year = 365 * 24 * time.Hour
	now := time.Now()
	if left := year - time.Duration(now.UnixNano())%year; left < 2*time.Minute {
		time.Sleep(left + time.Second)
	}
	cc := grpcFrom(t, "127.0.0.21", addr)
	t.Cleanup(func() { cc.Close() })
	return &wellBehaved{c: rlspb.NewRateLimitServiceClient(cc)}
}

// call makes one call with a deadline no healthy sidecar comes near, and
// records whatever differs from the answer it would get alone.
func (w *wellBehaved) call() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	t0 := time.Now()
	resp, err := w.c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "victim", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "good")}})
	took := time.Since(t0)
	w.total += took
	w.slowest = max(w.slowest, took)
	w.calls++
	want := uint32(1000000 - w.calls)
	switch {
	case err != nil:
		w.failures = append(w.failures, "call "+strconv.Itoa(w.calls)+": "+status.Code(err).String()+": "+err.Error())
	case resp.OverallCode != rlspb.RateLimitResponse_OK || len(resp.Statuses) != 1 || resp.Statuses[0].LimitRemaining != want:
		w.failures = append(w.failures, "call "+strconv.Itoa(w.calls)+": "+resp.String())
	}
}

// during calls every 20 ms until done is closed, then once more.
func (w *wellBehaved) during(done <-chan struct{}) {
	for {
		w.call()
		select {
		case <-done:
			w.call()
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *wellBehaved) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("well-behaved caller %s: %d calls, slowest %v, mean %v", what, w.calls, w.slowest, w.total/time.Duration(max(w.calls, 1)))
	assert.Empty(t, w.failures, "every answer %s is the one the caller gets alone", what)
}

// hostileConn is an attacker's connection under a grpc-go client: once cut
// is set, it forwards no more of a stream's DATA frames than cut bytes (the
// rest of the request never leaves), and once noReads is set it reads
// nothing more (no answer is read). It reads the HTTP/2 frame headers of
// what the client writes to know which bytes are whose.
type hostileConn struct {
	net.Conn
	cut     atomic.Int64
	noReads atomic.Bool
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	preface int            // bytes of the client preface written
	hdr     []byte         // the frame header being written
	left    int            // payload bytes of the frame being written
	drop    bool           // the frame being written is dropped
	sent    map[uint32]int // DATA bytes forwarded, by stream
	out     []byte
}

func (c *hostileConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := int(c.cut.Load())
	out := c.out[:0]
	rest := p
	if c.preface < len(clientPreface) {
		take := min(len(clientPreface)-c.preface, len(rest))
		out, rest = append(out, rest[:take]...), rest[take:]
		c.preface += take
	}
	for len(rest) > 0 {
		if c.left == 0 {
			take := min(9-len(c.hdr), len(rest))
			c.hdr, rest = append(c.hdr, rest[:take]...), rest[take:]
			if len(c.hdr) < 9 {
				break
			}
			length := int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
			id := binenc.BigEndian.Uint32(c.hdr[5:]) & (1<<31 - 1)
			c.drop = false
			if c.hdr[3] == 0 && cut > 0 { // DATA
				if c.sent[id]+length > cut {
					c.drop = true
				} else {
					c.sent[id] += length
				}
			}
			if !c.drop {
				out = append(out, c.hdr...)
			}
			c.hdr, c.left = c.hdr[:0], length
			continue
		}
		take := min(c.left, len(rest))
		if !c.drop {
			out = append(out, rest[:take]...)
		}
		c.left, rest = c.left-take, rest[take:]
	}
	c.out = out
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *hostileConn) Read(p []byte) (int, error) {
	if c.noReads.Load() {
		<-c.release
		return 0, net.ErrClosed
	}
	return c.Conn.Read(p)
}

func (c *hostileConn) Close() error {
	c.once.Do(func() { close(c.release) })
	return c.Conn.Close()
}

// attacker is one client address's connections, each its own grpc-go
// ClientConn over a hostileConn.
type attacker struct {
	ccs   []*grpc.ClientConn
	conns []*hostileConn
}

func newAttacker(t *testing.T, from, addr string, conns int) *attacker {
	t.Helper()
	a := &attacker{}
	for range conns {
		hc := make(chan *hostileConn, 1)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
				c, err := d.DialContext(ctx, "tcp", a)
				if err != nil {
					return nil, err
				}
				h := &hostileConn{Conn: c, release: make(chan struct{}), sent: map[uint32]int{}}
				select {
				case hc <- h:
				default: // a reconnection: not the attacker's concern
				}
				return h, nil
			}))
		require.NoError(t, err)
		// One ordinary call first: the connection is up and the server's
		// settings (its stream bound among them) are read.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = rlspb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "attack", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "warm")}})
		cancel()
		require.NoError(t, err)
		a.ccs = append(a.ccs, cc)
		a.conns = append(a.conns, <-hc)
	}
	return a
}

// leave closes every connection.
func (a *attacker) leave() {
	for i, cc := range a.ccs {
		a.conns[i].Close()
		cc.Close()
	}
}

// rawCodec sends a request's bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// stall opens streams calls on each connection, each announcing a request
// of announce bytes and sending all of it but at least the last 1,000
// bytes (the DATA frame that would pass that is kept back, with the rest);
// wait returns the codes the calls ended with.
func (a *attacker) stall(ctx context.Context, streams, announce int) (wait func() map[codes.Code]int) {
	payload := make([]byte, announce)
	var mu sync.Mutex
	ended := map[codes.Code]int{}
	var started, wg sync.WaitGroup
	for i, cc := range a.ccs {
		a.conns[i].cut.Store(int64(5 + announce - 1000))
		for range streams {
			started.Add(1)
			wg.Go(func() {
				cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, shouldRateLimit, grpc.ForceCodec(rawCodec{}))
				started.Done()
				if err == nil {
					if err = cs.SendMsg(payload); err == nil || errors.Is(err, io.EOF) {
						err = cs.RecvMsg(new([]byte))
					}
				}
				mu.Lock()
				ended[status.Code(err)]++
				mu.Unlock()
			})
		}
	}
	started.Wait()
	return func() map[codes.Code]int { wg.Wait(); return ended }
}

// flood sends up to perConn valid requests on each connection, whose
// answers it never reads (its reads are stopped), until ctx ends; it
// returns how many it sent.
func (a *attacker) flood(ctx context.Context, perConn int) int64 {
	var sent atomic.Int64
	var wg sync.WaitGroup
	req := &rlspb.RateLimitRequest{Domain: "attack", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "flood")}}
	for i, cc := range a.ccs {
		a.conns[i].noReads.Store(true)
		wg.Go(func() {
			for range perConn {
				cs, err := cc.NewStream(ctx, &grpc.StreamDesc{}, shouldRateLimit)
				if err != nil {
					return // ctx ended while waiting for a stream
				}
				if cs.SendMsg(req) != nil || cs.CloseSend() != nil {
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	return sent.Load()
}

// rssSampler records the sidecar's peak resident memory.
type rssSampler struct {
	pid  int
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func sampleRSS(pid int) *rssSampler {
	r := &rssSampler{pid: pid, stop: make(chan struct{})}
	r.wg.Go(func() {
		for {
			if v, err := readRSS(pid); err == nil && v > r.peak.Load() {
				r.peak.Store(v)
			}
			select {
			case <-r.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return r
}

func (r *rssSampler) done() int64 { close(r.stop); r.wg.Wait(); return r.peak.Load() }

// settle waits (up to 10 s) for the sidecar's resident memory to come back
// within twice base, and returns it.
func settle(t *testing.T, pid int, base int64) int64 {
	t.Helper()
	var rss int64
	for range 100 {
		var err error
		rss, err = readRSS(pid)
		require.NoError(t, err)
		if rss <= 2*base {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return rss
}

// baseline warms the sidecar and the well-behaved caller up, and returns
// the sidecar's resident memory.
func baseline(t *testing.T, s *sidecar, w *wellBehaved) int64 {
	t.Helper()
	for range 20 {
		w.call()
	}
	time.Sleep(300 * time.Millisecond)
	base, err := readRSS(s.Cmd.Process.Pid)
	require.NoError(t, err)
	return base
}

// TestRLSStalledRequestsAreBounded: streams that announce a 4 MB request
// and send all but 1,000 bytes of it are refused before they are read (the
// request size is fitted to the descriptors a request may carry), and
// streams that announce a request just under that size and stall are
// dropped at the receive timeout, and past the budget of unfinished
// requests their connections are closed. A caller on another address gets every answer it would
// get alone, and the sidecar's memory is back within twice its size
// before the attack.
func TestRLSStalledRequestsAreBounded(t *testing.T) {
	s, addr := startHostileRLS(t)
	// The largest request read, as the sidecar logs it (its default when
	// it does not).
	m := regexp.MustCompile(`max_request_bytes=(\d+)`).FindStringSubmatch(s.logs())
	if m == nil {
		m = []string{"", strconv.Itoa(rls.MaxRequestBytes(rls.DefaultMaxDescriptors, check.DefaultMaxIDBytes))}
	}
	limit, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	// The stalled streams of the first wave stay within the budget of
	// unfinished requests; the second wave's pass it.
	perConn := rls.DefaultArrivingBudget / 8 / limit
	require.Positive(t, perConn)
	w := newWellBehaved(t, addr)
	pid := s.Cmd.Process.Pid
	base := baseline(t, s, w)
	rss := sampleRSS(pid)

	// 64 streams announcing 4 MB from one address; from another, streams
	// announcing just under the largest request, which stall (within the
	// budget of unfinished requests), then as many more (past it).
	big := newAttacker(t, "127.0.0.31", addr, 4)
	first := newAttacker(t, "127.0.0.32", addr, 8)
	more := newAttacker(t, "127.0.0.32", addr, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan struct{})
	var ended [3]map[codes.Code]int
	go func() {
		waitBig := big.stall(ctx, 16, 4<<20)
		waitFirst := first.stall(ctx, perConn, limit-64)
		time.Sleep(500 * time.Millisecond) // the first streams' headers are in
		waitMore := more.stall(ctx, perConn, limit-64)
		ended[0], ended[1], ended[2] = waitBig(), waitFirst(), waitMore()
		close(done)
	}()
	w.during(done)
	big.leave()
	first.leave()
	more.leave()
	peak := rss.done()
	after := settle(t, pid, base)
	t.Logf("rss %d MiB before, peak %d MiB, %d MiB after; 4 MB announced: %v; %d bytes announced: %v, then %v",
		base>>20, peak>>20, after>>20, ended[0], limit-64, ended[1], ended[2])
	w.check(t, "during the attack")
	assert.LessOrEqual(t, after, 2*base, "the sidecar's memory comes back within twice its size before the attack")
	assert.Equal(t, map[codes.Code]int{codes.ResourceExhausted: 64}, ended[0], "a request announced bigger than the largest one read is refused")
	assert.Equal(t, map[codes.Code]int{codes.Canceled: 8 * perConn}, ended[1], "a stalled request is ended at the receive timeout")
	assert.Zero(t, ended[2][codes.OK]+ended[2][codes.Internal], "no request stalled past the budget arrives: %v", ended[2])
	assert.Positive(t, ended[2][codes.Unavailable], "past -rls-arriving-budget, the connections holding unfinished requests are closed")
	metrics := s.get(t, "/metrics").body
	assert.Regexp(t, `raterlimiter_rls_receive_timeouts_total [1-9]`, metrics)
	assert.Regexp(t, `raterlimiter_rls_connections_over_budget_total [1-9]`, metrics)
}

// TestRLSUnreadAnswersAreBounded: callers on few connections that send
// request after request and never read an answer hold at most the streams
// each connection may have open; a caller on another address gets every
// answer it would get alone, and the sidecar's memory is back within twice
// its size before the attack.
func TestRLSUnreadAnswersAreBounded(t *testing.T) {
	s, addr := startHostileRLS(t)
	w := newWellBehaved(t, addr)
	pid := s.Cmd.Process.Pid
	base := baseline(t, s, w)
	rss := sampleRSS(pid)

	a := newAttacker(t, "127.0.0.41", addr, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan struct{})
	var sent int64
	go func() { sent = a.flood(ctx, 3000); <-ctx.Done(); close(done) }()
	w.during(done)
	a.leave()
	peak := rss.done()
	after := settle(t, pid, base)
	t.Logf("rss %d MiB before, peak %d MiB, %d MiB after; %d requests sent over 8 connections, no answer read", base>>20, peak>>20, after>>20, sent)
	w.check(t, "during the attack")
	assert.LessOrEqual(t, after, 2*base, "the sidecar's memory comes back within twice its size before the attack")
	// A read the client had begun before it stopped reading still takes
	// in a buffer or two of answers, which frees their streams: about
	// twice -rls-max-streams a connection (1,607 of 1,600 seen once beside
	// a second copy of the suite); the bound judged is four times it,
	// which only a connection holding unbounded calls passes (without the
	// bound, all 24,000).
	assert.LessOrEqual(t, sent, int64(8*4*100), "a connection holds at most -rls-max-streams calls whose answers are unread, and a few buffers more")
}

// TestRLSBurstFromOneAddressIsServed: 200 callers on one connection, as
// an Envoy's worker sends them, are all answered: the bounds above never
// refuse a burst of whole requests.
func TestRLSBurstFromOneAddressIsServed(t *testing.T) {
	_, addr := startHostileRLS(t)
	cc := grpcFrom(t, "127.0.0.51", addr)
	t.Cleanup(func() { cc.Close() })
	c := rlspb.NewRateLimitServiceClient(cc)
	var failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			for range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "attack", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "burst")}})
				cancel()
				if err != nil && failed.Add(1) == 1 {
					first.Store(err.Error())
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, failed.Load(), "4,000 calls from 200 callers on one connection: %v", first.Load())
}
