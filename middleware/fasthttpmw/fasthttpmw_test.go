package fasthttpmw_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/sidecartest"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/fasthttpmw"
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

// serve runs one request from peer through h and returns the response and
// whether the next handler ran.
func serve(t *testing.T, h func(fasthttp.RequestHandler) fasthttp.RequestHandler, peer string, hdr map[string]string) (*fasthttp.Response, bool) {
	t.Helper()
	reached := false
	next := func(ctx *fasthttp.RequestCtx) {
		reached = true
		ctx.SetBodyString("page")
	}
	var req fasthttp.Request
	req.SetRequestURI("/index.html")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	addr, err := net.ResolveTCPAddr("tcp", peer)
	require.NoError(t, err)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, addr, nil)
	h(next)(&ctx)
	resp := new(fasthttp.Response)
	ctx.Response.CopyTo(resp)
	return resp, reached
}

func newMW(t *testing.T, cfg fasthttpmw.Config) func(fasthttp.RequestHandler) fasthttp.RequestHandler {
	t.Helper()
	m, err := fasthttpmw.New(cfg)
	require.NoError(t, err)
	return m.Handler
}

var policy = middleware.Policy{Scale: 30_000, Limit: 2}

func TestLimitsAndHeaders(t *testing.T) {
	for name, lim := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			h := newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: lim, Policy: policy}})
			reset := strconv.FormatInt((now+20_000)/1000, 10)
			for i, want := range []struct {
				status    int
				remaining string
			}{{200, "1"}, {200, "0"}, {429, "0"}, {429, "0"}} {
				resp, reached := serve(t, h, "198.51.100.7:40000", nil)
				assert.Equal(t, want.status, resp.StatusCode(), "request %d", i)
				assert.Equal(t, `"default";q=2;w=30`, string(resp.Header.Peek("RateLimit-Policy")))
				assert.Equal(t, `"default";r=`+want.remaining+`;t=20`, string(resp.Header.Peek("RateLimit")))
				assert.Equal(t, "2", string(resp.Header.Peek("X-RateLimit-Limit")))
				assert.Equal(t, want.remaining, string(resp.Header.Peek("X-RateLimit-Remaining")))
				assert.Equal(t, reset, string(resp.Header.Peek("X-RateLimit-Reset")))
				if want.status == 200 {
					assert.True(t, reached)
					assert.Equal(t, "page", string(resp.Body()))
					assert.Nil(t, resp.Header.Peek("Retry-After"))
					continue
				}
				assert.False(t, reached, "a denied request never reaches the handler")
				assert.Equal(t, "20", string(resp.Header.Peek("Retry-After")))
				assert.Equal(t, "Too many requests, retry in 20 s\n", string(resp.Body()))
			}
			resp, reached := serve(t, h, "[2001:db8::7]:40000", nil)
			assert.Equal(t, 200, resp.StatusCode(), "another peer has its own count")
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
			trusted := newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: lim, Policy: policy,
				TrustedProxies: []string{"10.0.0.0/8"}}})
			tests := []struct {
				name string
				h    func(fasthttp.RequestHandler) fasthttp.RequestHandler
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
				{"custom key", newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: lim, Policy: policy},
					Key: func(ctx *fasthttp.RequestCtx) string { return "user:" + string(ctx.Request.Header.Peek("X-User")) }}),
					"203.0.113.3:5", map[string]string{"X-User": "ann"}, "user:ann"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, _ := serve(t, tt.h, tt.peer, tt.hdr)
					require.Equal(t, 200, resp.StatusCode())
					bs, err := lim.Buckets(context.Background(), tt.key)
					require.NoError(t, err)
					assert.Len(t, bs, 1, "the request was counted under %q", tt.key)
				})
			}
			t.Run("empty key is not limited", func(t *testing.T) {
				h := newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: lim, Policy: middleware.Policy{Scale: 1000, Limit: 0}},
					Key: func(*fasthttp.RequestCtx) string { return "" }})
				resp, reached := serve(t, h, "203.0.113.4:5", nil)
				assert.Equal(t, 200, resp.StatusCode())
				assert.True(t, reached)
				assert.Nil(t, resp.Header.Peek("RateLimit"))
			})
			t.Run("a key the limiter refuses is answered 400", func(t *testing.T) {
				h := newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: lim, Policy: policy},
					Key: func(ctx *fasthttp.RequestCtx) string { return string(ctx.Request.Header.Peek("X-Api-Key")) }})
				resp, reached := serve(t, h, "203.0.113.5:5", map[string]string{"X-Api-Key": string(make([]byte, 2000))})
				assert.Equal(t, 400, resp.StatusCode())
				assert.False(t, reached)
				assert.Equal(t, middleware.BadKeyBody, string(resp.Body()))
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
			h := newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: down{}, Policy: policy,
				FailClosed: tt.failClosed, OnError: func(error) { errs++ }}})
			resp, reached := serve(t, h, "198.51.100.7:1", nil)
			assert.Equal(t, tt.status, resp.StatusCode())
			assert.Equal(t, tt.reached, reached)
			assert.Equal(t, 1, errs, "OnError hears of it")
			assert.Nil(t, resp.Header.Peek("RateLimit"), "no decision, no rate-limit headers")
			if tt.failClosed {
				assert.Equal(t, "1", string(resp.Header.Peek("Retry-After")))
				assert.Equal(t, middleware.UnavailableBody, string(resp.Body()))
			}
		})
	}
}

// TestOverAServer runs the middleware inside a fasthttp server on an
// in-memory listener: what a client sees on the wire.
func TestOverAServer(t *testing.T) {
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	h := newMW(t, fasthttpmw.Config{Config: middleware.Config{Limiter: lim, Policy: middleware.Policy{Scale: 30_000, Limit: 1}}})
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: h(func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("page") })}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		assert.NoError(t, srv.Shutdown())
		assert.NoError(t, <-done)
	})
	c := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	var statuses []int
	for range 2 {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://app/")
		require.NoError(t, c.Do(req, resp))
		statuses = append(statuses, resp.StatusCode())
		if resp.StatusCode() == 429 {
			assert.Equal(t, "20", string(resp.Header.Peek("Retry-After")))
			assert.Equal(t, `"default";r=0;t=20`, string(resp.Header.Peek("RateLimit")))
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	assert.Equal(t, []int{200, 429}, statuses)
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := fasthttpmw.New(fasthttpmw.Config{})
	assert.ErrorContains(t, err, "middleware: Config.Limiter is nil")
}
