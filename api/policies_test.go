package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

const gatewayPolicies = `trusted_proxies: [127.0.0.1, "::1"] # the in-memory listener's peer reads as ::1
policies:
  - name: login
    match: {methods: [POST], path_prefix: /login}
    key: ip
    algo: sliding
    limit: 3
    scale: 1m
  - name: api
    match: {path_prefix: /api/}
    key: header:X-Api-Key
    limit: 2
    scale: 60000
    plans: {from: 'header:X-Plan', limits: {pro: 5}}
  - name: everyone
    key: ip
    limit: 1000
    scale: 1s
`

// newGateway serves the policies in src (written to a file, so reloads can
// change it) on a memory limiter sized for policy ids.
func newGateway(t *testing.T, src string, cfg api.Config) (*harness, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	f, err := policy.Load(path)
	require.NoError(t, err)
	clock := limitertest.NewClock(time.UnixMilli(t0))
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, Shards: 2, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	cfg.Limiter = lim
	cfg.Policies = f
	if cfg.AuthHeaders == policy.GatewayUnset {
		cfg.AuthHeaders = policy.GatewayNginx
	}
	cfg.LoadPolicies = func() (*policy.File, error) { return policy.Load(path) }
	h := newHarness(t, cfg)
	h.clock, h.lim = clock, lim
	return h, path
}

// authAs asks /auth about a request to method uri from the client at xff
// (forwarded by a trusted proxy), as nginx sends it, with more headers.
func (h *harness) authAs(t *testing.T, method, uri, xff string, hdr ...string) response {
	t.Helper()
	all := append([]string{"X-Original-Method", method, "X-Original-URI", uri, "X-Forwarded-For", xff}, hdr...)
	return h.do(t, "GET", "/auth", "", "", all...)
}

func TestAuthCountsEveryMatchingPolicy(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{})
	for i := range 3 {
		r := h.authAs(t, "POST", "/login?next=/home", "198.51.100.7")
		require.Equal(t, 200, r.status, "login %d of 3", i+1)
		assert.Equal(t, `"login";q=3;w=60, "everyone";q=1000;w=1`, r.headers["RateLimit-Policy"])
		assert.Contains(t, r.headers["RateLimit"], `"login";r=`+string(rune('2'-i)))
		assert.Empty(t, r.body, "an allowed answer has no body")
	}
	r := h.authAs(t, "POST", "/login", "198.51.100.7")
	assert.Equal(t, 429, r.status)
	// Sliding: the three hits weigh until 79.5 s from now (algo.Sliding).
	assert.Equal(t, "80", r.headers["Retry-After"])
	assert.Empty(t, r.body, "nginx reads no body: the headers say it all")
	assert.Contains(t, r.headers["RateLimit"], `"login";r=0;t=80`, "t= is never earlier than Retry-After")

	r = h.authAs(t, "POST", "/login", "198.51.100.8")
	assert.Equal(t, 200, r.status, "another client address, its own counter")
	r = h.authAs(t, "GET", "/login", "198.51.100.7")
	assert.Equal(t, 200, r.status, "GET /login is not the login policy's")
	assert.Equal(t, `"everyone";q=1000;w=1`, r.headers["RateLimit-Policy"])
}

func TestAuthFromCaddyAndTraefikHeaders(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{AuthHeaders: policy.GatewayCaddy})
	for range 3 {
		r := h.do(t, "GET", "/auth", "", "", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/login", "X-Forwarded-Host", "example.com", "X-Forwarded-For", "203.0.113.5")
		require.Equal(t, 200, r.status)
	}
	r := h.do(t, "GET", "/auth", "", "", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/login", "X-Forwarded-For", "203.0.113.5")
	assert.Equal(t, 429, r.status)
}

func TestAuthKeysNeverLeakAndNeverSmuggle(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{})
	for _, key := range []string{"k&hits=0", "k%26hits%3D0", "k?id=x", "k with spaces", "k&algo=token&limit=99999", strings.Repeat("s", 1024)} {
		t.Run(key[:min(len(key), 20)], func(t *testing.T) {
			for i := range 2 {
				r := h.authAs(t, "GET", "/api/things", "198.51.100.1", "X-Api-Key", key)
				require.Equal(t, 200, r.status, "hit %d of 2 for %q", i+1, key)
			}
			r := h.authAs(t, "GET", "/api/things", "198.51.100.1", "X-Api-Key", key)
			assert.Equal(t, 429, r.status, "the third hit of %q is over the limit of 2: the key smuggled nothing", key)
			assert.NotContains(t, r.body, key)
			for _, v := range r.headers {
				assert.NotContains(t, v, key)
			}
		})
	}
	r := h.authAs(t, "GET", "/api/things", "198.51.100.1", "X-Api-Key", strings.Repeat("s", 1025))
	assert.Equal(t, 429, r.status, "a key over -max-id-bytes is denied, never cut into another, and never an error a proxy turns into a 500")
	assert.Empty(t, r.headers["Retry-After"], "no wait lets it pass")
}

func TestAuthDenyStatusAndPlans(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{AuthDenyStatus: 403})
	for range 2 {
		require.Equal(t, 200, h.authAs(t, "GET", "/api/x", "198.51.100.1", "X-Api-Key", "free-user").status)
	}
	assert.Equal(t, 403, h.authAs(t, "GET", "/api/x", "198.51.100.1", "X-Api-Key", "free-user").status)
	r := h.do(t, "GET", "/auth?deny_status=401", "", "", "X-Original-Method", "GET", "X-Original-URI", "/api/x", "X-Api-Key", "free-user")
	assert.Equal(t, 401, r.status)
	assert.Equal(t, 400, h.do(t, "GET", "/auth?deny_status=500", "", "", "X-Original-URI", "/api/x").status)

	r = h.authAs(t, "GET", "/api/x", "198.51.100.1", "X-Api-Key", "pro-user", "X-Plan", "pro")
	assert.Equal(t, 200, r.status)
	assert.Contains(t, r.headers["RateLimit-Policy"], `"api";q=5;w=60`, "the plan's limit")
}

func TestAuthWithoutAMatchingPolicy(t *testing.T) {
	h, _ := newGateway(t, "policies:\n  - {name: only-api, match: {path_prefix: /api/}, key: ip, limit: 1, scale: 1s}\n", api.Config{})
	r := h.authAs(t, "GET", "/static/x.css", "198.51.100.1")
	assert.Equal(t, 200, r.status)
	assert.Empty(t, rateHeaders(r), "no rate-limit headers when no policy applies")
}

func TestCheckRateByPolicy(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{})
	for i := range 2 {
		r := h.get(t, "/check_rate?policy=api&id=k1")
		require.Equal(t, 200, r.status, "%d", i)
		assert.Equal(t, `"api";q=2;w=60`, r.headers["RateLimit-Policy"], "named after the policy")
		var body map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.body), &body))
		assert.Equal(t, "k1", body["id"], "the caller's id, not the counter's")
	}
	assert.Equal(t, 429, h.get(t, "/check_rate?policy=api&id=k1").status)
	// The same counter as /auth's for that key.
	assert.Equal(t, 429, h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "k1").status)
	// An explicit check with the same id is another counter.
	assert.Equal(t, 200, h.get(t, "/check_rate?id=k1&scale=60000&limit=2").status)

	for _, tc := range []struct{ uri, field string }{
		{"/check_rate?policy=api&id=k&limit=100", "policy"},
		{"/check_rate?policy=api&id=k&scale=1", "policy"},
		{"/check_rate?policy=api&id=k&algo=token", "policy"},
		{"/check_rate?policy=nope&id=k", "policy"},
		{"/check_rate?policy=api", "id"},
		{"/check_rate?policy=api&id=", "id"},
		{"/check_rate?policy=api&policy=login&id=k", "policy"},
		{"/check_rate?policy=api&id=" + strings.Repeat("x", 1025), "id"},
	} {
		r := h.get(t, tc.uri)
		assert.Equal(t, 400, r.status, tc.uri)
		assert.Contains(t, r.body, `"field":"`+tc.field+`"`, tc.uri)
	}
	r := h.do(t, "POST", "/check_rate", "application/json", `{"policy":"api","id":"k2","hits":2}`)
	assert.Equal(t, 200, r.status, r.body)
	assert.Contains(t, r.body, `"count":2`)
	r = h.do(t, "POST", "/check_rate", "application/x-www-form-urlencoded", "policy=api&id=k2")
	assert.Equal(t, 429, r.status)
}

func TestBatchByPolicy(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{})
	r := h.do(t, "POST", "/check_rates", "application/json",
		`[{"policy":"api","id":"b"},{"id":"b","scale":60000,"limit":1},{"policy":"api","id":"b"},{"policy":"api","id":"b"}]`)
	require.Equal(t, 200, r.status, r.body)
	var ds []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.body), &ds))
	require.Len(t, ds, 4)
	assert.Equal(t, []any{true, true, true, false}, []any{ds[0]["allowed"], ds[1]["allowed"], ds[2]["allowed"], ds[3]["allowed"]})
	assert.Equal(t, "b", ds[3]["id"])
	r = h.do(t, "POST", "/check_rates", "application/json", `[{"policy":"api","id":"c"},{"policy":"nope","id":"c"}]`)
	assert.Equal(t, 400, r.status)
	assert.Contains(t, r.body, `"index":1`)
}

func TestPoliciesOnly(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{PoliciesOnly: true})
	r := h.get(t, "/check_rate?id=k&scale=1000&limit=1000000")
	assert.Equal(t, 400, r.status)
	assert.Contains(t, r.body, "-policies-only")
	r = h.do(t, "POST", "/check_rates", "application/json", `[{"id":"k","scale":1000,"limit":5}]`)
	assert.Equal(t, 400, r.status)
	assert.Equal(t, 200, h.get(t, "/check_rate?policy=api&id=k").status)
}

func TestReloadKeepsCountersOfUnchangedPolicies(t *testing.T) {
	h, path := newGateway(t, gatewayPolicies, api.Config{AdminToken: "s3cret"})
	for range 2 {
		require.Equal(t, 200, h.get(t, "/check_rate?policy=api&id=k").status)
	}
	changed := strings.Replace(gatewayPolicies, "limit: 1000", "limit: 999", 1)
	require.NoError(t, os.WriteFile(path, []byte(changed), 0o600))
	assert.Equal(t, 401, h.do(t, "POST", "/reload", "", "").status, "an admin endpoint")
	r := h.do(t, "POST", "/reload", "", "", "Authorization", "Bearer s3cret")
	require.Equal(t, 200, r.status, r.body)
	assert.JSONEq(t, `{"reloaded":true,"policies":3}`, r.body)
	assert.Equal(t, 429, h.get(t, "/check_rate?policy=api&id=k").status, "the api policy kept its count")
	assert.Equal(t, `"everyone";q=999;w=1`, h.authAs(t, "GET", "/x", "1.2.3.4").headers["RateLimit-Policy"], "the new rules are in force")

	require.NoError(t, os.WriteFile(path, []byte("policies:\n  - {name: broken, key: ip}\n"), 0o600))
	r = h.do(t, "POST", "/reload", "", "", "Authorization", "Bearer s3cret")
	assert.Equal(t, 422, r.status)
	assert.Contains(t, r.body, "policies.yaml:2: ")
	assert.Equal(t, `"everyone";q=999;w=1`, h.authAs(t, "GET", "/x", "1.2.3.4").headers["RateLimit-Policy"], "a bad file keeps the rules in force")
	m := h.get(t, "/metrics").body
	assert.Contains(t, m, `raterlimiter_policy_reloads_total{result="failed"} 1`)
	assert.Contains(t, m, `raterlimiter_policy_reloads_total{result="ok"} 1`)
	assert.Contains(t, m, `raterlimiter_policy_checks_total{policy="api",result="denied"} 1`)
}

func TestReloadWithoutPolicies(t *testing.T) {
	h := newHarness(t, api.Config{})
	assert.Equal(t, 409, h.do(t, "POST", "/reload", "", "").status)
	assert.ErrorIs(t, h.srv.ReloadPolicies(), api.ErrNoPolicies)
	r := h.get(t, "/check_rate?policy=api&id=k")
	assert.Equal(t, 400, r.status)
	assert.Contains(t, r.body, "no policies are loaded")
	assert.Equal(t, 503, h.do(t, "GET", "/auth", "", "").status)
}

func TestPolicyMetricsFollowTheFile(t *testing.T) {
	h, path := newGateway(t, gatewayPolicies, api.Config{})
	h.get(t, "/check_rate?policy=login&id=1.2.3.4")
	require.Contains(t, h.get(t, "/metrics").body, `raterlimiter_policy_checks_total{policy="login",result="allowed"} 1`)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(gatewayPolicies, "name: login", "name: signin", 1)), 0o600))
	require.NoError(t, h.srv.ReloadPolicies())
	m := h.get(t, "/metrics").body
	assert.NotContains(t, m, `policy="login"`, "a policy gone from the file takes its series with it")
	assert.Contains(t, m, `raterlimiter_policies 3`)
}

// TestAuthPlanChangeMidWindow: a key that moves to another plan keeps its
// count, and is held to the new plan's limit from its next request.
func TestAuthPlanChangeMidWindow(t *testing.T) {
	h, _ := newGateway(t, gatewayPolicies, api.Config{}) // api: 2 a minute, pro 5
	for range 2 {
		require.Equal(t, 200, h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "mover").status)
	}
	r := h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "mover")
	require.Equal(t, 429, r.status, "the default plan: 2")
	h.clock.Advance(10 * time.Second)
	r = h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "mover", "X-Plan", "pro")
	assert.Equal(t, 200, r.status, "upgraded in the same window: 4 of 5 (the fixed window counted the denied hit)")
	assert.Contains(t, r.headers["RateLimit-Policy"], `"api";q=5;w=60`)
	assert.Contains(t, r.headers["RateLimit"], `"api";r=1;`)
	assert.Equal(t, 200, h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "mover", "X-Plan", "pro").status)
	assert.Equal(t, 429, h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "mover", "X-Plan", "pro").status)
	r = h.authAs(t, "GET", "/api/x", "1.2.3.4", "X-Api-Key", "mover", "X-Plan", "unknown-plan")
	assert.Equal(t, 429, r.status, "an unknown plan gets the policy's own limit")
	assert.Contains(t, r.headers["RateLimit-Policy"], `"api";q=2;w=60`)
}

// TestIDsThatAreNotUTF8 stay exact: %ff and %fe are two ids, answered with
// their bytes in base64, never as U+FFFD.
func TestIDsThatAreNotUTF8(t *testing.T) {
	h := newHarness(t, api.Config{})
	a := h.get(t, "/check_rate?id=%ff&scale=60000&limit=1")
	b := h.get(t, "/check_rate?id=%fe&scale=60000&limit=1")
	assert.Equal(t, 200, a.status)
	assert.Equal(t, 200, b.status, "another id")
	assert.Contains(t, a.body, `"id_b64":"/w=="`)
	assert.Contains(t, b.body, `"id_b64":"/g=="`)
	assert.NotContains(t, a.body, `"id":`)
	assert.NotContains(t, a.body, "\ufffd")
	r := h.do(t, "POST", "/check_rates", "application/json", `[{"id":"ok","scale":1000,"limit":1}]`)
	assert.Contains(t, r.body, `"id":"ok"`, "UTF-8 ids keep their key")
	r = h.get(t, "/check_rate?id=%ff&scale=60000&limit=1")
	assert.Equal(t, 429, r.status, "the same id counted again")
}

// TestBucketsArePaged: GET /buckets answers at most limit records and the
// cursor of the next page; the Go client follows the pages.
func TestBucketsArePaged(t *testing.T) {
	h := newHarness(t, api.Config{})
	for scale := 1000; scale <= 5000; scale += 1000 {
		require.Equal(t, 200, h.get(t, "/check_rate?id=p&scale="+strconv.Itoa(scale)+"&limit=5").status)
	}
	r := h.get(t, "/buckets?id=p&limit=2")
	require.Equal(t, 200, r.status, r.body)
	var page []millis.Bucket
	require.NoError(t, json.Unmarshal([]byte(r.body), &page))
	assert.Len(t, page, 2)
	assert.Equal(t, "2", r.headers["X-Next-Cursor"])
	r = h.get(t, "/buckets?id=p&limit=2&cursor=4")
	require.NoError(t, json.Unmarshal([]byte(r.body), &page))
	assert.Len(t, page, 1)
	assert.Equal(t, int64(5000), page[0].Scale)
	assert.Empty(t, r.headers["X-Next-Cursor"], "the last page")
	assert.Equal(t, 400, h.get(t, "/buckets?id=p&limit=0").status)
	assert.Equal(t, 400, h.get(t, "/buckets?id=p&limit=10001").status)
	assert.Equal(t, 400, h.get(t, "/buckets?id=p&cursor=x").status)
}

// TestAuthAnswerBodies: an answer carries a body only where the proxy
// reads it. nginx's auth_request reads the status and the headers, and
// Caddy's forward_auth the headers of an allowed answer: each keeps its
// connection to the sidecar only when there is no body to skip. Caddy and
// Traefik pass a denial on to the client as it is, body and all. A 400 (the
// proxy is not set up as documented) keeps its message for whoever sets
// it up.
func TestAuthAnswerBodies(t *testing.T) {
	for _, g := range []policy.Gateway{policy.GatewayNginx, policy.GatewayCaddy, policy.GatewayTraefik} {
		t.Run(g.String(), func(t *testing.T) {
			h, _ := newGateway(t, escapePolicies, api.Config{AuthHeaders: g})
			ask := func(method, target string, more ...string) response {
				t.Helper()
				return h.do(t, "GET", "/auth", "", "", original(g, method, target, "h", more...)...)
			}
			empty := func(r response, status int) {
				t.Helper()
				assert.Equal(t, status, r.status, r.body)
				assert.Empty(t, r.body)
				assert.Equal(t, "0", r.headers["Content-Length"])
			}
			denial := func(r response, body string) {
				t.Helper()
				if g == policy.GatewayNginx {
					empty(r, 429)
					return
				}
				assert.Equal(t, 429, r.status)
				assert.JSONEq(t, body, r.body)
				assert.Equal(t, "application/json", r.headers["Content-Type"])
			}

			for i := range 2 {
				r := ask("GET", "/api/x", "X-Api-Key", "k")
				empty(r, 200)
				assert.Equal(t, `"api";r=`+strconv.Itoa(1-i)+`;t=60`, r.headers["RateLimit"])
			}
			r := ask("GET", "/public")
			empty(r, 200)
			assert.Empty(t, rateHeaders(r), "no policy matches")

			r = ask("GET", "/api/x", "X-Api-Key", "k")
			denial(r, `{"allowed":false,"policy":"api","retry_after_ms":59500}`)
			assert.Equal(t, "60", r.headers["Retry-After"], "the headers say what the body would")
			assert.Equal(t, `"api";r=0;t=60`, r.headers["RateLimit"])
			denial(ask("GET", "/api/x"), `{"allowed":false,"policy":"api","missing_key":true}`)
			denial(ask("GET", "/api/x", "X-Api-Key", strings.Repeat("s", 1025)), `{"allowed":false,"policy":"api","bad_key":"too_long"}`)
			denial(ask("GET", "/api/%zz", "X-Api-Key", "k"),
				`{"allowed":false,"error":"api: /auth: the original request's path cannot be decoded (a percent sign without two hex digits, a raw '#', or no path)"}`)

			r = h.do(t, "GET", "/auth", "", "", g.Headers().Method, "GET")
			assert.Equal(t, 400, r.status)
			assert.Contains(t, r.body, "the request has no "+g.Headers().URI)
		})
	}
}

// TestAuthUnavailableHasNoBodyForNginx: a 503 a client can bring about (a
// flood, a backend down) must not cost nginx a connection either; Caddy
// and Traefik pass it on to the client with its message.
func TestAuthUnavailableHasNoBodyForNginx(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(escapePolicies), 0o600))
	f, err := policy.Load(path)
	require.NoError(t, err)
	for _, g := range []policy.Gateway{policy.GatewayNginx, policy.GatewayCaddy} {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, api.Config{Limiter: &stuck{}, Timeout: 50 * time.Millisecond, Policies: f, AuthHeaders: g})
			r := h.do(t, "GET", "/auth", "", "", original(g, "GET", "/api/x", "h", "X-Api-Key", "k")...)
			assert.Equal(t, 503, r.status)
			assert.Equal(t, "1", r.headers["Retry-After"])
			if g == policy.GatewayNginx {
				assert.Empty(t, r.body)
				assert.Equal(t, "0", r.headers["Content-Length"])
			} else {
				assert.Contains(t, r.body, "the limiter cannot answer now")
			}
		})
	}
}
