package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// The gateway tests drive the real nginx and Caddy with the configurations
// docs/gateways.md shows (docs/gateways/*), a small upstream app and the
// sidecar binary, all on loopback ports the OS picks.

const gatewayDocs = "../../docs/gateways"

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// docFile reads a file of docs/gateways.
func docFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gatewayDocs, name))
	require.NoError(t, err)
	return string(b)
}

// ports rewrites the documented addresses (proxy :8000, sidecar :8080, app
// :9000) to the test's; the proxies still serve any host name.
func ports(conf string, proxy, sidecar, app int) string {
	return strings.NewReplacer(
		"127.0.0.1:8080", "127.0.0.1:"+strconv.Itoa(sidecar),
		"127.0.0.1:9000", "127.0.0.1:"+strconv.Itoa(app),
		"listen 8000;", "listen 127.0.0.1:"+strconv.Itoa(proxy)+";",
		":8000 {", "http://:"+strconv.Itoa(proxy)+" {\n\tbind 127.0.0.1",
		`address: ":8000"`, `address: "127.0.0.1:`+strconv.Itoa(proxy)+`"`,
	).Replace(conf)
}

// upstream is the app behind the proxy: it answers 200 "app" and the path.
func upstream(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app %s %s", r.Method, r.URL.Path)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// runProxy starts a proxy process and waits until port answers.
func runProxy(t *testing.T, port int, name string, args []string, env []string) {
	t.Helper()
	p := tooltest.Start(t, env, name, args...)
	p.WaitUntil(t, 20*time.Second, "a listener on port "+strconv.Itoa(port), func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// startNginx runs nginx in the foreground with the documented server block
// (conf) inside a minimal main configuration of its own paths, and returns
// its directory, where error.log is.
func startNginx(t *testing.T, conf string, port int) string {
	t.Helper()
	bin := tooltest.Need(t, "nginx", "nginx-light")
	dir := t.TempDir()
	main := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/server.conf;
}
`, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.conf"), []byte(conf), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644))
	runProxy(t, port, bin, []string{"-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log")}, nil)
	return dir
}

// startCaddy runs caddy with the documented Caddyfile, no admin endpoint
// and no automatic HTTPS, its state in a temporary directory.
func startCaddy(t *testing.T, conf string, port int) {
	t.Helper()
	bin := tooltest.Need(t, "caddy", "caddy")
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	require.NoError(t, os.WriteFile(file, []byte("{\n\tadmin off\n\tauto_https off\n}\n\n"+conf), 0o644))
	runProxy(t, port, bin, []string{"run", "--config", file, "--adapter", "caddyfile"},
		[]string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir})
}

// startTraefik runs traefik with the documented static and dynamic files,
// the dynamic one where the static one says, rewritten to the test's
// directory.
func startTraefik(t *testing.T, static, dynamic string, port int) {
	t.Helper()
	bin := needTraefik(t)
	dir := t.TempDir()
	static = strings.ReplaceAll(static, "/etc/traefik/", dir+"/")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "traefik.yml"), []byte(static), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "traefik-dynamic.yml"), []byte(dynamic), 0o644))
	runProxy(t, port, bin, []string{"--configFile=" + filepath.Join(dir, "traefik.yml")}, []string{"HOME=" + dir})
	// The file provider loads the routes a moment after the port opens:
	// until then Traefik answers 404 for every path.
	c := client("127.0.0.1")
	require.Eventually(t, func() bool {
		resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/nothing-limits-this")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode != 404
	}, 20*time.Second, 50*time.Millisecond, "traefik loads its routes")
}

// needTraefik returns the traefik binary on PATH. Debian has no package
// of it: .ci/run builds it from the Go module proxy into a cache outside
// the repository and puts it on PATH. It skips t when traefik is missing,
// or fails t under CI=true.
func needTraefik(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("traefik"); err == nil {
		return path
	}
	msg := "traefik not found on PATH: bash .ci/run builds it (docs/gateways.md, Traefik)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: tests must not skip)", msg)
	}
	t.Skip(msg)
	return ""
}

// client sends requests from the loopback address from (127.0.0.2 and up:
// a client distinct from the proxy, which the policies trust).
// Each request opens its own connection, as a new peer would.
func client(from string) *http.Client {
	c := clientFrom(from)
	c.Transport.(*http.Transport).DisableKeepAlives = true
	return c
}

type gwReply struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, c *http.Client, method, url string, hdr ...string) gwReply {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return gwReply{resp.StatusCode, resp.Header, string(b)}
}

type gateway struct {
	name       string // also the sidecar's -auth-headers
	start      func(t *testing.T, proxy, sidecar, app int)
	allowHeads bool // the client sees RateLimit headers on allowed requests
}

var gateways = []gateway{
	{name: "nginx", allowHeads: true, start: func(t *testing.T, proxy, sidecar, app int) {
		startNginx(t, ports(docFile(t, "nginx.conf"), proxy, sidecar, app), proxy)
	}},
	{name: "caddy", start: func(t *testing.T, proxy, sidecar, app int) {
		startCaddy(t, ports(docFile(t, "Caddyfile"), proxy, sidecar, app), proxy)
	}},
	{name: "traefik", start: func(t *testing.T, proxy, sidecar, app int) {
		// The loopback entry point ForwardAuth asks the sidecar through.
		hop := "127.0.0.1:" + strconv.Itoa(freePort(t))
		conf := func(name string) string {
			return strings.ReplaceAll(ports(docFile(t, name), proxy, sidecar, app), "127.0.0.1:8001", hop)
		}
		startTraefik(t, conf("traefik.yml"), conf("traefik-dynamic.yml"), proxy)
	}},
}

// startGateway runs the sidecar with the documented policies (and
// -auth-headers of the gateway), the app and the proxy, and returns the
// proxy's base URL and the sidecar.
func startGateway(t *testing.T, g gateway, sidecarArgs ...string) (string, *sidecar) {
	t.Helper()
	return startGatewayWith(t, g, filepath.Join(gatewayDocs, "policies.yaml"), sidecarArgs...)
}

// startGatewayWith is startGateway with another policies file.
func startGatewayWith(t *testing.T, g gateway, policies string, sidecarArgs ...string) (string, *sidecar) {
	t.Helper()
	args := append([]string{"-policies", policies, "-auth-headers", g.name, "-max-id-bytes", "4096"}, sidecarArgs...)
	sc := start(t, nil, args...)
	_, sport, err := net.SplitHostPort(sc.addr)
	require.NoError(t, err)
	sidecarPort, _ := strconv.Atoi(sport)
	proxy, app := freePort(t), upstream(t)
	g.start(t, proxy, sidecarPort, app)
	return "http://127.0.0.1:" + strconv.Itoa(proxy), sc
}

func TestGatewayLimitsByKeyBehindRealProxies(t *testing.T) {
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			base, _ := startGateway(t, g)
			c := client("127.0.0.2")
			hostile := []string{"plain-key", "k&hits=0", "k%26hits%3D0", "k?id=x", "k with spaces", "k&algo=token&limit=1000000", strings.Repeat("K", 2048)}
			for _, key := range hostile {
				for i := range 5 {
					r := send(t, c, "GET", base+"/api/things", "X-Api-Key", key)
					require.Equal(t, 200, r.status, "%s: %q hit %d of 5: %s", g.name, key[:min(len(key), 30)], i+1, r.body)
					assert.Equal(t, "app GET /api/things", r.body)
					if g.allowHeads {
						assert.Equal(t, `"api";q=5;w=60`, r.header.Get("RateLimit-Policy"))
						assert.Contains(t, r.header.Get("RateLimit"), `"api";r=`+strconv.Itoa(4-i)+`;t=`)
					}
				}
				r := send(t, c, "GET", base+"/api/things", "X-Api-Key", key)
				require.Equal(t, 429, r.status, "%s: the sixth hit of %q is over the limit of 5: the key smuggled no parameter", g.name, key[:min(len(key), 30)])
				assert.Equal(t, `"api";q=5;w=60`, r.header.Get("RateLimit-Policy"))
				assert.Contains(t, r.header.Get("RateLimit"), `"api";r=0;t=`)
				retry, err := strconv.Atoi(r.header.Get("Retry-After"))
				require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
				assert.True(t, retry >= 1 && retry <= 60, "Retry-After %d", retry)
				assert.NotContains(t, r.body, key, "the deny body never shows the key")
				assert.NotContains(t, r.body, "app", "the app never saw it")
			}
		})
	}
}

func TestGatewayLimitsByClientAddressBehindRealProxies(t *testing.T) {
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			base, _ := startGateway(t, g)
			a, b := client("127.0.0.2"), client("127.0.0.3")
			for i := range 3 {
				r := send(t, a, "POST", base+"/login")
				require.Equal(t, 200, r.status, "login %d of 3: %s", i+1, r.body)
			}
			r := send(t, a, "POST", base+"/login")
			assert.Equal(t, 429, r.status)
			assert.Contains(t, r.header.Get("RateLimit"), `"login";r=0;t=`)
			r = send(t, a, "POST", base+"/login", "X-Forwarded-For", "203.0.113.99")
			assert.Equal(t, 429, r.status, "a client cannot pick its address: the proxy appends the real one")
			r = send(t, b, "POST", base+"/login")
			assert.Equal(t, 200, r.status, "another client address, its own counter")
			r = send(t, a, "GET", base+"/login")
			assert.Equal(t, 200, r.status, "GET /login matches no policy")
			assert.Empty(t, r.header.Get("RateLimit-Policy"))
		})
	}
}

// TestGatewaySidecarDown shows what docs/gateways.md says: nginx answers
// 500 when the sidecar cannot answer, unless configured to fail open,
// Caddy and Traefik 502.
func TestGatewaySidecarDown(t *testing.T) {
	t.Run("nginx, default: 500", func(t *testing.T) {
		base, sc := startGateway(t, gateways[0])
		require.Equal(t, 200, send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k").status)
		require.NoError(t, sc.stop(t))
		assert.Equal(t, 500, send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k").status)
	})
	t.Run("caddy: 502", func(t *testing.T) {
		base, sc := startGateway(t, gateways[1])
		require.Equal(t, 200, send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k").status)
		require.NoError(t, sc.stop(t))
		r := send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k")
		assert.Equal(t, 502, r.status)
		assert.NotContains(t, r.body, "app", "the request does not reach the app")
	})
	t.Run("traefik: 502", func(t *testing.T) {
		base, sc := startGateway(t, gateways[2])
		require.Equal(t, 200, send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k").status)
		require.NoError(t, sc.stop(t))
		r := send(t, client("127.0.0.2"), "GET", base+"/api/x", "X-Api-Key", "k")
		assert.Equal(t, 502, r.status, "Traefik's service to the sidecar answers ForwardAuth 502, which it passes on")
		assert.NotContains(t, r.body, "app", "the request does not reach the app")
	})
	t.Run("nginx, fail open", func(t *testing.T) {
		open := gateway{name: "nginx", start: func(t *testing.T, proxy, sidecar, app int) {
			conf := docFile(t, "nginx.conf")
			conf = strings.Replace(conf, "        error_page 403 = @ratelimited;\n", "        error_page 403 = @ratelimited;\n"+docFile(t, "nginx-fail-open-error-page.conf"), 1)
			i := strings.LastIndex(conf, "}")
			conf = conf[:i] + "\n" + docFile(t, "nginx-fail-open-named-location.conf") + conf[i:]
			startNginx(t, ports(conf, proxy, sidecar, app), proxy)
		}}
		base, sc := startGateway(t, open)
		c := client("127.0.0.2")
		for range 5 {
			require.Equal(t, 200, send(t, c, "GET", base+"/api/x", "X-Api-Key", "k").status)
		}
		assert.Equal(t, 429, send(t, c, "GET", base+"/api/x", "X-Api-Key", "k").status, "still limited while the sidecar answers")
		require.NoError(t, sc.stop(t))
		r := send(t, c, "GET", base+"/api/x", "X-Api-Key", "k")
		assert.Equal(t, 200, r.status, "the sidecar is down: the request goes through unlimited")
		assert.Equal(t, "app GET /api/x", r.body)
	})
}

// TestGatewayDocsShowTheTestedFiles keeps docs/gateways.md and the files
// the tests run the same.
func TestGatewayDocsShowTheTestedFiles(t *testing.T) {
	doc, err := os.ReadFile("../../docs/gateways.md")
	require.NoError(t, err)
	for _, name := range []string{"policies.yaml", "nginx.conf", "nginx-fail-open-error-page.conf", "nginx-fail-open-named-location.conf",
		"Caddyfile", "traefik.yml", "traefik-dynamic.yml"} {
		assert.Contains(t, string(doc), docFile(t, name), "docs/gateways.md shows docs/gateways/%s as it is", name)
	}
}

func TestPoliciesFileAtStart(t *testing.T) {
	good := filepath.Join(gatewayDocs, "policies.yaml")
	code, out, _ := runBinary(t, nil, "-check-policies", good)
	assert.Equal(t, 0, code)
	assert.Equal(t, good+": ok, 2 policies\n", out)

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("policies:\n  - name: x\n    key: ip\n    limit: 3\n    scal: 1m\n"), 0o600))
	code, _, errOut := runBinary(t, nil, "-check-policies", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, bad+`:5: a policy: unknown field "scal"`)

	code, _, errOut = runBinary(t, nil, "-listen", "127.0.0.1:0", "-policies", bad)
	assert.Equal(t, 2, code, "a bad file refuses to start")
	assert.Contains(t, errOut, bad+":5: ")
	code, _, errOut = runBinary(t, []string{"RATERLIMITER_POLICIES=" + bad}, "-listen", "127.0.0.1:0")
	assert.Equal(t, 2, code, "the environment sets -policies too")
	assert.Contains(t, errOut, bad+":5: ")
	code, _, errOut = runBinary(t, nil, "-listen", "127.0.0.1:0", "-policies-only")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-policies-only needs -policies")
	code, _, errOut = runBinary(t, nil, "-listen", "127.0.0.1:0", "-auth-deny-status", "500")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-auth-deny-status must be 429, 401 or 403")
}

func TestPoliciesReloadOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(limit int) {
		require.NoError(t, os.WriteFile(path, []byte("policies:\n  - {name: p, key: 'header:K', limit: "+strconv.Itoa(limit)+", scale: 1m}\n"), 0o600))
	}
	write(2)
	s := start(t, nil, "-policies", path, "-policies-only", "-watch-files=false")
	for range 2 {
		require.Equal(t, 200, s.get(t, "/check_rate?policy=p&id=a").status)
	}
	require.Equal(t, 429, s.get(t, "/check_rate?policy=p&id=a").status)
	assert.Equal(t, 400, s.get(t, "/check_rate?id=a&scale=1000&limit=99").status, "-policies-only")

	write(5)
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(s.logs(), "policies reloaded") }, 10*time.Second, 20*time.Millisecond)
	r := s.get(t, "/check_rate?policy=p&id=a")
	assert.Equal(t, 200, r.status, "the new limit, and the count kept: 4 of 5")
	assert.Equal(t, `"p";q=5;w=60`, r.header.Get("RateLimit-Policy"))

	require.NoError(t, os.WriteFile(path, []byte("policies: [\n"), 0o600))
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(s.logs(), "policies not reloaded") }, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, s.logs(), path+":")
	assert.Equal(t, 200, s.get(t, "/check_rate?policy=p&id=a").status, "a bad file keeps the rules: 5 of 5")
	assert.Equal(t, 429, s.get(t, "/check_rate?policy=p&id=a").status)
	assert.Contains(t, s.get(t, "/metrics").body, `raterlimiter_policy_reloads_total{result="failed"} 1`)
	require.NoError(t, s.stop(t))
}
