package nethttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/sidecartest"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

// now is 10 s into a 30 s window: 20 s are left.
const now = 1_700_000_040_000 + 10_000

func clock() int64 { return now }

// limiters returns an embedded limiter and a client of a sidecar over an
// embedded limiter, both on the fixed clock.
func limiters(t *testing.T) map[string]rl.Limiter {
	t.Helper()
	embedded := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { embedded.Close() })
	behind := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { behind.Close() })
	url := sidecartest.Serve(t, api.Config{Limiter: behind})
	c, err := client.New(client.Config{URL: url, Clock: clock, Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return map[string]rl.Limiter{"embedded": embedded, "client": c}
}

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

func newMW(t *testing.T, cfg nethttp.Config) func(http.Handler) http.Handler {
	t.Helper()
	m, err := nethttp.New(cfg)
	require.NoError(t, err)
	return m.Handler
}

var policy = middleware.Policy{Scale: 30_000, Limit: 2}

func TestLimitsAndHeaders(t *testing.T) {
	for name, lim := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			h := newMW(t, nethttp.Config{Config: middleware.Config{Limiter: lim, Policy: policy}})
			reset := strconv.FormatInt((now+20_000)/1000, 10)
			for i, want := range []struct {
				status    int
				remaining string
			}{{200, "1"}, {200, "0"}, {429, "0"}, {429, "0"}} {
				resp, body, reached := serve(t, h, "198.51.100.7:40000", nil)
				assert.Equal(t, want.status, resp.StatusCode, "request %d", i)
				assert.Equal(t, `"default";q=2;w=30`, resp.Header.Get("RateLimit-Policy"))
				assert.Equal(t, `"default";r=`+want.remaining+`;t=20`, resp.Header.Get("RateLimit"))
				assert.Equal(t, "2", resp.Header.Get("X-RateLimit-Limit"))
				assert.Equal(t, want.remaining, resp.Header.Get("X-RateLimit-Remaining"))
				assert.Equal(t, reset, resp.Header.Get("X-RateLimit-Reset"))
				if want.status == 200 {
					assert.True(t, reached)
					assert.Equal(t, "page", body)
					assert.Empty(t, resp.Header.Values("Retry-After"))
					continue
				}
				assert.False(t, reached, "a denied request never reaches the handler")
				assert.Equal(t, "20", resp.Header.Get("Retry-After"))
				assert.Equal(t, "Too many requests, retry in 20 s\n", body)
				assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			}
			resp, _, reached := serve(t, h, "[2001:db8::7]:40000", nil)
			assert.Equal(t, 200, resp.StatusCode, "another peer has its own count")
			assert.True(t, reached)
			bs, err := lim.Buckets(context.Background(), "2001:db8::7")
			require.NoError(t, err)
			require.Len(t, bs, 1, "the key is the bare IP")
			assert.EqualValues(t, 1, bs[0].Count)
		})
	}
}

func TestKeys(t *testing.T) {
	for name, lim := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			trusted := newMW(t, nethttp.Config{Config: middleware.Config{Limiter: lim, Policy: policy,
				TrustedProxies: []string{"10.0.0.0/8"}}})
			tests := []struct {
				name string
				h    func(http.Handler) http.Handler
				peer string
				hdr  map[string]string
				key  string
			}{
				{"peer IP by default", trusted, "203.0.113.1:5", nil, "203.0.113.1"},
				{"forged X-Forwarded-For from an untrusted peer is ignored", trusted, "203.0.113.2:5",
					map[string]string{"X-Forwarded-For": "1.1.1.1"}, "203.0.113.2"},
				{"right-most untrusted address behind trusted proxies", trusted, "10.0.0.1:5",
					map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.20, 10.0.0.2"}, "198.51.100.20"},
				{"X-Real-IP from a trusted proxy", trusted, "10.0.0.1:5",
					map[string]string{"X-Real-IP": "198.51.100.21"}, "198.51.100.21"},
				{"custom key", newMW(t, nethttp.Config{Config: middleware.Config{Limiter: lim, Policy: policy},
					Key: func(r *http.Request) string { return "user:" + r.Header.Get("X-User") }}),
					"203.0.113.3:5", map[string]string{"X-User": "ann"}, "user:ann"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, _, _ := serve(t, tt.h, tt.peer, tt.hdr)
					require.Equal(t, 200, resp.StatusCode)
					bs, err := lim.Buckets(context.Background(), tt.key)
					require.NoError(t, err)
					assert.Len(t, bs, 1, "the request was counted under %q", tt.key)
				})
			}
			t.Run("empty key is not limited", func(t *testing.T) {
				h := newMW(t, nethttp.Config{Config: middleware.Config{Limiter: lim, Policy: middleware.Policy{Scale: 1000, Limit: 0}},
					Key: func(*http.Request) string { return "" }})
				resp, _, reached := serve(t, h, "203.0.113.4:5", nil)
				assert.Equal(t, 200, resp.StatusCode)
				assert.True(t, reached)
				assert.Empty(t, resp.Header.Get("RateLimit"))
			})
			t.Run("a key the limiter refuses is answered 400", func(t *testing.T) {
				h := newMW(t, nethttp.Config{Config: middleware.Config{Limiter: lim, Policy: policy},
					Key: func(r *http.Request) string { return r.Header.Get("X-Api-Key") }})
				resp, body, reached := serve(t, h, "203.0.113.5:5", map[string]string{"X-Api-Key": string(make([]byte, 2000))})
				assert.Equal(t, 400, resp.StatusCode)
				assert.False(t, reached)
				assert.Equal(t, middleware.BadKeyBody, body)
			})
		})
	}
}

// down is a Checker whose backend is unreachable.
type down struct{}

func (down) CheckRate(context.Context, rl.Request) (rl.Decision, error) {
	return rl.Decision{}, fmt.Errorf("test: backend down: %w", rl.ErrUnavailable)
}

func TestLimiterFailure(t *testing.T) {
	// A client of a sidecar that is gone fails the same way.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	goneClient, err := client.New(client.Config{URL: gone.URL})
	require.NoError(t, err)
	t.Cleanup(func() { goneClient.Close() })
	for name, lim := range map[string]rl.Checker{"stub": down{}, "client of a stopped sidecar": goneClient} {
		t.Run(name, func(t *testing.T) {
			tests := []struct {
				name       string
				failClosed bool
				status     int
				reached    bool
			}{
				{"fail open by default", false, 200, true},
				{"fail closed", true, 503, false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var errs int
					h := newMW(t, nethttp.Config{Config: middleware.Config{Limiter: lim, Policy: policy,
						FailClosed: tt.failClosed, OnError: func(error) { errs++ }}})
					resp, body, reached := serve(t, h, "198.51.100.7:1", nil)
					assert.Equal(t, tt.status, resp.StatusCode)
					assert.Equal(t, tt.reached, reached)
					assert.Equal(t, 1, errs, "OnError hears of it")
					assert.Empty(t, resp.Header.Get("RateLimit"), "no decision, no rate-limit headers")
					if tt.failClosed {
						assert.Equal(t, "1", resp.Header.Get("Retry-After"))
						assert.Equal(t, middleware.UnavailableBody, body)
					}
				})
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := nethttp.New(nethttp.Config{})
	assert.ErrorContains(t, err, "middleware: Config.Limiter is nil")
}
