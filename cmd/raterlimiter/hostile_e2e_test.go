package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// dialFrom opens a TCP connection to addr from the loopback address from
// (127.0.0.2, 127.0.0.3, ...: distinct client addresses on one host),
// waiting for it far longer than a busy machine's stalls.
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
	return d.Dial("tcp", addr)
}

// clientFrom is an HTTP client whose connections come from the address from.
func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
}

// TestConnectionHogDoesNotStopOthers: one address opens 16,500 connections
// and sends nothing. It keeps its bound (1,024); the rest are answered 503
// at once and closed; the silent ones it keeps are closed after the first
// byte timeout; and another address is served throughout.
func TestConnectionHogDoesNotStopOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 16,500 connections")
	}
	// -timeout far above a check's: a stall of a busy machine is not a 503
	// to the other address.
	s := start(t, nil, "-timeout", "30s")
	const hog = 16_500
	conns := make([]net.Conn, 0, hog)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	good := clientFrom("127.0.0.3")
	// The hog binds 16,500 source ports on its address: one of this
	// process's own, so that a second copy of the suite running beside it
	// (scripts/stress-tests.sh) never takes the same address's ports.
	hogAddr := ownLoopback(2)
	t.Logf("the hog dials from %s", hogAddr)
	var served, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := good.Get("http://" + s.addr + "/check_rate?id=good&scale=60000&limit=100000000")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
				continue
			}
			served.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	})
	dialStart := time.Now()
	var mu sync.Mutex
	var dialers sync.WaitGroup
	for range 16 {
		dialers.Go(func() {
			for range hog / 16 {
				c, err := dialFrom(hogAddr, s.addr)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	dialers.Wait()
	dialed := time.Since(dialStart)
	for len(conns) < hog {
		c, err := dialFrom(hogAddr, s.addr)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	// A refused connection holds a whole 503 and then EOF; a held one gets
	// nothing until the first byte timeout (2 s) ends it with a 408. Each
	// is read until the server closes it, within a deadline (30 s) only a
	// connection the server never closes reaches.
	kinds := map[string]int{}
	closed := 0
	readBy := time.Now().Add(30 * time.Second)
	for _, c := range conns {
		_ = c.SetReadDeadline(readBy)
		b, err := io.ReadAll(c)
		kind := "other"
		switch {
		case bytes.HasPrefix(b, []byte("HTTP/1.1 503")):
			kind = "503"
		case bytes.HasPrefix(b, []byte("HTTP/1.1 408")):
			kind = "408"
		case len(b) == 0 && err == nil:
			kind = "closed"
		}
		kinds[kind]++
		if err == nil {
			closed++
		}
	}
	answered := time.Since(dialStart)
	t.Logf("%d connections from one address in %v, all answered after %v: %v", hog, dialed, answered, kinds)
	// Held connections give their place back when the first byte timeout
	// ends them, so a hog whose connections the server accepts for longer
	// than that gets its bound again for each timeout: never more than the
	// bound at once. The server accepts the last one before it answers it,
	// so by the time all are answered (a busy server accepts later than
	// the hog's dials complete: they wait in the listen backlog).
	periods := int(answered/(2*time.Second)) + 1
	assert.LessOrEqual(t, kinds["408"], 1024*periods, "no more held than its bound at a time")
	assert.Equal(t, hog, kinds["503"]+kinds["408"], "every connection refused at once or closed after the first byte timeout")
	close(stop)
	wg.Wait()
	assert.Equal(t, hog, closed, "every hog connection is closed: refused at once, or silent past the first byte timeout")
	assert.Zero(t, kinds["other"])
	assert.Zero(t, failed.Load(), "the other address was served throughout")
	assert.Positive(t, served.Load())
	m := s.get(t, "/metrics").body
	v := regexp.MustCompile(`raterlimiter_connections_refused_total (\d+)`).FindStringSubmatch(m)
	require.NotNil(t, v)
	n, _ := strconv.Atoi(v[1])
	assert.Equal(t, kinds["503"], n, "each refusal counted")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestAdminIsNeverOpenToTheNetwork: on a listener beyond loopback with no
// token, admin endpoints answer 403 saying how to enable them; on
// -admin-listen they answer there; -metrics-public keeps /metrics public.
func TestAdminIsNeverOpenToTheNetwork(t *testing.T) {
	open := start(t, nil, "-listen", "0.0.0.0:0")
	_, port, _ := net.SplitHostPort(open.addr)
	base := "http://127.0.0.1:" + port
	for _, r := range []struct{ method, path string }{{"DELETE", "/buckets?id=x"}, {"GET", "/buckets?id=x"}, {"POST", "/reload"}, {"GET", "/metrics"}, {"GET", "/debug/pprof/"}} {
		req, err := http.NewRequest(r.method, base+r.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 403, resp.StatusCode, "%s %s", r.method, r.path)
		assert.Contains(t, string(b), "-admin-token-file", "the answer says how to enable it")
	}
	resp, err := http.Get(base + "/check_rate?id=a&scale=1000&limit=1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "checks are served")

	pub := start(t, nil, "-listen", "0.0.0.0:0", "-metrics-public")
	_, port, _ = net.SplitHostPort(pub.addr)
	resp, err = http.Get("http://127.0.0.1:" + port + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "-metrics-public")

	sep := start(t, nil, "-listen", "0.0.0.0:0", "-admin-listen", "127.0.0.1:0")
	adminAddr := sep.listenAddr(t, "admin endpoints")
	_, port, _ = net.SplitHostPort(sep.addr)
	resp, err = http.Get("http://127.0.0.1:" + port + "/buckets?id=x")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode, "not on the main listener")
	resp, err = http.Get("http://" + adminAddr + "/buckets?id=x")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "on the admin listener")
	resp, err = http.Get("http://" + adminAddr + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "profiles on the admin listener")

	code, _, errOut := runBinary(t, nil, "-listen", "127.0.0.1:0", "-admin-listen", "0.0.0.0:0")
	assert.Equal(t, 2, code, "an admin listener beyond loopback needs a token")
	assert.Contains(t, errOut, "needs -admin-token-file")
}

// TestWellBehavedClientUnderAttack runs one well-behaved client while other
// addresses flood the sidecar (20,000 new ids a second in batches, oversized
// headers and bodies, a connection hog) and while they pause, in alternating
// windows. Asserted on every run: each of its checks is answered 200 and
// none of its counts is lost or reset, with the attack running beside it.
// Its latency (the median over window pairs of its p99 under attack over its
// quiet p99, so that outside load spoils a pair, not the verdict) is logged;
// it is judged, against 3x, only in the opt-in load run
// (RATERLIMITER_ATTACK=1, scripts/attack.sh): how fast a shared machine
// answers is a benchmark's question (BENCHMARKS.md), not a test's.
func TestWellBehavedClientUnderAttack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flood for seconds")
	}
	load := os.Getenv("RATERLIMITER_ATTACK") == "1"
	attackFor := 2 * time.Second
	if load {
		attackFor = envDuration(t, "RATERLIMITER_ATTACK_FOR", 10*time.Second)
	}
	// -timeout and -first-byte-timeout far above what a check and a
	// connection's first byte take, so that a stall of a busy machine is not
	// a 503 or a 408 to the well-behaved client (a real stall of the server
	// still is); the hog's silent connections are then held throughout.
	s := start(t, nil, "-max-buckets", "200000", "-timeout", "30s", "-first-byte-timeout", "30s")
	good := &fasthttp.HostClient{Addr: s.addr, Dial: func(a string) (net.Conn, error) { return dialFrom("127.0.0.3", a) }, MaxConns: 1}
	checks := 0
	measure := func(d time.Duration, into *[]time.Duration) {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.SetRequestURI("http://" + s.addr + "/check_rate?id=good&scale=" + longScale + "&limit=100000000")
		for end := time.Now().Add(d); time.Now().Before(end); {
			t0 := time.Now()
			require.NoError(t, good.Do(&req, &resp))
			*into = append(*into, time.Since(t0))
			require.Equal(t, 200, resp.StatusCode(), string(resp.Body()))
			checks++
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The flood's batches are made before it starts: 20 a second of 1,000
	// new ids each, from 127.0.0.4.
	batches := make([][]byte, 20*int(attackFor/time.Second)+20)
	for n := range batches {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range 1000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"flood-%d-%d","scale":60000,"limit":5}`, n, i)
		}
		b.WriteByte(']')
		batches[n] = b.Bytes()
	}
	var paused atomic.Bool
	paused.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var newIDs atomic.Int64
	wg.Go(func() {
		hc := &fasthttp.HostClient{Addr: s.addr, Dial: func(a string) (net.Conn, error) { return dialFrom("127.0.0.4", a) }, MaxConns: 4}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var req fasthttp.Request
		var resp fasthttp.Response
		for n := 0; n < len(batches); {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if paused.Load() {
				continue
			}
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetRequestURI("http://" + s.addr + "/check_rates")
			req.SetBody(batches[n])
			n++
			if hc.Do(&req, &resp) == nil && resp.StatusCode() == 200 {
				newIDs.Add(1000)
			}
		}
	})
	// Oversized headers and bodies from 127.0.0.5, each on a connection of
	// its own.
	var floods atomic.Int64
	wg.Go(func() {
		bigHeader := "GET /check_rate?id=x&scale=1&limit=1 HTTP/1.1\r\nHost: x\r\nX-Junk: " + strings.Repeat("j", 64<<10) + "\r\n\r\n"
		bigBody := "POST /check_rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n\r\n" + strings.Repeat("[", 4096)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if paused.Load() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			c, err := dialFrom("127.0.0.5", s.addr)
			if err != nil {
				continue
			}
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if i%2 == 0 {
				_, _ = io.WriteString(c, bigHeader)
			} else {
				_, _ = io.WriteString(c, bigBody)
			}
			_, _ = bufio.NewReader(c).ReadString('\n')
			c.Close()
			floods.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	})
	// A hog at its bound from 127.0.0.6, held throughout.
	var hogs []net.Conn
	for range 1100 {
		if c, err := dialFrom("127.0.0.6", s.addr); err == nil {
			hogs = append(hogs, c)
		}
	}
	defer func() {
		for _, c := range hogs {
			c.Close()
		}
	}()
	p99 := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[(len(ds)*99)/100]
	}
	// Quiet and attacked windows alternate; each pair gives a ratio of
	// p99s, and the median ratio is what is judged: a burst of outside load
	// (other packages' tests on the same two cores) spoils a pair, not the
	// verdict. A quiet p99 below 1 ms is taken as 1 ms: below it the ratio
	// measures the scheduler of a shared machine, not the sidecar.
	var quiet, attacked []time.Duration
	var ratios []float64
	var attackTime time.Duration
	for attackTime < attackFor {
		var q, a []time.Duration
		paused.Store(true)
		measure(time.Second, &q)
		paused.Store(false)
		t0 := time.Now()
		measure(2*time.Second, &a)
		attackTime += time.Since(t0)
		ratios = append(ratios, float64(p99(a))/float64(max(p99(q), time.Millisecond)))
		quiet, attacked = append(quiet, q...), append(attacked, a...)
	}
	// The attack must have run beside the client: on a machine too busy for
	// it to get going within the window, the client goes on checking under
	// attack until it has (bounded).
	for end := time.Now().Add(time.Minute); (newIDs.Load() == 0 || floods.Load() == 0) && time.Now().Before(end); {
		measure(100*time.Millisecond, &attacked)
	}
	close(stop)
	wg.Wait()

	q, a := p99(quiet), p99(attacked)
	slices.Sort(ratios)
	median := ratios[len(ratios)/2]
	rate := float64(newIDs.Load()) / attackTime.Seconds()
	t.Logf("well-behaved p99: quiet %v (%d checks), under attack %v (%d checks); ratios of p99s by window pair %.2f (median %.2f); %.0f new ids a second, %d header and body floods, %d hog connections",
		q, len(quiet), a, len(attacked), ratios, median, rate, floods.Load(), len(hogs))
	if load {
		assert.LessOrEqual(t, median, 3.0, "p99 under attack within 3x of quiet (median over window pairs)")
		// The flood offers 20,000 new ids a second; what the sidecar
		// absorbs depends on the machine, and is logged above.
		assert.GreaterOrEqual(t, newIDs.Load(), int64(50_000), "a flood of new ids ran")
	}
	// The attack ran beside the client: batches of new ids were answered,
	// and oversized requests were sent.
	assert.Positive(t, newIDs.Load(), "a flood of new ids ran")
	assert.Positive(t, floods.Load(), "oversized headers and bodies were sent")
	r := s.get(t, "/check_rate?id=good&scale="+longScale+"&limit=100000000&hits=0")
	assert.Contains(t, r.body, `"count":`+strconv.Itoa(checks)+`,`, "no count of the well-behaved client lost or reset")
}

// TestHostileCatalogue keeps what held against hostile input holding, on the
// binary: malformed integers and repeated fields refused naming the field,
// an 80 MB batch refused before it is read, 100,000 nested brackets
// refused, 3,000 trickling connections from three addresses closed by the
// read timeout while another address is served, and no id in /metrics.
func TestHostileCatalogue(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 3,000 connections for seconds")
	}
	// -timeout far above a check's: a stall of a busy machine is not a 503
	// to the address that is served.
	s := start(t, nil, "-timeout", "30s")
	for _, tc := range []struct{ query, field string }{
		{"id=a&id=b&scale=1000&limit=1", "id"},
		{"id=a&scale=1000&limit=99999999999999999999", "limit"},
		{"id=a&scale=1000&limit=+5", "limit"},
		{"id=a&scale=-1&limit=5", "scale"},
		{"id=a&scale=1000&limit=0x10", "limit"},
		{"id=a&scale=1e3&limit=5", "scale"},
		{"id=a&scale=1000&limit=5&hits=1.5", "hits"},
	} {
		r := s.get(t, "/check_rate?"+tc.query)
		assert.Equal(t, 400, r.status, tc.query)
		assert.Contains(t, r.body, `"field":"`+tc.field+`"`, tc.query)
	}
	raw := func(req string, body io.Reader) int {
		c, err := dialFrom("127.0.0.7", s.addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, req)
		if body != nil {
			go func() { _, _ = io.Copy(c, body) }()
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		code, _ := strconv.Atoi(strings.Fields(line)[1])
		return code
	}
	assert.Equal(t, 413, raw("POST /check_rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 83886080\r\n\r\n",
		io.LimitReader(repeatReader('['), 80<<20)), "an 80 MB batch")
	nested := strings.Repeat("[", 100_000)
	assert.Equal(t, 400, raw("POST /check_rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(nested))+"\r\n\r\n"+nested, nil))

	// Slowloris: 3,000 connections trickling a request, one byte a second.
	var closedByServer atomic.Int64
	var wg sync.WaitGroup
	for i := range 3000 {
		from := "127.0.1." + strconv.Itoa(1+i%3)
		wg.Go(func() {
			c, err := dialFrom(from, s.addr)
			if err != nil {
				return
			}
			defer c.Close()
			req := "GET /check_rate?id=slow&scale=1000&limit=1 HTTP/1.1\r\nHost: x\r\n"
			for j := 0; j < len(req); j++ {
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write([]byte{req[j]}); err != nil {
					closedByServer.Add(1)
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				var b [1]byte
				if _, err := c.Read(b[:]); err == nil || !isTimeout(err) {
					closedByServer.Add(1) // answered (408) or closed
					return
				}
			}
		})
	}
	good := clientFrom("127.0.0.8")
	served := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		resp, err := good.Get("http://" + s.addr + "/check_rate?id=secret-id-123&scale=60000&limit=100000000")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		served++
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("slowloris: %d of 3000 closed by the server; %d checks served meanwhile", closedByServer.Load(), served)
	assert.Equal(t, int64(3000), closedByServer.Load(), "every trickling connection closed by the server")
	assert.NotContains(t, s.get(t, "/metrics").body, "secret-id-123", "no metric carries an id")
}

// repeatReader reads b forever.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestRequestSmugglingIsRefused: a request with both Content-Length and
// Transfer-Encoding is answered 400 and its connection closed, so the bytes
// after its chunked body are never read as a second request.
func TestRequestSmugglingIsRefused(t *testing.T) {
	s := start(t, nil)
	c, err := dialFrom("127.0.0.9", s.addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.WriteString(c, "POST /check_rate HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+
		"GET /check_rate?id=smuggled&scale=60000&limit=5 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	all, _ := io.ReadAll(c)
	assert.True(t, bytes.HasPrefix(all, []byte("HTTP/1.1 400")), "%q", all)
	assert.Equal(t, 1, bytes.Count(all, []byte("HTTP/1.1 ")), "one answer, then the connection closes: %q", all)
	r := s.get(t, "/check_rate?id=smuggled&scale=60000&limit=5&hits=0")
	assert.Contains(t, r.body, `"count":0,`, "the hidden request was never counted")
}

// TestBodyFloodIsBounded: 1,500 connections each send all but the last
// byte of a 2 MB batch, and hold it. The sidecar holds at most its body
// budget of such bytes (32 MiB) and a small allowance per connection (16
// KiB), closing the connections past it; its resident memory stays bounded
// (it grew to 3.3-4.4 GB without the budget) and is given back after the
// flood, and another address is served while every flooding connection has
// sent what it will and holds it.
func TestBodyFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("1,500 connections")
	}
	// -timeout and -first-byte-timeout far above what a check and a
	// connection's first byte take: a stall of a busy machine is not a 503
	// or a 408 to the healthy client (a stalled server still is).
	s := start(t, nil, "-timeout", "30s", "-first-byte-timeout", "30s")
	pid := s.Cmd.Process.Pid
	base, err := readRSS(pid)
	require.NoError(t, err)
	const conns, size = 1500, 2 << 20
	head := "POST /check_rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
	chunk := bytes.Repeat([]byte(" "), 64<<10)
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if r, err := readRSS(pid); err == nil && r > peak.Load() {
				peak.Store(r)
			}
		}
	})
	// flood sends all but the last byte of a body on a new connection from
	// the address from, and returns the connection, or nil if it was closed
	// first.
	var closedEarly, sent atomic.Int64
	flood := func(from string) net.Conn {
		c, err := dialFrom(from, s.addr)
		if err != nil {
			return nil
		}
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(c, head); err != nil {
			c.Close()
			return nil
		}
		for done := 0; done < size-1; done += len(chunk) {
			n := min(len(chunk), size-1-done)
			if _, err := c.Write(chunk[:n]); err != nil {
				closedEarly.Add(1)
				c.Close()
				return nil
			}
		}
		return c
	}
	// Each flooding connection, once it has sent all it will (or was
	// closed), counts itself in sent and holds its unfinished body until
	// release is closed.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range conns {
		from := "127.0.2." + strconv.Itoa(1+i%3) // three addresses: under each one's connection bound
		wg.Go(func() {
			c := flood(from)
			sent.Add(1)
			if c != nil {
				<-release
				c.Close()
			}
		})
	}
	good := clientFrom("127.0.0.11")
	served, heldServed := 0, 0
	check := func() {
		t.Helper()
		resp, err := good.Get("http://" + s.addr + "/check_rate?id=good&scale=60000&limit=1000000")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "a check from another address during the flood")
		served++
	}
	// Check from another address while the flood is being sent, and then
	// five times while every flooding connection holds what it sent (the
	// wait for the flood is bounded far above what it takes).
	for end := time.Now().Add(5 * time.Minute); sent.Load() < conns; {
		require.True(t, time.Now().Before(end), "the flood's %d connections were not all sent in 5 minutes", conns)
		check()
		time.Sleep(20 * time.Millisecond)
	}
	for range 5 {
		check()
		heldServed++
	}
	close(release)
	wg.Wait()
	close(stop)
	sampler.Wait()
	// After the flood, the memory goes back: wait for the runtime to
	// return it (bounded).
	var after int64
	for range 100 {
		after, err = readRSS(pid)
		require.NoError(t, err)
		if after < peak.Load()/2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("rss %d MiB at start, peak %d MiB, %d MiB after; %d of %d flooding connections closed before their body was sent; %d checks served meanwhile (%d while the flood was held)",
		base>>20, peak.Load()>>20, after>>20, closedEarly.Load(), conns, served, heldServed)
	// A body is admitted against the budget by its Content-Length before
	// more than its first byte is read, so the flood holds the budget and
	// each connection's buffers, far below the gigabytes the same flood
	// holds with no budget (lab/notes/reliability.md, "Hostile clients beside a
	// healthy one").
	assert.Less(t, peak.Load(), int64(256<<20), "resident memory stays within the budget and the connections' buffers")
	m := s.get(t, "/metrics").body
	v := regexp.MustCompile(`raterlimiter_connections_over_body_budget_total (\d+)`).FindStringSubmatch(m)
	require.NotNil(t, v)
	closed, _ := strconv.Atoi(v[1])
	t.Logf("%d connections closed by the body budget", closed)
	assert.Less(t, after, max(peak.Load()/2+base, 256<<20), "the flood's memory is given back after it")
	assert.Greater(t, closed, conns/2, "most flooding connections were closed by the budget")
}

// TestHardeningOnTheBinary: at -max-buckets, a flood of fresh ids leaves a
// throttled id of every algorithm throttled; one id cannot be planted under
// more than -max-scales-per-id scales; the admin token can come from a file.
func TestHardeningOnTheBinary(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	s := start(t, nil, "-max-buckets", "2000", "-shards", "1", "-max-scales-per-id", "8", "-admin-token-file", tokenFile)

	algos := []string{"fixed", "sliding", "token", "log"}
	throttle := func(a string) int {
		return s.get(t, "/check_rate?id=throttled-"+a+"&scale="+longScale+"&limit=3&algo="+a).status
	}
	for _, a := range algos {
		for range 3 {
			require.Equal(t, 200, throttle(a))
		}
	}
	var body strings.Builder
	for round := range 40 {
		body.Reset()
		body.WriteByte('[')
		for i := range 1000 {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"id":"fresh-%d-%d","scale":%s,"limit":3,"algo":"%s"}`, round, i, longScale, algos[i%4])
		}
		body.WriteByte(']')
		r := s.do(t, "POST", "/check_rates", "application/json", body.String())
		require.Equal(t, 200, r.status, r.body)
		for _, a := range algos {
			assert.Equal(t, 429, throttle(a), "round %d: the throttled %s id stays throttled", round, a)
		}
	}
	assert.Regexp(t, `raterlimiter_evicted_buckets_total [1-9]`,
		s.do(t, "GET", "/metrics", "", "", "Authorization", "Bearer s3cret").body, "the flood evicted records")

	for scale := 1000; scale < 9000; scale += 1000 {
		require.Equal(t, 200, s.get(t, "/check_rate?id=planted&limit=5&scale="+strconv.Itoa(scale)).status)
	}
	r := s.get(t, "/check_rate?id=planted&limit=5&scale=9000")
	assert.Equal(t, 400, r.status)
	assert.Contains(t, r.body, "-max-scales-per-id")

	assert.Equal(t, 401, s.get(t, "/buckets?id=planted").status, "the token from the file is required")
	r = s.do(t, "GET", "/buckets?id=planted", "", "", "Authorization", "Bearer s3cret")
	assert.Equal(t, 200, r.status, "the trailing newline is not part of the token")
}

// ownLoopback is a loopback address of this test process's own,
// 127.P.Q.last with P.Q from its pid, for a test that binds thousands of
// source ports: the kernel hands out a bound address's ports from one
// range, which two processes dialing from one address would share.
func ownLoopback(last byte) string {
	pid := os.Getpid()
	return fmt.Sprintf("127.%d.%d.%d", 100+(pid>>8)%100, pid&255, last)
}
