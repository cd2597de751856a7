package main

import (
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/memory"
)

// serve starts srv on a free loopback port and returns its address.
func serve(t *testing.T, srv interface{ Serve(net.Listener) error }) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// get sends one GET over a connection of its own and returns the whole
// answer as sent, its Date line taken out (the only header that differs).
func get(t *testing.T, addr, target string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^Date: [^\r]*\r\n`).ReplaceAllString(string(b), "")
}

// The -same baseline answers the sidecar's bytes: for the first check of
// an id (count = hits), at the same time, the two answers are equal byte for
// byte but for the Date (status, Server, header names, their order and
// values, the body), at several times within a window and several limits,
// scales and hits.
func TestSameBytesAsTheSidecar(t *testing.T) {
	var at time.Time
	clock := func() time.Time { return at }
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	sidecar := serve(t, api.New(api.Config{Limiter: lim}))
	bare := serve(t, sameServer(clock))

	times := []int64{1_700_000_000_000, 1_700_000_000_001, 1_700_000_059_999, 1_799_999_999_500}
	queries := []string{
		"scale=60000&limit=1000000",
		"scale=1000&limit=10&hits=3",
		"limit=5&scale=1500",
		"scale=86400000&limit=0&hits=0",
		"scale=60000&limit=1000000&algo=fixed",
	}
	n := 0
	for _, ms := range times {
		at = time.UnixMilli(ms)
		for _, q := range queries {
			n++
			target := "/check_rate?id=user-" + strings.Repeat("x", n) + "&" + q
			want, got := get(t, sidecar, target), get(t, bare, target)
			if !strings.HasPrefix(want, "HTTP/1.1 200 OK\r\n") {
				t.Fatalf("%s: the sidecar answered\n%s", target, want)
			}
			if got != want {
				t.Errorf("%s at %d:\nsidecar (%d bytes):\n%s\nbarecheck -same (%d bytes):\n%s", target, ms, len(want), want, len(got), got)
			}
		}
	}
}
