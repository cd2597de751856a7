package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// sendRaw sends one request with exactly this method, target and headers
// from the loopback address from, on a connection of its own, and reads
// the answer: no client library cleans the target first.
func sendRaw(t *testing.T, from, base, method, target string, hdr ...string) gwReply {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	host := addr
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			host = hdr[i+1]
			continue
		}
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	fmt.Fprintf(&b, "Host: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", host)
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "%s %s", method, target)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return gwReply{resp.StatusCode, resp.Header, string(body)}
}

// escapePolicies are the documented policies and one on a host name, as a
// file for the sidecar.
func escapePolicies(t *testing.T) string {
	t.Helper()
	src := docFile(t, "policies.yaml") + `  - name: admin
    match: {host: admin.example.com}
    key: ip
    limit: 4
    scale: 1m
`
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return path
}

// forged is every header a client could send to be taken for another
// request, in both families the proxies use.
var forged = []string{
	"X-Forwarded-Uri", "/public", "X-Forwarded-Method", "GET", "X-Forwarded-Host", "www.example.com",
	"X-Forwarded-Prefix", "/public", "X-Original-URI", "/public", "X-Original-Method", "GET",
}

// TestGatewayClientsEscapeNoPolicy sends, through the real nginx, Caddy
// and Traefik with the files of docs/gateways/, every way a client was
// found (or could think) to be taken for another request. Each row comes
// from a client address of its own, with a key of its own: the app sees
// exactly the policy's limit of them, the rest are refused. A proxy that
// refuses such a request itself (the app never sees it) also holds.
func TestGatewayClientsEscapeNoPolicy(t *testing.T) {
	type row struct {
		name   string
		method string
		target string
		limit  int    // the policy's
		policy string // the RateLimit item a client of nginx sees
		hdr    []string
	}
	prefix := map[string]string{"api": "/api/", "login": "/login", "admin": "/"}
	key := func(k string) []string { return []string{"X-Api-Key", k} }
	rows := []row{
		{"X-Forwarded-Uri /public on GET /api/x", "GET", "/api/x", 5, "api", append(key("k1"), "X-Forwarded-Uri", "/public")},
		{"X-Forwarded-Method GET on POST /login", "POST", "/login", 3, "login", []string{"X-Forwarded-Method", "GET"}},
		{"GET /%61pi/x", "GET", "/%61pi/x", 5, "api", key("k3")},
		{"GET //api/x", "GET", "//api/x", 5, "api", key("k4")},
		{"GET /x/../api/x", "GET", "/x/../api/x", 5, "api", key("k5")},
		{"GET /api;a=b/x", "GET", "/api;a=b/x", 5, "api", key("k6")},
		{"GET /API/x (prefixes match without case)", "GET", "/API/x", 5, "api", key("k7")},
		{"GET /x/%2e%2e/api/x", "GET", "/x/%2e%2e/api/x", 5, "api", key("k8")},
		{"GET /api/../public (served as /api/ by some)", "GET", "/api/../public", 5, "api", key("k9")},
		{"every forged header on GET /api/x", "GET", "/api/x", 5, "api", append(key("k10"), forged...)},
		{"every forged header on POST /login", "POST", "/login", 3, "login", forged},
		{"X-Forwarded-Host on the admin host", "GET", "/", 4, "admin", []string{"Host", "admin.example.com", "X-Forwarded-Host", "www.example.com"}},
		{"an absolute URI on the admin host", "GET", "http://admin.example.com/", 4, "admin", []string{"Host", "admin.example.com"}},
		{"X-Real-IP and X-Forwarded-For from an untrusted client", "POST", "/login", 3, "login", nil}, // set per request below
		{"no key: counted by address", "GET", "/api/x", 5, "api", nil},
	}
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			base, _ := startGatewayWith(t, g, escapePolicies(t))
			for i, r := range rows {
				from := "127.0.0." + strconv.Itoa(10+i)
				sent := 2*r.limit + 2
				reached, refused, rewritten := 0, 0, 0
				var statuses []int
				for n := range sent {
					hdr := r.hdr
					if strings.HasPrefix(r.name, "X-Real-IP") {
						fake := fmt.Sprintf("198.51.100.%d", n+1)
						hdr = []string{"X-Real-IP", fake, "X-Forwarded-For", fake}
					}
					resp := sendRaw(t, from, base, r.method, r.target, hdr...)
					statuses = append(statuses, resp.status)
					switch {
					case resp.status == 200 && strings.HasPrefix(resp.body, "app ") && !servedAs(resp.body, prefix[r.policy]):
						// The proxy sent the app another path (Traefik
						// cleans /api/../public to /public): not the
						// policy's request, and not counted as one.
						rewritten++
					case resp.status == 200 && strings.HasPrefix(resp.body, "app "):
						reached++
						if g.allowHeads {
							assert.Contains(t, resp.header.Get("RateLimit-Policy"), `"`+r.policy+`";q=`+strconv.Itoa(r.limit),
								"%s: %s: counted against %s", g.name, r.name, r.policy)
						}
					case resp.status == 429:
						refused++
						assert.Contains(t, resp.header.Get("RateLimit"), `"`+r.policy+`";r=0`, "%s: %s", g.name, r.name)
					default:
						assert.NotContains(t, resp.body, "app ", "%s: %s: an error never reaches the app", g.name, r.name)
					}
				}
				if rewritten == sent {
					t.Logf("%s: %s: the proxy sends the app another path, outside the policy", g.name, r.name)
					continue
				}
				if reached == 0 && refused == 0 {
					t.Logf("%s: %s: the proxy refuses it itself: %v", g.name, r.name, statuses)
					assert.True(t, statuses[0] >= 400 && statuses[0] < 500, "%s: %s: %v", g.name, r.name, statuses)
					continue
				}
				assert.Equal(t, r.limit, reached, "%s: %s: the app saw the limit's worth, %v", g.name, r.name, statuses)
				assert.Equal(t, sent-r.limit, refused, "%s: %s: the rest were refused, %v", g.name, r.name, statuses)
			}
		})
	}
}

// servedAs reports whether the app's answer ("app METHOD PATH", the path
// as the app's net/http decoded it) was for a path under prefix, read the
// way the sidecar reads paths.
func servedAs(body, prefix string) bool {
	f := strings.SplitN(body, " ", 3)
	if len(f) < 3 {
		return false
	}
	var p policy.Path
	if _, err := policy.CleanPath(&p, []byte(f[2]), nil); err != nil {
		return true // the sidecar could not read it: say it was the policy's
	}
	return p.HasPrefix(prefix)
}
