// Package mwtest holds what the tests of the middleware adapters (nethttp
// and fasthttpmw) share: the limiters they run on, and the behaviour every
// adapter must show, written once and run on each.
package mwtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/internal/core"
)

// Now is 10 s into a 30 s window: 20 s are left.
const Now = 1_700_000_040_000 + 10_000

// Clock is the tests' clock, stopped at Now.
func Clock() time.Time { return time.UnixMilli(Now) }

// Limiters returns an embedded limiter and a client of a sidecar over an
// embedded limiter, both on Clock, by name.
func Limiters(t *testing.T) map[string]rl.Limiter {
	t.Helper()
	embedded := memory.New(memory.Config{Clock: Clock, SweepInterval: -1})
	t.Cleanup(func() { embedded.Close() })
	behind := memory.New(memory.Config{Clock: Clock, SweepInterval: -1})
	t.Cleanup(func() { behind.Close() })
	url := tooltest.Serve(t, api.Config{Limiter: behind})
	c, err := client.New(client.Config{URL: url, Clock: Clock, Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return map[string]rl.Limiter{"embedded": embedded, "client": c}
}

// Answer is what one request through a middleware got.
type Answer struct {
	Status int
	Header http.Header
	Body   string
	// Reached reports whether the next handler ran.
	Reached bool
}

// KeyFunc makes the id a request is limited by from its headers, which
// header reads by name.
type KeyFunc func(header func(name string) string) string

// Adapter builds an adapter's middleware for cfg, keyed by key when key is
// not nil, and returns a function that sends it one GET request from peer
// ("IP:port") with the headers hdr, in front of a handler that answers
// "page".
type Adapter func(t *testing.T, cfg middleware.Config, key KeyFunc) func(peer string, hdr map[string]string) Answer

var policy = rl.Request{Scale: 30 * time.Second, Limit: 2}

// Run runs, on a, the behaviour every adapter shows.
func Run(t *testing.T, a Adapter) {
	t.Run("LimitsAndHeaders", func(t *testing.T) { limitsAndHeaders(t, a) })
	t.Run("Keys", func(t *testing.T) { keys(t, a) })
	t.Run("MissingKey", func(t *testing.T) { missingKey(t, a) })
	t.Run("LimiterFailure", func(t *testing.T) { limiterFailure(t, a) })
}

func limitsAndHeaders(t *testing.T, a Adapter) {
	for name, lim := range Limiters(t) {
		t.Run(name, func(t *testing.T) {
			serve := a(t, middleware.Config{Limiter: lim, Policy: policy}, nil)
			reset := strconv.FormatInt((Now+20_000)/1000, 10)
			for i, want := range []struct {
				status    int
				remaining string
			}{{200, "1"}, {200, "0"}, {429, "0"}, {429, "0"}} {
				ans := serve("198.51.100.7:40000", nil)
				assert.Equal(t, want.status, ans.Status, "request %d", i)
				assert.Equal(t, `"default";q=2;w=30`, ans.Header.Get("RateLimit-Policy"))
				assert.Equal(t, `"default";r=`+want.remaining+`;t=20`, ans.Header.Get("RateLimit"))
				assert.Equal(t, "2", ans.Header.Get("X-RateLimit-Limit"))
				assert.Equal(t, want.remaining, ans.Header.Get("X-RateLimit-Remaining"))
				assert.Equal(t, reset, ans.Header.Get("X-RateLimit-Reset"))
				if want.status == 200 {
					assert.True(t, ans.Reached)
					assert.Equal(t, "page", ans.Body)
					assert.Empty(t, ans.Header.Values("Retry-After"))
					continue
				}
				assert.False(t, ans.Reached, "a denied request never reaches the handler")
				assert.Equal(t, "20", ans.Header.Get("Retry-After"))
				assert.Equal(t, "Too many requests, retry in 20 s\n", ans.Body)
				assert.Equal(t, "text/plain; charset=utf-8", ans.Header.Get("Content-Type"))
			}
			ans := serve("[2001:db8::7]:40000", nil)
			assert.Equal(t, 200, ans.Status, "another peer has its own count")
			assert.True(t, ans.Reached)
			bs := buckets(t, lim, "2001:db8::7")
			require.Len(t, bs, 1, "the key is the bare IP")
			assert.EqualValues(t, 1, bs[0].Count)
		})
	}
}

func keys(t *testing.T, a Adapter) {
	for name, lim := range Limiters(t) {
		t.Run(name, func(t *testing.T) {
			trusted := a(t, middleware.Config{Limiter: lim, Policy: policy, TrustedProxies: []string{"10.0.0.0/8"}}, nil)
			user := a(t, middleware.Config{Limiter: lim, Policy: policy},
				func(header func(string) string) string { return "user:" + header("X-User") })
			tests := []struct {
				name  string
				serve func(peer string, hdr map[string]string) Answer
				peer  string
				hdr   map[string]string
				key   string
			}{
				{"peer IP by default", trusted, "203.0.113.1:5", nil, "203.0.113.1"},
				{"forged X-Forwarded-For from an untrusted peer is ignored", trusted, "203.0.113.2:5",
					map[string]string{"X-Forwarded-For": "1.1.1.1"}, "203.0.113.2"},
				{"right-most untrusted address behind trusted proxies", trusted, "10.0.0.1:5",
					map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.20, 10.0.0.2"}, "198.51.100.20"},
				{"X-Real-IP from a trusted proxy", trusted, "10.0.0.1:5",
					map[string]string{"X-Real-IP": "198.51.100.21"}, "198.51.100.21"},
				{"custom key", user, "203.0.113.3:5", map[string]string{"X-User": "ann"}, "user:ann"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					require.Equal(t, 200, tt.serve(tt.peer, tt.hdr).Status)
					bs := buckets(t, lim, tt.key)
					assert.Len(t, bs, 1, "the request was counted under %q", tt.key)
				})
			}
			t.Run("a key the limiter refuses is answered 400", func(t *testing.T) {
				serve := a(t, middleware.Config{Limiter: lim, Policy: policy},
					func(header func(string) string) string { return header("X-Api-Key") })
				ans := serve("203.0.113.5:5", map[string]string{"X-Api-Key": string(make([]byte, 2000))})
				assert.Equal(t, 400, ans.Status)
				assert.False(t, ans.Reached)
				assert.Equal(t, core.BadKeyBody, ans.Body)
			})
		})
	}
}

// buckets lists the records of id on lim, which has the admin calls.
func buckets(t *testing.T, lim rl.Limiter, id string) []rl.Bucket {
	t.Helper()
	bs, err := lim.(interface {
		Buckets(context.Context, string) ([]rl.Bucket, error)
	}).Buckets(context.Background(), id)
	require.NoError(t, err)
	return bs
}

// down is a Limiter whose backend is unreachable.
type down struct{}

func (down) CheckRate(context.Context, rl.Request) (rl.Decision, error) {
	return rl.Decision{}, fmt.Errorf("test: backend down: %w", rl.ErrUnavailable)
}

func (down) CheckRates(context.Context, []rl.Request) ([]rl.Decision, error) {
	return nil, fmt.Errorf("test: backend down: %w", rl.ErrUnavailable)
}

// missingKey: a request whose key is missing never escapes the limit
// unseen. The key is an API key from a header; the header left out, sent
// empty or as white space is answered 400 naming it by default, let
// through unchecked with MissingKey "skip", and counted by the client's
// address, under counters of its own, with "key:ip".
func missingKey(t *testing.T, a Adapter) {
	apiKey := func(header func(string) string) string { return header("X-Api-Key") }
	missing := []struct {
		name string
		hdr  map[string]string
	}{
		{"header absent", nil},
		{"header empty", map[string]string{"X-Api-Key": ""}},
		{"header of spaces", map[string]string{"X-Api-Key": "   "}},
		{"header of a tab", map[string]string{"X-Api-Key": "\t"}},
		{"another header only", map[string]string{"X-Api-Keys": "k1"}},
	}
	for name, lim := range Limiters(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("denied by default, naming the key", func(t *testing.T) {
				var errs int
				named := a(t, middleware.Config{Limiter: lim, Policy: policy, KeyName: "X-Api-Key",
					OnError: func(error) { errs++ }}, apiKey)
				unnamed := a(t, middleware.Config{Limiter: lim, Policy: policy}, apiKey)
				for _, m := range missing {
					for i := range 3 { // never a 429: nothing was counted
						ans := named("198.51.100.7:1", m.hdr)
						assert.Equal(t, 400, ans.Status, "%s, request %d", m.name, i)
						assert.False(t, ans.Reached)
						assert.Equal(t, "Bad request: missing X-Api-Key\n", ans.Body)
						assert.Equal(t, "text/plain; charset=utf-8", ans.Header.Get("Content-Type"))
						assert.Empty(t, ans.Header.Get("RateLimit"), "no check, no rate-limit headers")
						assert.Empty(t, ans.Header.Get("Retry-After"), "no wait brings a key")
					}
					ans := unnamed("198.51.100.7:1", m.hdr)
					assert.Equal(t, 400, ans.Status, m.name)
					assert.Equal(t, "Bad request: missing rate-limit key\n", ans.Body)
				}
				assert.Zero(t, errs, "a missing key is not the limiter's error")
				ans := named("198.51.100.7:1", map[string]string{"X-Api-Key": " k1 "})
				assert.Equal(t, 200, ans.Status, "a key with spaces around it is a key")
				bs := buckets(t, lim, " k1 ")
				assert.Len(t, bs, 1, "counted under the key as it is")
			})
			t.Run("skipped", func(t *testing.T) {
				serve := a(t, middleware.Config{Limiter: lim, Policy: policy, MissingKey: "skip"}, apiKey)
				for _, m := range missing {
					for range 3 {
						ans := serve("198.51.100.8:1", m.hdr)
						assert.Equal(t, 200, ans.Status, m.name)
						assert.True(t, ans.Reached)
						assert.Empty(t, ans.Header.Get("RateLimit"), "not checked")
					}
				}
				for i, want := range []int{200, 200, 429} {
					assert.Equal(t, want, serve("198.51.100.8:1", map[string]string{"X-Api-Key": "k2"}).Status,
						"a key is limited: request %d", i)
				}
			})
			t.Run("by the client's address", func(t *testing.T) {
				serve := a(t, middleware.Config{Limiter: lim, Policy: policy, MissingKey: "key:ip",
					TrustedProxies: []string{"10.0.0.0/8"}}, apiKey)
				for i, want := range []int{200, 200, 429, 429, 429} {
					hdr := map[string]string{"X-Forwarded-For": "198.51.100.9"}
					maps.Copy(hdr, missing[i].hdr)
					ans := serve("10.0.0.1:1", hdr)
					assert.Equal(t, want, ans.Status, "request %d: %s", i, missing[i].name)
					assert.Equal(t, want == 200, ans.Reached)
					assert.Equal(t, `"default";q=2;w=30`, ans.Header.Get("RateLimit-Policy"), "checked")
				}
				bs := buckets(t, lim, "\x00missing_key\x00198.51.100.9")
				assert.Len(t, bs, 1, "counted under the forwarded address, apart")
				ans := serve("10.0.0.1:1", map[string]string{"X-Forwarded-For": "198.51.100.9", "X-Api-Key": "198.51.100.9"})
				assert.Equal(t, 200, ans.Status, "a key that spells the address does not spend the keyless budget")
				ans = serve("203.0.113.9:1", nil)
				assert.Equal(t, 200, ans.Status, "another address has its own")
			})
		})
	}
}

func limiterFailure(t *testing.T, a Adapter) {
	// A client of a sidecar that is gone fails the same way, unless its
	// own fail mode (the one place fail-open is decided) says otherwise.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	closed, err := client.New(client.Config{URL: gone.URL})
	require.NoError(t, err)
	t.Cleanup(func() { closed.Close() })
	var degraded int
	open, err := client.New(client.Config{URL: gone.URL, FailMode: rl.FailOpen,
		OnDegraded: func(rl.DegradedEvent) { degraded++ }})
	require.NoError(t, err)
	t.Cleanup(func() { open.Close() })
	tests := []struct {
		name    string
		lim     rl.Limiter
		status  int
		onError int
	}{
		{"stub", down{}, 503, 1},
		{"client of a stopped sidecar", closed, 503, 1},
		{"client of a stopped sidecar, FailOpen", open, 200, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs int
			serve := a(t, middleware.Config{Limiter: tt.lim, Policy: policy, OnError: func(error) { errs++ }}, nil)
			ans := serve("198.51.100.7:1", nil)
			assert.Equal(t, tt.status, ans.Status)
			assert.Equal(t, tt.status == 200, ans.Reached)
			assert.Equal(t, tt.onError, errs, "OnError hears of every error")
			if tt.status == 503 {
				assert.Equal(t, "1", ans.Header.Get("Retry-After"))
				assert.Equal(t, core.UnavailableBody, ans.Body)
				assert.Empty(t, ans.Header.Get("RateLimit"), "no decision, no rate-limit headers")
				return
			}
			assert.Equal(t, `"default";r=2;t=0`, ans.Header.Get("RateLimit"), "the fail mode's decision: nothing counted")
			assert.Equal(t, 1, degraded, "the limiter's OnDegraded hears of it")
		})
	}
	t.Run("a key refused is a 400 whatever the fail mode", func(t *testing.T) {
		for name, lim := range map[string]rl.Limiter{"FailClosed": closed, "FailOpen": open} {
			serve := a(t, middleware.Config{Limiter: lim, Policy: policy},
				func(header func(string) string) string { return header("X-Api-Key") })
			ans := serve("198.51.100.7:1", map[string]string{"X-Api-Key": strings.Repeat("k", 2000)})
			assert.Equal(t, 400, ans.Status, name)
			assert.False(t, ans.Reached, name)
			assert.Equal(t, core.BadKeyBody, ans.Body, name)
		}
	})
}

// MissingKeyHeads are request heads whose X-Api-Key is missing as a
// server reads it off the wire: absent, empty, spaces, a tab, spaces and
// tabs (servers trim the white space around a value, the middleware the
// value of white space alone).
var MissingKeyHeads = []string{
	"GET / HTTP/1.1\r\nHost: app\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: app\r\nX-Api-Key:\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: app\r\nX-Api-Key:    \r\n\r\n",
	"GET / HTTP/1.1\r\nHost: app\r\nX-Api-Key:\t\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: app\r\nX-Api-Key: \t \t\r\n\r\n",
}

// OnTheWire sends each of MissingKeyHeads on its own connection from dial
// to a server whose handler is behind a middleware keyed by X-Api-Key (its
// Config.KeyName "X-Api-Key"), and requires a 400 naming the key.
func OnTheWire(t *testing.T, dial func() (net.Conn, error)) {
	t.Helper()
	for _, head := range MissingKeyHeads {
		conn, err := dial()
		require.NoError(t, err)
		_, err = conn.Write([]byte(head))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%q", head)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, 400, resp.StatusCode, "%q", head)
		assert.Equal(t, "Bad request: missing X-Api-Key\n", string(body), "%q", head)
		require.NoError(t, conn.Close())
	}
}
