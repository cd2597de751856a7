package fasthttpmw_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/fasthttpmw"
	"github.com/raterlimiter/raterlimiter/middleware/internal/mwtest"
)

var (
	clock    = mwtest.Clock
	limiters = mwtest.Limiters
)

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

func newMW(t *testing.T, cfg middleware.Config, key func(*fasthttp.RequestCtx) string) func(fasthttp.RequestHandler) fasthttp.RequestHandler {
	t.Helper()
	mw, err := fasthttpmw.New(cfg, key)
	require.NoError(t, err)
	return mw
}

// TestAdapter runs the behaviour every middleware adapter shows: limits and
// headers, keys, and what a failing limiter gets.
func TestAdapter(t *testing.T) {
	mwtest.Run(t, func(t *testing.T, cfg middleware.Config, key mwtest.KeyFunc) func(string, map[string]string) mwtest.Answer {
		var k func(*fasthttp.RequestCtx) string
		if key != nil {
			k = func(ctx *fasthttp.RequestCtx) string {
				return key(func(name string) string { return string(ctx.Request.Header.Peek(name)) })
			}
		}
		h := newMW(t, cfg, k)
		return func(peer string, hdr map[string]string) mwtest.Answer {
			resp, reached := serve(t, h, peer, hdr)
			ans := mwtest.Answer{Status: resp.StatusCode(), Header: http.Header{}, Body: string(resp.Body()), Reached: reached}
			for k, v := range resp.Header.All() {
				ans.Header.Add(string(k), string(v))
			}
			return ans
		}
	})
}

// TestOverAServer runs the middleware inside a fasthttp server on an
// in-memory listener: what a client sees on the wire.
func TestOverAServer(t *testing.T) {
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	h := newMW(t, middleware.Config{Limiter: lim, Policy: rl.Request{Scale: 30 * time.Second, Limit: 1}}, nil)
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
	_, err := fasthttpmw.New(middleware.Config{}, nil)
	assert.ErrorContains(t, err, "middleware: Config.Limiter is nil")
}

// TestMissingKeyOnTheWire: a key header a fasthttp server reads as absent,
// empty or white space is a 400, never a request let through.
func TestMissingKeyOnTheWire(t *testing.T) {
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	h := newMW(t, middleware.Config{Limiter: lim, Policy: rl.Request{Scale: 30 * time.Second, Limit: 1}, KeyName: "X-Api-Key"},
		func(ctx *fasthttp.RequestCtx) string { return string(ctx.Request.Header.Peek("X-Api-Key")) })
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: h(func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("page") })}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		assert.NoError(t, srv.Shutdown())
		assert.NoError(t, <-done)
	})
	mwtest.OnTheWire(t, ln.Dial)
}
