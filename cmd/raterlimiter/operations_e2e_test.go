package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// jsonLines parses every line of out as one JSON object and fails t on a
// line that is not.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a line that is not JSON: %q\nall:\n%s", sc.Text(), out)
		require.Contains(t, m, "level", sc.Text())
		require.Contains(t, m, "msg", sc.Text())
		lines = append(lines, m)
	}
	return lines
}

func TestE2ELogFormatJSON(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policies.yaml")
	require.NoError(t, writeFile(pol, "policies:\n  - {name: p, key: ip, limit: 1, scale: 1m}\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "rls.yaml"), "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"))
	p := tooltest.Start(t, []string{"RATERLIMITER_NO_SUCH_FLAG=1"}, build(t), "-log-format", "json", "-listen", "127.0.0.1:0",
		"-policies", pol, "-auth-headers", "nginx", "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "rls.yaml"))
	var addr string
	p.WaitUntil(t, 30*time.Second, "the listening line", func() bool {
		for _, l := range strings.Split(p.Output(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "raterlimiter listening" {
				addr, _ = m["addr"].(string)
			}
		}
		return addr != ""
	})
	// Traffic, a reload that fails (an error line), then a clean stop.
	for _, path := range []string{"/check_rate?policy=p&id=a", "/check_rate?id=", "/healthz"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.NoError(t, writeFile(pol, "policies: [\n"))
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGHUP))
	p.WaitUntil(t, 10*time.Second, "the failed reload's line", func() bool { return strings.Contains(p.Output(), "reload") })
	require.NoError(t, p.Stop(t, syscall.SIGTERM))

	lines := jsonLines(t, p.Output())
	msgs := map[string]map[string]any{}
	for _, l := range lines {
		msgs[l["msg"].(string)] = l
	}
	assert.Contains(t, msgs, "raterlimiter listening")
	assert.Contains(t, msgs, "rls listening")
	assert.Contains(t, msgs, "raterlimiter stopped")
	var warned, failed bool
	for _, l := range lines {
		warned = warned || l["level"] == "WARN" && strings.Contains(l["msg"].(string), "RATERLIMITER_NO_SUCH_FLAG")
		failed = failed || l["level"] == "ERROR" && strings.Contains(strings.ToLower(l["msg"].(string)), "reload")
	}
	assert.True(t, warned, "the unknown variable's warning is a JSON line:\n%s", p.Output())
	assert.True(t, failed, "the failed reload is a JSON error line:\n%s", p.Output())

	// Errors that end the process are JSON lines too, with the exit status.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"port in use", []string{"-listen", busy.Addr().String()}, 1, "address already in use"},
		{"bad flag value", []string{"-timeout", "soon"}, 2, `invalid value "soon" for flag -timeout`},
		{"bad policies file", []string{"-listen", "127.0.0.1:0", "-policies", pol}, 2, pol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, nil, append([]string{"-log-format", "json"}, tc.args...)...)
			assert.Equal(t, tc.code, code, stderr)
			lines := jsonLines(t, stderr)
			require.NotEmpty(t, lines)
			last := lines[len(lines)-1]
			assert.Equal(t, "ERROR", last["level"])
			assert.Contains(t, last["err"], tc.msg)
			assert.EqualValues(t, tc.code, last["exit_status"])
		})
	}
	code, _, stderr := runBinary(t, nil, "-log-format", "xml")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `-log-format must be text or json, not "xml"`)
}

func TestE2EHealthcheck(t *testing.T) {
	bin := build(t)
	sock := filepath.Join(t.TempDir(), "rl.sock")
	tcp := start(t, nil)
	start(t, nil, "-listen", "unix:"+sock)

	ok := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := tooltest.Run(t, bin, args...)
		require.Equal(t, 0, code, "%v: %s%s", args, stdout, stderr)
		return stdout
	}
	fails := func(code int, msg string, args ...string) {
		t.Helper()
		got, stdout, stderr := tooltest.Run(t, bin, args...)
		assert.Equal(t, code, got, "%v: %s%s", args, stdout, stderr)
		assert.Contains(t, stderr, msg, "%v", args)
	}
	assert.Equal(t, "200 OK \"ok\"\n", ok("-healthcheck", tcp.base))
	ok("-healthcheck", tcp.base+"/healthz")
	ok("-healthcheck", "unix:"+sock)
	// The environment cannot turn a sidecar into a probe.
	code, _, _ := tooltest.RunEnv(t, []string{"RATERLIMITER_HEALTHCHECK=" + tcp.base, "RATERLIMITER_LISTEN=127.0.0.1:99999"}, bin)
	assert.Equal(t, 2, code, "the sidecar started (and refused its address), the probe did not run")

	// Whatever is not the sidecar's 200 fails, exit status 1.
	fails(1, "404 Not Found", "-healthcheck", tcp.base+"/nope")
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	fails(1, "connection refused", "-healthcheck", "http://"+closedAddr)
	fails(1, "no such file", "-healthcheck", "unix:"+sock+".missing")
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/unavailable":
			http.Error(w, "\x1b[2Jdown\r\nmore", http.StatusServiceUnavailable)
		case "/redirect":
			http.Redirect(w, r, "/healthz", http.StatusFound)
		case "/slow":
			<-r.Context().Done() // never answers; the probe gives up
		case "/escapes":
			w.Write([]byte("\x1b[31mok\x07"))
		default:
			w.Write([]byte("ok"))
		}
	}))
	defer hostile.Close()
	fails(1, `503 Service Unavailable: "\x1b[2Jdown\r"`, "-healthcheck", hostile.URL+"/unavailable")
	fails(1, "302 Found", "-healthcheck", hostile.URL+"/redirect")
	fails(1, "no answer within 200ms", "-healthcheck", hostile.URL+"/slow", "-healthcheck-timeout", "200ms")
	assert.Equal(t, "200 OK \"\\x1b[31mok\\a\"\n", ok("-healthcheck", hostile.URL+"/escapes"), "what the server says is quoted, never written raw")

	// Not a URL it can probe: a usage error, exit status 2.
	for _, u := range []string{"127.0.0.1:8080", "ftp://127.0.0.1/", "unix:relative.sock", "http://", "http://user:pw@127.0.0.1/", "unix:/s?x=1"} {
		fails(2, "-healthcheck", "-healthcheck", u)
	}
	fails(2, "-healthcheck-timeout must not be negative", "-healthcheck", tcp.base, "-healthcheck-timeout", "-1s")
}
