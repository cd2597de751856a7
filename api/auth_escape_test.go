package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// escapePolicies has one policy of each kind a client would try to escape:
// by path, by method, by host.
const escapePolicies = `trusted_proxies: [127.0.0.1, "::1"]
policies:
  - name: api
    match: {path_prefix: /api/}
    key: header:X-Api-Key
    limit: 2
    scale: 1m
  - name: login
    match: {methods: [POST], path_prefix: /login}
    key: ip
    limit: 2
    scale: 1m
  - name: admin-host
    match: {host: admin.example.com}
    key: ip
    limit: 2
    scale: 1m
`

// original is a request as a proxy hands it to /auth: the headers of the
// gateway's family, then whatever else.
func original(g policy.Gateway, method, target, host string, more ...string) []string {
	n := g.Headers()
	return append([]string{n.Method, method, n.URI, target, n.Host, host, "X-Forwarded-For", "198.51.100.7"}, more...)
}

// TestAuthReadsOnlyTheGatewaysHeaders sends, beside the headers the proxy
// sets, a client's own copy of the other family's: the limit holds.
func TestAuthReadsOnlyTheGatewaysHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gateway policy.Gateway
		method  string
		target  string
		host    string
		forged  []string // what the client adds to escape
	}{
		{"nginx: X-Forwarded-Uri to /public", policy.GatewayNginx, "GET", "/api/x", "h", []string{"X-Forwarded-Uri", "/public", "X-Forwarded-Method", "GET"}},
		{"nginx: X-Forwarded-Method GET on POST /login", policy.GatewayNginx, "POST", "/login", "h", []string{"X-Forwarded-Method", "GET"}},
		{"nginx: X-Forwarded-Host", policy.GatewayNginx, "GET", "/", "admin.example.com", []string{"X-Forwarded-Host", "www.example.com"}},
		{"nginx: X-Forwarded-Prefix", policy.GatewayNginx, "GET", "/api/x", "h", []string{"X-Forwarded-Prefix", "/public"}},
		{"caddy: X-Original-URI to /public", policy.GatewayCaddy, "GET", "/api/x", "h", []string{"X-Original-URI", "/public", "X-Original-Method", "GET"}},
		{"caddy: X-Original-Method GET on POST /login", policy.GatewayCaddy, "POST", "/login", "h", []string{"X-Original-Method", "GET"}},
		{"caddy: Host", policy.GatewayCaddy, "GET", "/", "admin.example.com", []string{"Host", "www.example.com"}},
		{"traefik: X-Original-URI to /public", policy.GatewayTraefik, "GET", "/api/x", "h", []string{"X-Original-URI", "/public"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newGateway(t, escapePolicies, api.Config{AuthHeaders: tc.gateway})
			hdr := append(original(tc.gateway, tc.method, tc.target, tc.host, "X-Api-Key", "k"), tc.forged...)
			for i := range 2 {
				r := h.do(t, "GET", "/auth", "", "", hdr...)
				require.Equal(t, 200, r.status, "hit %d of 2: %s", i+1, r.body)
			}
			r := h.do(t, "GET", "/auth", "", "", hdr...)
			assert.Equal(t, 429, r.status, "the third hit is counted against the policy: %s", r.body)
		})
	}
}

func TestAuthWithoutAGatewayRefuses(t *testing.T) {
	h := newHarness(t, api.Config{Policies: mustLoad(t, escapePolicies)})
	r := h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "GET", "/api/x", "h", "X-Api-Key", "k")...)
	assert.Equal(t, 503, r.status)
	assert.Equal(t, "60", r.headers["Retry-After"])
	assert.Contains(t, r.body, "-auth-headers nginx, caddy or traefik")
}

// TestAuthWithoutTheGatewaysHeaders: a proxy that does not send its
// family's method or target is not set up as documented; the other
// family's copy (a client's) is no stand-in.
func TestAuthWithoutTheGatewaysHeaders(t *testing.T) {
	both := map[string]string{
		"X-Original-Method": "GET", "X-Original-URI": "/api/x",
		"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/api/x",
	}
	for _, g := range policy.Gateways {
		n := g.Headers()
		for _, leave := range []string{n.Method, n.URI} {
			t.Run(g.String()+" without "+leave, func(t *testing.T) {
				h, _ := newGateway(t, escapePolicies, api.Config{AuthHeaders: g})
				hdr := []string{"X-Api-Key", "k"}
				for k, v := range both {
					if k != leave {
						hdr = append(hdr, k, v)
					}
				}
				r := h.do(t, "GET", "/auth", "", "", hdr...)
				assert.Equal(t, 400, r.status)
				assert.Contains(t, r.body, leave)
			})
		}
	}
}

// TestAuthNormalisesPaths: every target below is /api/x to some backend;
// each is counted on the same counter as /api/x itself.
func TestAuthNormalisesPaths(t *testing.T) {
	for _, target := range []string{
		"/%61pi/x", "//api/x", "/x/../api/x", "/api;a=b/x", "/API/x", "/Api/X", "/api%2Fx", "/./api/x",
		"/x/%2e%2e/api/x", "/x/..;/api/x", "/api\\x", "/api/x?q=/public", "http://evil.example/api/x", "/api/../x",
	} {
		t.Run(target, func(t *testing.T) {
			h, _ := newGateway(t, escapePolicies, api.Config{})
			require.Equal(t, 200, h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "GET", "/api/x", "h", "X-Api-Key", "k")...).status)
			r := h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "GET", target, "h", "X-Api-Key", "k")...)
			require.Equal(t, 200, r.status, r.body)
			assert.Contains(t, r.headers["RateLimit"], `"api";r=0;`, "counted against api")
			r = h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "GET", target, "h", "X-Api-Key", "k")...)
			assert.Equal(t, 429, r.status, "the third hit of %q", target)
		})
	}
}

func TestAuthRefusesPathsItCannotRead(t *testing.T) {
	h, _ := newGateway(t, escapePolicies, api.Config{AuthDenyStatus: 403})
	for _, target := range []string{"/api/%zz", "/%", "/api/%4", "api/x"} {
		r := h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "GET", target, "h", "X-Api-Key", "k")...)
		assert.Equal(t, 403, r.status, target)
		assert.Empty(t, r.headers["Retry-After"], "no wait makes it readable")
	}
}

func TestAuthMethodsAndHosts(t *testing.T) {
	h, _ := newGateway(t, escapePolicies+`  - name: reads
    match: {methods: [GET], path_prefix: /r/}
    key: ip
    limit: 3
    scale: 1m
`, api.Config{})
	for _, m := range []string{"post", "Post"} {
		r := h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, m, "/login", "h")...)
		assert.Contains(t, r.headers["RateLimit-Policy"], `"login"`, "method %s is POST to backends that fold case", m)
	}
	assert.Equal(t, 429, h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "POST", "/login", "h")...).status)
	for _, m := range []string{"GET", "HEAD", "head"} {
		r := h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, m, "/r/x", "h")...)
		assert.Contains(t, r.headers["RateLimit-Policy"], `"reads"`, "%s is served by a GET handler", m)
	}
	assert.Equal(t, 429, h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "HEAD", "/r/x", "h")...).status)
	for _, host := range []string{"admin.example.com", "ADMIN.example.com.", "admin.example.com.:8443"} {
		r := h.do(t, "GET", "/auth", "", "", original(policy.GatewayNginx, "GET", "/", host)...)
		assert.Contains(t, r.headers["RateLimit-Policy"], `"admin-host"`, host)
	}
}

func TestAuthMissingKey(t *testing.T) {
	src := func(missing string) string {
		s := "trusted_proxies: [\"::1\"]\npolicies:\n  - {name: api, match: {path_prefix: /api/}, key: 'header:X-Api-Key', limit: 2, scale: 1m"
		if missing != "" {
			s += ", missing_key: '" + missing + "'"
		}
		return s + "}\n"
	}
	anon := func(h *harness, xff string, more ...string) response {
		return h.do(t, "GET", "/auth", "", "", append([]string{"X-Original-Method", "GET", "X-Original-URI", "/api/x", "X-Forwarded-For", xff}, more...)...)
	}
	t.Run("deny, the default", func(t *testing.T) {
		for _, missing := range []string{"", "deny"} {
			h, _ := newGateway(t, src(missing), api.Config{AuthDenyStatus: 403})
			for _, extra := range [][]string{nil, {"X-Api-Key", ""}} {
				r := anon(h, "198.51.100.7", extra...)
				assert.Equal(t, 403, r.status)
				assert.Empty(t, r.headers["Retry-After"], "no wait brings a key")
				assert.Empty(t, r.headers["RateLimit"])
			}
		}
	})
	t.Run("skip", func(t *testing.T) {
		h, _ := newGateway(t, src("skip"), api.Config{})
		for range 5 {
			r := anon(h, "198.51.100.7")
			assert.Equal(t, 200, r.status)
			assert.Empty(t, rateHeaders(r))
		}
	})
	t.Run("key:ip", func(t *testing.T) {
		h, _ := newGateway(t, src("key:ip"), api.Config{})
		for range 2 {
			r := anon(h, "198.51.100.7")
			require.Equal(t, 200, r.status)
			assert.Contains(t, r.headers["RateLimit-Policy"], `"api";q=2;w=60`)
		}
		assert.Equal(t, 429, anon(h, "198.51.100.7").status, "anonymous callers limited by address")
		assert.Equal(t, 200, anon(h, "198.51.100.8").status, "another address, its own counter")
		// A key that spells an address is not that address's anonymous
		// counter: nobody can spend another's anonymous budget.
		assert.Equal(t, 200, anon(h, "203.0.113.1", "X-Api-Key", "198.51.100.8").status)
		assert.Equal(t, 200, anon(h, "203.0.113.1", "X-Api-Key", "198.51.100.8").status)
		assert.Equal(t, 429, anon(h, "203.0.113.1", "X-Api-Key", "198.51.100.8").status)
		assert.Equal(t, 200, anon(h, "198.51.100.8").status, "2 of 2 for the address")
	})
	t.Run("a file that says so", func(t *testing.T) {
		for _, bad := range []string{"maybe", "key:", "key:header:", "key:header:X-Api-Key", "key:cookie"} {
			_, err := policy.Parse("p.yaml", []byte(src(bad)))
			require.Error(t, err, bad)
			assert.Contains(t, err.Error(), "missing_key", bad)
		}
	})
}

func mustLoad(t *testing.T, src string) *policy.File {
	t.Helper()
	f, err := policy.Parse("p.yaml", []byte(src))
	require.NoError(t, err)
	return f
}

// TestAuthDenyStatusFromTheQueryIsNginxOnly: Caddy's forward_auth passes
// the client's query on to /auth, so there ?deny_status= is the client's.
func TestAuthDenyStatusFromTheQueryIsNginxOnly(t *testing.T) {
	h, _ := newGateway(t, escapePolicies, api.Config{AuthHeaders: policy.GatewayCaddy})
	hdr := original(policy.GatewayCaddy, "GET", "/api/x", "h", "X-Api-Key", "k")
	for range 2 {
		require.Equal(t, 200, h.do(t, "GET", "/auth?deny_status=401", "", "", hdr...).status)
	}
	assert.Equal(t, 429, h.do(t, "GET", "/auth?deny_status=401", "", "", hdr...).status)
	assert.Equal(t, 429, h.do(t, "GET", "/auth?deny_status=500", "", "", hdr...).status)
}
