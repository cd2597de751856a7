package policy_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

func cleanPath(t testing.TB, target string) (resolved, written string, err error) {
	t.Helper()
	var p policy.Path
	_, err = policy.CleanPath(&p, []byte(target), nil)
	if p.Written != nil {
		written = string(p.Written)
	}
	return string(p.Resolved), written, err
}

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		name, target      string
		resolved, written string // written "" when it equals resolved
		bad               bool
	}{
		// Hostile first: each of these is /api/x to some backend.
		{name: "an escaped letter", target: "/%61pi/x", resolved: "/api/x"},
		{name: "escapes in upper and lower case", target: "/%41%50%49/%78", resolved: "/API/x"},
		{name: "a double slash", target: "//api/x", resolved: "/api/x"},
		{name: "many slashes", target: "///api////x", resolved: "/api/x"},
		{name: "dot dot", target: "/x/../api/x", resolved: "/api/x", written: "/x/../api/x"},
		{name: "dot", target: "/./api/./x", resolved: "/api/x", written: "/./api/./x"},
		{name: "escaped dots", target: "/x/%2e%2E/api/x", resolved: "/api/x", written: "/x/../api/x"},
		{name: "matrix parameters", target: "/api;a=b/x", resolved: "/api/x"},
		{name: "matrix parameters hide a dot dot", target: "/x/..;/api/x", resolved: "/api/x", written: "/x/../api/x"},
		{name: "a segment of parameters only", target: "/;x/api/x", resolved: "/api/x"},
		{name: "an escaped slash", target: "/api%2Fx", resolved: "/api/x"},
		{name: "an escaped slash and dot dot", target: "/x%2F..%2Fapi/x", resolved: "/api/x", written: "/x/../api/x"},
		{name: "backslashes", target: "/api\\x", resolved: "/api/x"},
		{name: "an escaped backslash", target: "/api%5Cx", resolved: "/api/x"},
		{name: "the query", target: "/api/x?a=/../b", resolved: "/api/x"},
		{name: "an escaped hash is a path byte", target: "/x%23/../api/x", resolved: "/api/x", written: "/x#/../api/x"},
		{name: "an escaped question mark is part of the path", target: "/api%3F/x", resolved: "/api?/x"},
		{name: "absolute URI", target: "http://evil.example/%61pi/x?q", resolved: "/api/x"},
		{name: "absolute URI in capitals with a port", target: "HTTPS://h:8443/api/x", resolved: "/api/x"},
		{name: "absolute URI without a path", target: "http://h", resolved: "/"},
		{name: "dot dot above the root", target: "/../../api/x", resolved: "/api/x", written: "/../../api/x"},
		{name: "api dot dot: both forms match", target: "/api/../x", resolved: "/x", written: "/api/../x"},
		{name: "escaped api dot dot", target: "/api/%2e%2e/x", resolved: "/x", written: "/api/../x"},
		{name: "an escaped percent is decoded once", target: "/%2561pi/x", resolved: "/%61pi/x"},
		{name: "a trailing slash stays", target: "/api//", resolved: "/api/"},
		{name: "a trailing dot dot leaves a slash", target: "/api/x/..", resolved: "/api/", written: "/api/x/.."},
		{name: "a trailing dot leaves a slash", target: "/api/.", resolved: "/api/", written: "/api/."},
		{name: "NUL decoded", target: "/api/%00x", resolved: "/api/\x00x"},
		{name: "case kept", target: "/API/x", resolved: "/API/x"},
		{name: "asterisk", target: "*", resolved: "*"},
		{name: "root", target: "/", resolved: "/"},
		{name: "clean", target: "/api/v1/things", resolved: "/api/v1/things"},
		{name: "dots inside names are no dot segments", target: "/a.b/..c/.d./...", resolved: "/a.b/..c/.d./..."},

		{name: "a bad escape", target: "/api/%zz", bad: true},
		{name: "a cut escape", target: "/api/%4", bad: true},
		{name: "a lone percent", target: "/api/%", bad: true},
		{name: "empty", target: "", bad: true},
		{name: "only a query", target: "?a=b", bad: true},
		{name: "relative", target: "api/x", bad: true},
		{name: "a fragment", target: "/api/x#frag", bad: true},
		{name: "a raw hash hiding a dot dot (Go serves /api/x)", target: "/x#/../api/x", bad: true},
		{name: "a raw hash in the query", target: "/api/x?a#b", bad: true},
		{name: "no scheme", target: "://h/api", bad: true},
		{name: "a scheme that is no scheme", target: "1http://h/api", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolved, written, err := cleanPath(t, tc.target)
			if tc.bad {
				require.ErrorIs(t, err, policy.ErrBadPath)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.resolved, resolved)
			assert.Equal(t, tc.written, written)
		})
	}
}

func TestPathHasPrefix(t *testing.T) {
	for _, tc := range []struct {
		target, prefix string
		want           bool
	}{
		{"/api/x", "/api/", true},
		{"/API/x", "/api/", true},
		{"/Api/X", "/api/x", true},
		{"/apix", "/api/", false},
		{"/api", "/api/", false},
		{"/x/../api/x", "/api/", true},
		{"/api/../x", "/api/", true},
		{"/api/../x", "/x", true},
		{"/public", "/api/", false},
	} {
		var p policy.Path
		_, err := policy.CleanPath(&p, []byte(tc.target), nil)
		require.NoError(t, err)
		assert.Equal(t, tc.want, p.HasPrefix(tc.prefix), "%q has prefix %q", tc.target, tc.prefix)
	}
}

// TestCleanPathAllocatesNothing holds the common case to no copy at all,
// and a path that needs work to the caller's buffer.
func TestCleanPathAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 256)
	var p policy.Path
	for _, target := range []string{"/api/v1/things?page=2", "/%61pi//x/../y;a=b"} {
		b := []byte(target)
		allocs := testing.AllocsPerRun(100, func() {
			buf, _ = policy.CleanPath(&p, b, buf[:0])
		})
		assert.Zero(t, allocs, target)
	}
	clean := []byte("/api/v1/things")
	_, err := policy.CleanPath(&p, clean, nil)
	require.NoError(t, err)
	assert.Same(t, &clean[0], &p.Resolved[0], "a clean path is used as it is")
}

// referenceClean is CleanPath written the slow, obvious way with strings,
// for the fuzz test to compare with.
func referenceClean(target string) (resolved, written string, ok bool) {
	if strings.Contains(target, "#") {
		return "", "", false
	}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if target == "*" {
		return "*", "", true
	}
	if !strings.HasPrefix(target, "/") {
		i := strings.Index(target, "://")
		if i <= 0 {
			return "", "", false
		}
		for j, c := range target[:i] {
			alpha := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
			if !alpha && (j == 0 || !strings.ContainsRune("0123456789+-.", c)) {
				return "", "", false
			}
		}
		rest := target[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return "/", "", true
		}
		target = rest[j:]
	}
	var dec strings.Builder
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c == '%' {
			if i+2 >= len(target) || !isHex(target[i+1]) || !isHex(target[i+2]) {
				return "", "", false
			}
			c = unhexByte(target[i+1])<<4 | unhexByte(target[i+2])
			i += 2
		}
		if c == '\\' {
			c = '/'
		}
		dec.WriteByte(c)
	}
	d := dec.String()
	trailing := strings.HasSuffix(d, "/") && d != "/"
	var segs []string
	for _, s := range strings.Split(d, "/") {
		s, _, _ = strings.Cut(s, ";")
		if s != "" {
			segs = append(segs, s)
		}
	}
	join := func(ss []string, slash bool) string {
		out := "/" + strings.Join(ss, "/")
		if slash && out != "/" {
			out += "/"
		}
		return out
	}
	written = join(segs, trailing)
	// Resolved is Written with its dot segments resolved.
	var stack []string
	rtrail := trailing
	if last := written[strings.LastIndexByte(written, '/')+1:]; last == "." || last == ".." {
		rtrail = true // "/a/b/.." is "/a/"
	}
	for _, s := range segs {
		switch s {
		case ".":
		case "..":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		default:
			stack = append(stack, s)
		}
	}
	resolved = join(stack, rtrail)
	if written == resolved {
		written = ""
	}
	return resolved, written, true
}

func isHex(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }

func unhexByte(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// FuzzCleanPath compares CleanPath with referenceClean, and checks what
// every read path holds: a leading slash, no empty, "." or ".." segment
// in Resolved, no ";" outside what an escape made.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/%61pi/x", "//api/x", "/x/../api/x", "/api;a=b/x", "/x/..;/api/x", "/api%2F..%2Fx",
		"http://h/%2e%2e/api", "/a/b/..", "/a/.", "/;x/", "*", "/\\api", "/%25%32%65", "/a/;x", "/.;/", "/x#/../api/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		resolved, written, err := cleanPath(t, target)
		wr, ww, ok := referenceClean(target)
		if ok != (err == nil) {
			t.Fatalf("%q: error %v, reference ok %v", target, err, ok)
		}
		if err != nil {
			if !errors.Is(err, policy.ErrBadPath) {
				t.Fatalf("%q: %v", target, err)
			}
			return
		}
		if resolved != wr || written != ww {
			t.Fatalf("%q: got (%q, %q), reference (%q, %q)", target, resolved, written, wr, ww)
		}
		if resolved == "*" {
			return
		}
		if !strings.HasPrefix(resolved, "/") || strings.Contains(resolved, "//") {
			t.Fatalf("%q: resolved %q", target, resolved)
		}
		for _, seg := range strings.Split(strings.Trim(resolved, "/"), "/") {
			if seg == "." || seg == ".." || strings.Contains(seg, ";") || strings.Contains(seg, "\\") {
				t.Fatalf("%q: resolved %q has segment %q", target, resolved, seg)
			}
		}
	})
}

// BenchmarkCleanPath reads a clean target and one that needs every step;
// cut-query is the work before paths were cleaned (the query cut off), the
// baseline of the same run.
func BenchmarkCleanPath(b *testing.B) {
	for _, bc := range []struct{ name, target string }{
		{"clean", "/api/v1/things?page=2"},
		{"to-clean", "/%61pi//v1/./things;v=1/../things?page=2"},
	} {
		target := []byte(bc.target)
		b.Run("cut-query/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				p := target
				if i := bytes.IndexAny(p, "?#"); i >= 0 {
					p = p[:i]
				}
				n += len(p)
			}
			_ = n
		})
		b.Run("clean-path/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 256)
			var p policy.Path
			for b.Loop() {
				buf, _ = policy.CleanPath(&p, target, buf[:0])
			}
		})
	}
}
