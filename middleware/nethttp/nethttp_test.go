package nethttp_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/internal/mwtest"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

var (
	clock    = mwtest.Clock
	limiters = mwtest.Limiters
)

// serve sends one request from peer through h and returns the answer and
// whether the next handler ran.
func serve(t *testing.T, h func(http.Handler) http.Handler, peer string, hdr map[string]string) (*http.Response, string, bool) {
	t.Helper()
	reached := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		_, _ = io.WriteString(w, "page")
	})
	req := httptest.NewRequest(http.MethodGet, "/index.html", nil)
	req.RemoteAddr = peer
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h(next).ServeHTTP(w, req)
	resp := w.Result()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b), reached
}

func newMW(t *testing.T, cfg middleware.Config, key func(*http.Request) string) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := nethttp.New(cfg, key)
	require.NoError(t, err)
	return mw
}

// TestAdapter runs the behaviour every middleware adapter shows: limits and
// headers, keys, and what a failing limiter gets.
func TestAdapter(t *testing.T) {
	mwtest.Run(t, func(t *testing.T, cfg middleware.Config, key mwtest.KeyFunc) func(string, map[string]string) mwtest.Answer {
		var k func(*http.Request) string
		if key != nil {
			k = func(r *http.Request) string { return key(r.Header.Get) }
		}
		h := newMW(t, cfg, k)
		return func(peer string, hdr map[string]string) mwtest.Answer {
			resp, body, reached := serve(t, h, peer, hdr)
			return mwtest.Answer{Status: resp.StatusCode, Header: resp.Header, Body: body, Reached: reached}
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := nethttp.New(middleware.Config{}, nil)
	assert.ErrorContains(t, err, "middleware: Config.Limiter is nil")
}

// TestMissingKeyOnTheWire: a key header net/http reads as absent, empty or
// white space is a 400, never a request let through.
func TestMissingKeyOnTheWire(t *testing.T) {
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	h := newMW(t, middleware.Config{Limiter: lim, Policy: rl.Request{Scale: 30 * time.Second, Limit: 1}, KeyName: "X-Api-Key"},
		func(r *http.Request) string { return r.Header.Get("X-Api-Key") })
	srv := httptest.NewServer(h(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "page") })))
	t.Cleanup(srv.Close)
	mwtest.OnTheWire(t, func() (net.Conn, error) { return net.Dial("tcp", srv.Listener.Addr().String()) })
}
