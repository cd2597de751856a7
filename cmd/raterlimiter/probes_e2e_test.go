package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// probes asks what a kubelet's probes would: /livez and /readyz by GET,
// and the same through the binary as its own probe (-healthcheck), as the
// manifests' exec probes run it.
type probes struct {
	t    *testing.T
	bin  string
	s    *sidecar
	sock string // the main listener's socket, probed with unix:SOCK:/PATH
}

func (p probes) status(path string) int {
	p.t.Helper()
	return p.s.get(p.t, path).status
}

// probe runs `raterlimiter -healthcheck` on the admin listener (TCP) and
// the socket, and returns both exit statuses.
func (p probes) probe(path string) (tcp, unix int) {
	p.t.Helper()
	tcp, _, _ = tooltest.Run(p.t, p.bin, "-healthcheck", p.s.base+path)
	unix, _, _ = tooltest.Run(p.t, p.bin, "-healthcheck", "unix:"+p.sock+":"+path)
	return tcp, unix
}

// check sends one check through the socket and returns its status.
func (p probes) check() int {
	p.t.Helper()
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", p.sock)
		}}}
	resp, err := c.Get("http://localhost/check_rate?id=probe&scale=60000&limit=5")
	require.NoError(p.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// live asserts the process is live, whatever its backend does.
func (p probes) live() {
	p.t.Helper()
	assert.Equal(p.t, 200, p.status("/livez"))
	tcp, unix := p.probe("/livez")
	assert.Equal(p.t, 0, tcp, "-healthcheck %s/livez", p.s.base)
	assert.Equal(p.t, 0, unix, "-healthcheck unix:%s:/livez", p.sock)
}

// ready asserts /readyz says want (200 or 503), over HTTP and through the
// binary's probe.
func (p probes) ready(want int) {
	p.t.Helper()
	assert.Equal(p.t, want, p.status("/readyz"))
	code := 0
	if want != 200 {
		code = 1
	}
	tcp, unix := p.probe("/readyz")
	assert.Equal(p.t, code, tcp, "-healthcheck %s/readyz", p.s.base)
	assert.Equal(p.t, code, unix, "-healthcheck unix:%s:/readyz", p.sock)
}

// waitReady waits up to timeout for /readyz to answer 200 and returns how
// long it took.
func (p probes) waitReady(timeout time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	p.s.WaitUntil(p.t, timeout, "/readyz 200", func() bool {
		if p.status("/readyz") == 200 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	return time.Since(start)
}

// startProbed runs a sidecar on a unix socket, as the sidecar shape does,
// with its admin endpoints on TCP, on the Redis at url, with the default
// -redis-fail closed. Both listeners serve the health checks.
func startProbed(t *testing.T, url string) probes {
	t.Helper()
	p := probes{t: t, bin: build(t), sock: filepath.Join(t.TempDir(), "rl.sock")}
	p.s = start(t, nil, "-listen", "unix:"+p.sock, "-admin-listen", "127.0.0.1:0",
		"-backend", "redis", "-redis-url", url, "-redis-timeout", "200ms")
	p.s.base = "http://" + p.s.listenAddr(t, "admin endpoints")
	return p
}

// TestE2ELivezStaysWhileRedisIsDown: with Redis up the sidecar is live and
// ready; Redis killed, it stays live (no restart would bring Redis back)
// and is not ready; Redis back, ready again without a restart.
func TestE2ELivezStaysWhileRedisIsDown(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	p := startProbed(t, rs.URL())
	p.live()
	p.ready(200)
	assert.Equal(t, 200, p.check())

	rs.Kill()
	p.live()
	p.ready(503)
	r := p.s.get(t, "/readyz")
	assert.Contains(t, r.body, "not ready: the backend does not answer")
	assert.Equal(t, 503, p.status("/healthz"), "-redis-fail closed: checks are not answered")
	assert.Equal(t, 503, p.check())

	rs.Restart(t)
	took := p.waitReady(10 * time.Second)
	t.Logf("ready %v after Redis came back", took.Round(time.Millisecond))
	p.live()
	p.ready(200)
	assert.Equal(t, 200, p.status("/healthz"))
	assert.Equal(t, 200, p.check())
	require.NoError(t, p.s.stop(t))
}

// TestE2EStartsBeforeRedis: a sidecar whose Redis is not up yet serves at
// once, live and not ready (checks answered as -redis-fail says), and
// becomes ready within 2 s of Redis answering, without a restart.
func TestE2EStartsBeforeRedis(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	rs.Kill() // its port stays reserved for the restart below
	p := startProbed(t, rs.URL())
	p.live()
	p.ready(503)
	assert.Equal(t, 503, p.check(), "-redis-fail closed")

	rs.Restart(t)
	took := p.waitReady(2 * time.Second)
	t.Logf("ready %v after Redis came up", took.Round(time.Millisecond))
	p.live()
	p.ready(200)
	assert.Equal(t, 200, p.check())
	require.NoError(t, p.s.stop(t))
}
