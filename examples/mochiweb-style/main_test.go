package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// now is 10 s into a 30 s window, so the window cannot roll over mid-test.
const now = 1_700_000_040_000 + 10_000

func clock() time.Time { return time.UnixMilli(now) }

func startSidecar(t *testing.T) string {
	t.Helper()
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	return tooltest.Serve(t, api.Config{Limiter: lim})
}

func get(h http.Handler, peer string) (*http.Response, string) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = peer
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestArticleLimit: 500 requests per 30 s per peer, the 501st gets 429.
func TestArticleLimit(t *testing.T) {
	for name, sidecar := range map[string]string{"embedded": "", "sidecar": startSidecar(t)} {
		t.Run(name, func(t *testing.T) {
			c, err := parseFlags([]string{"-dir", "public", "-sidecar", sidecar, "-timeout", "30s"}, io.Discard)
			require.NoError(t, err)
			c.clock = clock
			h, release, err := newApp(c, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			t.Cleanup(release)
			for i := range 500 {
				resp, body := get(h, "198.51.100.7:5000")
				require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i+1)
				if i == 0 {
					assert.Contains(t, body, "Hello from behind raterlimiter")
				}
			}
			resp, body := get(h, "198.51.100.7:5001")
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the 501st request")
			assert.Equal(t, "20", resp.Header.Get("Retry-After"))
			assert.Equal(t, "Too many requests, retry in 20 s\n", body)
			assert.Equal(t, `"default";q=500;w=30`, resp.Header.Get("RateLimit-Policy"))

			resp, _ = get(h, "198.51.100.8:5000")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "another peer is not limited")
		})
	}
}

func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-dir", "public", "-limit", "1"}, io.Discard, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	}
	var statuses []int
	for range 2 {
		resp, err := http.Get("http://" + addr + "/")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	cancel()
	assert.NoError(t, <-done)
	// The real clock may start a new 30 s window between the two requests;
	// then both pass. Otherwise the second is denied.
	assert.Equal(t, http.StatusOK, statuses[0])
	assert.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, statuses[1])
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-nope"}, "flag provided but not defined"},
		{"stray argument", []string{"x"}, "unexpected arguments"},
		{"tiny scale", []string{"-scale", "1us"}, "at least 1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, nil)
			assert.ErrorContains(t, err, tt.want)
			var ue *usageError
			assert.ErrorAs(t, err, &ue, "a bad flag exits 2")
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		err := run(context.Background(), []string{"-dir", "does-not-exist"}, io.Discard, nil)
		assert.ErrorContains(t, err, "not a directory")
	})
	t.Run("bad sidecar URL", func(t *testing.T) {
		err := run(context.Background(), []string{"-dir", "public", "-sidecar", "127.0.0.1:8080"}, io.Discard, nil)
		assert.ErrorContains(t, err, "client: bad URL")
	})
	t.Run("bad trusted proxy", func(t *testing.T) {
		err := run(context.Background(), []string{"-dir", "public", "-trusted-proxies", "10.0.0.0/8,bogus"}, io.Discard, nil)
		assert.ErrorContains(t, err, "trusted proxy")
	})
}

// TestExitStatus runs the built binary: -h prints the flags and exits 0, a
// bad flag exits 2, a directory that is not there exits 1.
func TestExitStatus(t *testing.T) {
	bin := tooltest.Build(t, ".")
	code, _, stderr := tooltest.Run(t, bin, "-h")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "-sidecar")
	code, _, stderr = tooltest.Run(t, bin, "-scale", "1us")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "mochiweb-style: -scale 1µs: must be at least 1ms")
	code, _, stderr = tooltest.Run(t, bin, "-dir", "does-not-exist")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "-dir does-not-exist: not a directory")
}
