package main

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A proxy in front of the sidecar keeps its connections to it: each check
// travels on a connection the proxy already holds, on allowed and on
// denied requests alike. A proxy that opened one per check would leave one
// port in TIME-WAIT per request, and past some hundreds of checks a second
// to one address its connects would fail.

// connCounter stands between a proxy and the sidecar and counts the
// connections the proxy opens: each one it accepts it carries on a
// connection of its own to the sidecar, closed with it, so the sidecar
// accepts exactly as many.
type connCounter struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	open     map[net.Conn]bool
}

// countConns starts a connCounter in front of target and returns it; it
// stops with the test.
func countConns(t *testing.T, target string) *connCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &connCounter{ln: ln, target: target, open: map[net.Conn]bool{}}
	c.wg.Add(1)
	go c.serve()
	t.Cleanup(c.close)
	return c
}

func (c *connCounter) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

func (c *connCounter) serve() {
	defer c.wg.Done()
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.accepted.Add(1)
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			in.Close()
			continue
		}
		if !c.track(in, out) {
			return
		}
		c.wg.Add(2)
		go c.pipe(in, out)
		go c.pipe(out, in)
	}
}

// track remembers a pair to close at the end, or closes it and reports
// false when the counter is closing.
func (c *connCounter) track(a, b net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		a.Close()
		b.Close()
		return false
	}
	c.open[a], c.open[b] = true, true
	return true
}

// pipe copies from src to dst; when src ends, both are closed, as the
// proxy or the sidecar closed its end.
func (c *connCounter) pipe(dst, src net.Conn) {
	defer c.wg.Done()
	_, _ = io.Copy(dst, src)
	src.Close()
	dst.Close()
	c.mu.Lock()
	delete(c.open, src)
	delete(c.open, dst)
	c.mu.Unlock()
}

func (c *connCounter) close() {
	c.ln.Close()
	c.mu.Lock()
	for conn := range c.open {
		conn.Close()
	}
	c.open = nil
	c.mu.Unlock()
	c.wg.Wait()
}

// startCountedGateway is startGateway with a connCounter between the proxy
// and the sidecar.
func startCountedGateway(t *testing.T, g gateway) (string, *connCounter) {
	t.Helper()
	sc := start(t, nil, "-policies", gatewayDocs+"/policies.yaml", "-auth-headers", g.name)
	counter := countConns(t, sc.addr)
	proxy, app := freePort(t), upstream(t)
	g.start(t, proxy, counter.port(), app)
	return "http://127.0.0.1:" + strconv.Itoa(proxy), counter
}

// TestGatewayKeepsItsConnectionsToTheSidecar: 48 clients with keep-alive
// connections to the proxy send 2,400 requests the sidecar allows, then
// 2,400 it denies, through each real proxy as docs/gateways configures it.
// The proxy opens at most a few connections to the sidecar in each phase
// (one per check in flight, so at most 48; the bound leaves room for a
// proxy that replaces some), never one per check. 48 is more checks in
// flight than nginx's upstream keepalive of 16 and Caddy's default of 32
// idle connections keep: the snippets' settings are tested too.
func TestGatewayKeepsItsConnectionsToTheSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("drives nginx, caddy and traefik")
	}
	const clients, perClient = 48, 50
	const most = 2 * clients
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			base, counter := startCountedGateway(t, g)
			// load sends perClient requests from each client and checks
			// each answer; it returns the connections the proxy opened to
			// the sidecar meanwhile.
			load := func(what string, key func(client, i int) string, check func(r gwReply) error) int64 {
				before := counter.accepted.Load()
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for n := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c := clientFrom("127.0.0.2")
						defer c.CloseIdleConnections()
						for i := range perClient {
							r, err := tryGet(c, base+"/api/x", "X-Api-Key", key(n, i))
							if err == nil {
								err = check(r)
							}
							if err != nil {
								errs <- errors.New(what + " request " + strconv.Itoa(i) + " of client " + strconv.Itoa(n) + ": " + err.Error())
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				opened := counter.accepted.Load() - before
				t.Logf("%s: %d %s requests, %d connections to the sidecar", g.name, clients*perClient, what, opened)
				return opened
			}

			allowed := load("allowed", func(client, i int) string {
				return "allowed-" + strconv.Itoa(client) + "-" + strconv.Itoa(i) // a key of its own: its first hit of 5
			}, func(r gwReply) error {
				if r.status != 200 || r.body != "app GET /api/x" {
					return errors.New("got " + strconv.Itoa(r.status) + " " + r.body + ", want the app's 200")
				}
				if g.allowHeads && !strings.HasPrefix(r.header.Get("RateLimit"), `"api";r=4;t=`) {
					return errors.New("RateLimit " + r.header.Get("RateLimit"))
				}
				return nil
			})

			// One key, spent on its first 5 hits, then denied. The policy
			// counts in minutes aligned to the clock: the phase must not
			// straddle a minute's end, where the count starts again.
			awayFromMinuteEnd(20 * time.Second)
			for range 5 {
				require.Equal(t, 200, send(t, clientFrom("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "spent").status)
			}
			denied := load("denied", func(int, int) string { return "spent" }, func(r gwReply) error {
				switch {
				case r.status != 429:
					return errors.New("got " + strconv.Itoa(r.status) + " " + r.body + ", want 429")
				case r.header.Get("RateLimit-Policy") != `"api";q=5;w=60` || !strings.HasPrefix(r.header.Get("RateLimit"), `"api";r=0;t=`):
					return errors.New("headers RateLimit-Policy " + r.header.Get("RateLimit-Policy") + ", RateLimit " + r.header.Get("RateLimit"))
				case r.header.Get("Retry-After") == "":
					return errors.New("no Retry-After")
				case g.name == "nginx" && r.body != "{\"error\":\"too many requests\"}\n":
					return errors.New("body " + r.body + ", want nginx's own")
				case g.name != "nginx" && !strings.HasPrefix(r.body, `{"allowed":false,"policy":"api","retry_after_ms":`):
					return errors.New("body " + r.body + ", want the sidecar's")
				}
				return nil
			})

			assert.LessOrEqual(t, allowed, int64(most), "%s keeps its connections to the sidecar on allowed requests", g.name)
			assert.LessOrEqual(t, denied, int64(most), "%s keeps its connections to the sidecar on denied requests", g.name)
		})
	}
}
