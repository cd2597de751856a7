package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// Hostile clients through the real nginx and Caddy with the files of
// docs/gateways/: what one client sends must never switch the limit off,
// nor take the sidecar or the proxy's connections from the other clients.

// startNginxConns is startNginx with room for conns connections (a
// client's and the sidecar's, for each request in flight).
func startNginxConns(t *testing.T, conf string, port, conns int) {
	t.Helper()
	bin := tooltest.Need(t, "nginx", "nginx-light")
	dir := t.TempDir()
	main := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile %[2]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections %[2]d; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/server.conf;
}
`, dir, conns)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.conf"), []byte(conf), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644))
	runProxy(t, port, bin, []string{"-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log")}, nil)
}

// nginxFailOpen is nginx.conf with the documented fail-open snippets, where
// docs/gateways.md says to put them.
func nginxFailOpen(t *testing.T) string {
	t.Helper()
	conf := docFile(t, "nginx.conf")
	conf = strings.Replace(conf, "        error_page 403 = @ratelimited;\n", "        error_page 403 = @ratelimited;\n"+docFile(t, "nginx-fail-open-error-page.conf"), 1)
	i := strings.LastIndex(conf, "}")
	return conf[:i] + "\n" + docFile(t, "nginx-fail-open-named-location.conf") + conf[i:]
}

// hostileGateways are the proxies the attacks go through: nginx as
// documented, nginx with the fail-open snippets (where a sidecar's error
// would let a request through unlimited), and Caddy.
var hostileGateways = []struct {
	label string
	gw    gateway
}{
	{"nginx", gateway{name: "nginx", start: func(t *testing.T, proxy, sidecar, app int) {
		startNginxConns(t, ports(docFile(t, "nginx.conf"), proxy, sidecar, app), proxy, 2048)
	}}},
	{"nginx fail-open", gateway{name: "nginx", start: func(t *testing.T, proxy, sidecar, app int) {
		startNginxConns(t, ports(nginxFailOpen(t), proxy, sidecar, app), proxy, 2048)
	}}},
	{"caddy", gateways[1]},
}

// hostilePolicies are the documented policies and one that makes its
// requests wait their turn (one leaves every 2 s, a thousand may wait), as
// a file for the sidecar.
func hostilePolicies(t *testing.T) string {
	t.Helper()
	src := docFile(t, "policies.yaml") + `  - name: queue
    match: {path_prefix: /slow/}
    key: header:X-Api-Key
    missing_key: key:ip
    algo: leaky
    limit: 1
    scale: 2s
    queue: 1000
    wait: true
`
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return path
}

// reachedApp reports whether an answer came from the app behind the proxy.
func reachedApp(r gwReply) bool { return r.status == 200 && strings.HasPrefix(r.body, "app ") }

// victim is a well-behaved client from its own address: a path no policy
// matches, and its own API key (limit 5 a minute) asked 7 times. Alone it
// gets 200 from the app for every public request, 200 for its first five
// API requests and 429 for the last two: run checks that it gets exactly
// that, with no error, refusal or timeout, while the attack goes on.
type victim struct {
	from, base, key string
	mu              sync.Mutex
	wrong           []string
	api, public     int
}

func (v *victim) step(t *testing.T, c *http.Client) {
	want := func(what string, r gwReply, err error, status int, body string) {
		switch {
		case err != nil:
			v.wrong = append(v.wrong, fmt.Sprintf("%s: %v", what, err))
		case r.status != status || body != "" && r.body != body:
			v.wrong = append(v.wrong, fmt.Sprintf("%s: %d %.80q, want %d", what, r.status, r.body, status))
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r, err := tryGet(c, v.base+"/public")
	want("GET /public", r, err, 200, "app GET /public")
	v.public++
	if v.api < 7 {
		if v.api == 0 {
			// The documented api policy counts in minutes aligned to the
			// clock: its seven requests must not straddle a minute's end,
			// where the count starts again.
			awayFromMinuteEnd(15 * time.Second)
		}
		v.api++
		r, err = tryGet(c, v.base+"/api/x", "X-Api-Key", v.key)
		if v.api <= 5 {
			want("GET /api/x #"+strconv.Itoa(v.api), r, err, 200, "app GET /api/x")
		} else {
			want("GET /api/x #"+strconv.Itoa(v.api), r, err, 429, "")
		}
	}
}

// awayFromMinuteEnd waits, when less than room is left of the current
// minute, for the next one to begin.
func awayFromMinuteEnd(room time.Duration) {
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < room {
		time.Sleep(left + 10*time.Millisecond)
	}
}

// tryGet is send that reports errors instead of failing the test, for
// goroutines.
func tryGet(c *http.Client, url string, hdr ...string) (gwReply, error) {
	req, err := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	if err != nil {
		return gwReply{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return gwReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return gwReply{resp.StatusCode, resp.Header, string(b)}, err
}

// metric reads one series of the sidecar's /metrics.
func metric(t *testing.T, sc *sidecar, name string) float64 {
	t.Helper()
	v, err := tryMetric(sc, name)
	require.NoError(t, err)
	return v
}

// tryMetric is metric that reports errors instead of failing the test.
func tryMetric(sc *sidecar, name string) (float64, error) {
	r, err := tryGet(clientFrom("127.0.0.1"), sc.base+"/metrics")
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(r.body)
	if m == nil {
		return 0, fmt.Errorf("no %s in /metrics: %d %.100q", name, r.status, r.body)
	}
	return strconv.ParseFloat(m[1], 64)
}

// settledRSS is the sidecar's resident memory once it stops falling (a
// few seconds at most): what the attack left behind, not what it is still
// giving back.
func settledRSS(t *testing.T, sc *sidecar, bound int64) int64 {
	t.Helper()
	var rss int64
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		rss, err = readRSS(sc.Cmd.Process.Pid)
		require.NoError(t, err)
		if rss <= bound || time.Now().After(deadline) {
			return rss
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHostileHeldAnswersAreBounded: one client address asks, through the
// proxy, on 150 keep-alive connections with a made-up key each, for a
// policy whose requests wait their turn, and asks again after each answer.
// Unbounded, its held answers took every connection the sidecar allows the
// proxy (8,192 by default; with 8,500 attacking connections every other
// client behind the proxy got a 500, and with the fail-open snippets no
// limit at all). Here the bound is 240, above the attacker's 150
// connections, so that a busy machine's stalls, which let quick answers
// pile up on many connections at once, never reach it: what is judged is
// that held answers stay within their bound. Its held answers stay within -max-held-per-client, the rest are
// denied at once, and a victim on another address gets exactly the
// answers it gets alone; the sidecar's memory comes back.
func TestHostileHeldAnswersAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("drives nginx and caddy")
	}
	const conns, perClient = 150, 10
	for _, hg := range hostileGateways {
		t.Run(hg.label, func(t *testing.T) {
			base, sc := startGatewayWith(t, hg.gw, hostilePolicies(t), "-trusted-proxies", "127.0.0.1",
				"-max-conns-per-proxy", "240", "-max-held-per-client", strconv.Itoa(perClient), "-max-wait", "3s")
			v := &victim{from: "127.0.0.3", base: base, key: "victim-key"}
			vc := clientFrom(v.from)
			// Alone, a victim's waiting request passes at once: its own
			// queue is empty.
			r := send(t, vc, "GET", base+"/slow/x", "X-Api-Key", "victim-slow")
			require.Equal(t, 200, r.status, r.body)
			rss0, err := readRSS(sc.Cmd.Process.Pid)
			require.NoError(t, err)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var served, denied, failed atomic.Int64
			var failMu sync.Mutex
			fails := map[string]int{}
			fail := func(what string) {
				failed.Add(1)
				failMu.Lock()
				fails[what]++
				failMu.Unlock()
			}
			for i := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := clientFrom("127.0.0.2")
					c.Timeout = 15 * time.Second
					defer c.CloseIdleConnections()
					key := "made-up-" + strconv.Itoa(i)
					// A ramp over 0.75 s, as a client's connections
					// arrive.
					time.Sleep(time.Duration(i) * 5 * time.Millisecond)
					for {
						select {
						case <-stop:
							return
						default:
						}
						r, err := tryGet(c, base+"/slow/x", "X-Api-Key", key)
						switch {
						case err != nil:
							fail(err.Error())
						case r.status == 200:
							served.Add(1)
						case r.status == 429:
							denied.Add(1)
							time.Sleep(500 * time.Millisecond) // and asks again
						default:
							fail(strconv.Itoa(r.status) + " " + r.body)
						}
					}
				}()
			}
			var maxHeld float64
			time.Sleep(time.Second)
			for range 20 {
				time.Sleep(200 * time.Millisecond)
				if held, err := tryMetric(sc, "raterlimiter_held_answers"); err == nil {
					maxHeld = max(maxHeld, held)
				} else {
					v.mu.Lock()
					v.wrong = append(v.wrong, "GET /metrics (from the proxy's address): "+err.Error())
					v.mu.Unlock()
				}
				v.step(t, vc)
			}
			close(stop)
			wg.Wait()
			t.Logf("%s: the attacker was served %d, denied %d, failed %d; held answers at most %v; proxy connections refused %v; RSS before %s MiB",
				hg.label, served.Load(), denied.Load(), failed.Load(), maxHeld, metric(t, sc, "raterlimiter_connections_refused_total"), mib(float64(rss0)))
			for what, n := range fails {
				t.Logf("%s: the attacker got %d × %.100q", hg.label, n, what)
			}

			assert.Empty(t, v.wrong, "the victim gets the answers it gets alone")
			assert.Equal(t, 7, v.api)
			assert.LessOrEqual(t, maxHeld, float64(perClient), "held answers of one client address stay within -max-held-per-client")
			assert.Positive(t, metric(t, sc, "raterlimiter_held_answers_refused_total"), "the bound was met")
			assert.Positive(t, denied.Load(), "past the bound, a denial at once")
			assert.Zero(t, metric(t, sc, "raterlimiter_connections_refused_total"), "the proxy's connections were never all taken")
			r = send(t, vc, "GET", base+"/slow/y", "X-Api-Key", "victim-slow-2")
			assert.Equal(t, 200, r.status, "the victim's own queue is still its own")
			rss := settledRSS(t, sc, 2*rss0)
			t.Logf("%s: RSS after %s MiB", hg.label, mib(float64(rss)))
			assert.LessOrEqual(t, rss, 2*rss0, "the sidecar's memory is back within twice what it was")
		})
	}
}

// junkHeaders are n headers of size bytes each, of printable junk.
func junkHeaders(n, size int) []string {
	var hdr []string
	for i := range n {
		hdr = append(hdr, "X-Junk-"+strconv.Itoa(i), strings.Repeat(string(rune('a'+i%26)), size))
	}
	return hdr
}

// TestHostileJunkHeadersAreDecided: a client's big or odd headers, which
// the proxy accepts and passes on to /auth, never make /auth answer
// anything but allow or deny: the sidecar answered 431 to two 5,000-byte
// headers and 400 to a 1,100-byte key, nginx made each a 500, and with the
// fail-open snippets every login reached the app. A well-behaved client on
// another address gets the answers it gets alone meanwhile, and the
// sidecar's memory comes back.
func TestHostileJunkHeadersAreDecided(t *testing.T) {
	if testing.Short() {
		t.Skip("drives nginx and caddy")
	}
	for _, hg := range hostileGateways {
		t.Run(hg.label, func(t *testing.T) {
			base, sc := startGatewayWith(t, hg.gw, hostilePolicies(t), "-max-id-bytes", "1024")
			v := &victim{from: "127.0.0.3", base: base, key: "victim-key"}
			vc := clientFrom(v.from)
			require.Equal(t, 200, send(t, vc, "GET", base+"/warm-up").status)
			rss0, err := readRSS(sc.Cmd.Process.Pid)
			require.NoError(t, err)

			type attack struct {
				name   string
				method string
				target string
				hdr    []string
				n      int // requests sent
				limit  int // most that may reach the app
			}
			attacks := []attack{
				{"two 5,000-byte junk headers on POST /login", "POST", "/login", junkHeaders(2, 5000), 200, 3},
				{"a 1,100-byte key", "GET", "/api/x", []string{"X-Api-Key", strings.Repeat("k", 1100)}, 20, 0},
				{"three 7,000-byte junk headers on POST /login", "POST", "/login", junkHeaders(3, 7000), 20, 3},
				{"control bytes and non-ASCII in a header", "POST", "/login", []string{"X-Junk", "a\x01b\x7fc\xff\xfe"}, 20, 3},
				{"60 KB of headers in four lines", "POST", "/login", junkHeaders(4, 15000), 20, 3},
				{"300 KB of headers in twenty lines (Caddy passes up to 1 MB)", "POST", "/login", junkHeaders(20, 15000), 20, 3},
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
						v.step(t, vc)
					}
				}
			}()
			for i, a := range attacks {
				from := "127.0.0." + strconv.Itoa(20+i)
				var reached, errs atomic.Int64
				statuses := map[int]int{}
				bodies := map[int]string{}
				var mu sync.Mutex
				var awg sync.WaitGroup
				for range 10 {
					awg.Add(1)
					go func() {
						defer awg.Done()
						for range a.n / 10 {
							r, err := rawFrom(from, base, a.method, a.target, a.hdr...)
							if err != nil {
								errs.Add(1)
								continue
							}
							mu.Lock()
							statuses[r.status]++
							bodies[r.status] = r.body
							mu.Unlock()
							if reachedApp(r) {
								reached.Add(1)
							}
						}
					}()
				}
				awg.Wait()
				t.Logf("%s: %s: %v", hg.label, a.name, statuses)
				assert.Zero(t, errs.Load(), "%s: %s", hg.label, a.name)
				assert.LessOrEqual(t, reached.Load(), int64(a.limit), "%s: %s: the app sees at most the limit: %v", hg.label, a.name, statuses)
				for st := range statuses {
					// 200 and 429 are the sidecar's allow and deny; a
					// proxy may refuse a request itself (nginx: a header
					// line over 8 KB; Go's net/http in Caddy: control
					// bytes in a value), which then reaches nobody. An
					// error of the sidecar shows as a 5xx (nginx) or as
					// itself (Caddy); the sidecar's bodies are JSON.
					proxyRefused := st == 400 && !strings.HasPrefix(bodies[st], "{")
					assert.True(t, st == 200 || st == 429 || proxyRefused,
						"%s: %s: status %d: allow or deny, never an error (%v): %.200s", hg.label, a.name, st, statuses, bodies[st])
				}
			}
			close(stop)
			wg.Wait()
			for v.api < 7 {
				v.step(t, vc)
			}
			assert.Empty(t, v.wrong, "the victim gets the answers it gets alone")
			rss := settledRSS(t, sc, 2*rss0)
			t.Logf("%s: RSS before %s MiB, after %s MiB", hg.label, mib(float64(rss0)), mib(float64(rss)))
			assert.LessOrEqual(t, rss, 2*rss0, "the sidecar's memory is back within twice what it was")
		})
	}
}

// TestHostileFailOpenOnlyWhenUnreachable: the documented fail-open
// snippets let requests through only when nginx cannot reach the sidecar;
// an answer of the sidecar that is no allow or deny (here a 503: started
// without -auth-headers) stays an error, since some of them a client can
// provoke.
func TestHostileFailOpenOnlyWhenUnreachable(t *testing.T) {
	open := hostileGateways[1].gw
	base, sc := startGatewayWith(t, open, hostilePolicies(t), "-auth-headers", "")
	r := send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k")
	assert.Equal(t, 500, r.status, "a 503 of the sidecar is not a way around the limit")
	assert.NotContains(t, r.body, "app ")
	require.NoError(t, sc.stop(t))
	r = send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k")
	assert.Equal(t, 200, r.status, "the sidecar is down: through, unlimited")
	assert.Equal(t, "app GET /api/x", r.body)
}

// rawFrom is sendRaw for goroutines: it reports errors instead of failing
// the test.
func rawFrom(from, base, method, target string, hdr ...string) (gwReply, error) {
	addr := strings.TrimPrefix(base, "http://")
	c, err := dialFrom(from, addr)
	if err != nil {
		return gwReply{}, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return gwReply{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	fmt.Fprintf(&b, "Host: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", addr)
	if _, err := io.WriteString(c, b.String()); err != nil {
		return gwReply{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return gwReply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return gwReply{resp.StatusCode, resp.Header, string(body)}, err
}

// TestHostileRawHashIsNeverABypass: GET /x#/../api/x. nginx passes the raw
// target on, and a Go backend keeps the "#" as a path byte and cleans the
// path to /api/x; the sidecar cut the path at "#" and counted nothing. A
// raw "#" is denied now (an escaped one is a path byte and is counted).
func TestHostileRawHashIsNeverABypass(t *testing.T) {
	for _, hg := range hostileGateways {
		t.Run(hg.label, func(t *testing.T) {
			base, _ := startGatewayWith(t, hg.gw, hostilePolicies(t))
			for i, target := range []string{"/x#/../api/x", "/api/x#frag", "/x%23/../api/x"} {
				from := "127.0.0." + strconv.Itoa(30+i)
				reached := 0
				var statuses []int
				for range 7 {
					r := sendRaw(t, from, base, "GET", target, "X-Api-Key", "hash-key-"+strconv.Itoa(i))
					statuses = append(statuses, r.status)
					if reachedApp(r) && servedUnderAPI(r.body) {
						reached++
					}
					assert.Less(t, r.status, 500, "%s: %s: never an error", hg.label, target)
				}
				t.Logf("%s: %s: %v", hg.label, target, statuses)
				assert.LessOrEqual(t, reached, 5, "%s: %s: counted (the api limit is 5) or denied, never let through: %v", hg.label, target, statuses)
			}
		})
	}
}

// servedUnderAPI reports whether the app's answer ("app METHOD PATH") was
// for a path a Go backend (http.FileServer, ServeMux) serves under /api/:
// the path cleaned, or cut at a "#" as nginx's own locations do.
func servedUnderAPI(body string) bool {
	f := strings.SplitN(body, " ", 3)
	if len(f) < 3 {
		return false
	}
	cut, _, _ := strings.Cut(f[2], "#")
	return strings.HasPrefix(path.Clean(f[2]), "/api/") || strings.HasPrefix(path.Clean(cut), "/api/")
}

// TestHostileKeyHeaderTwiceOrAList: a fresh X-Api-Key first and the real
// one second, or one header "fresh, real". The sidecar counted the fresh
// value and the app received both; they deny now, and count nothing: the
// real key alone still has its five.
func TestHostileKeyHeaderTwiceOrAList(t *testing.T) {
	for _, hg := range hostileGateways {
		t.Run(hg.label, func(t *testing.T) {
			base, _ := startGatewayWith(t, hg.gw, hostilePolicies(t))
			from := "127.0.0.40"
			for _, tc := range []struct {
				name string
				hdr  func(i int) []string
			}{
				{"two lines", func(i int) []string { return []string{"X-Api-Key", "fresh-" + strconv.Itoa(i), "X-Api-Key", "real"} }},
				{"two lines, the first empty", func(i int) []string { return []string{"X-Api-Key", "", "X-Api-Key", "real"} }},
				{"a list", func(i int) []string { return []string{"X-Api-Key", "fresh-" + strconv.Itoa(i) + ", real"} }},
			} {
				var statuses []int
				for i := range 7 {
					r := sendRaw(t, from, base, "GET", "/api/x", tc.hdr(i)...)
					statuses = append(statuses, r.status)
					assert.False(t, reachedApp(r), "%s: %s: denied", hg.label, tc.name)
					assert.Less(t, r.status, 500, "%s: %s: never an error", hg.label, tc.name)
				}
				t.Logf("%s: %s: %v", hg.label, tc.name, statuses)
			}
			for i := range 5 {
				r := sendRaw(t, from, base, "GET", "/api/x", "X-Api-Key", "real")
				assert.True(t, reachedApp(r), "%s: the real key alone, %d of 5: nothing was counted under it", hg.label, i+1)
			}
			assert.Equal(t, 429, sendRaw(t, from, base, "GET", "/api/x", "X-Api-Key", "real").status)
		})
	}
}
