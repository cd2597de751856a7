package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHealthTarget(t *testing.T) {
	for _, tc := range []struct {
		raw, target, sock string
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/healthz", ""},
		{"http://127.0.0.1:8080/livez", "http://127.0.0.1:8080/livez", ""},
		{"https://rl.example:8443/readyz", "https://rl.example:8443/readyz", ""},
		{"unix:/run/rl.sock", "http://localhost/healthz", "/run/rl.sock"},
		{"unix:/run/rl.sock:/livez", "http://localhost/livez", "/run/rl.sock"},
		{"unix:/run/rl.sock:/readyz", "http://localhost/readyz", "/run/rl.sock"},
		{"unix:/run/a:b.sock", "http://localhost/healthz", "/run/a:b.sock"},
		{"unix:/run/rl.sock:/", "http://localhost/healthz", "/run/rl.sock"},
	} {
		target, sock, err := healthTarget(tc.raw)
		require.NoError(t, err, tc.raw)
		assert.Equal(t, tc.target, target, tc.raw)
		assert.Equal(t, tc.sock, sock, tc.raw)
	}
	for _, raw := range []string{
		"unix:", "unix:rl.sock", "unix:rl.sock:/livez", "unix:/run/rl.sock:/livez?x=1",
		"unix:/run/rl.sock:/a#b", "unix:/run/rl.sock:/a b", "unix:/s?x=1:/livez",
		"127.0.0.1:8080", "http://", "ftp://h/livez",
	} {
		_, _, err := healthTarget(raw)
		assert.Error(t, err, raw)
	}
}

// FuzzHealthTarget: whatever -healthcheck is given, an accepted argument
// names a socket by its absolute path and a URL whose path is the one asked.
func FuzzHealthTarget(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080/readyz", "unix:/run/rl.sock", "unix:/run/rl.sock:/livez", "unix:/a:/b:/c", "unix:/%zz:/%41", "https://[::1]:1/x?y#z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		target, sock, err := healthTarget(raw)
		if err != nil {
			return
		}
		u, perr := url.Parse(target)
		require.NoError(t, perr, "%q gave %q", raw, target)
		require.True(t, strings.HasPrefix(u.Path, "/"), "%q gave %q", raw, target)
		if !strings.HasPrefix(raw, unixPrefix) {
			require.Empty(t, sock)
			return
		}
		require.True(t, strings.HasPrefix(sock, "/"), "%q: socket %q", raw, sock)
		require.Equal(t, "localhost", u.Host)
		require.Empty(t, u.RawQuery)
		require.Empty(t, u.Fragment)
		want := strings.TrimPrefix(raw, unixPrefix+sock)
		if want == "" || want == ":/" {
			want = ":/healthz"
		}
		require.Equal(t, want, ":"+u.Path, "%q", raw)
	})
}
