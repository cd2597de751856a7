package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

const (
	checkKnown   = "the known ones are id, scale, limit, hits, algo, slices, queue, max_delay_ms, wait and policy"
	batchKnown   = "the known ones are id, scale, limit, hits, algo, slices, queue, max_delay_ms and policy"
	bucketsGet   = "the known ones are id, limit and cursor"
	bucketsTaken = "the known ones are id and scale"
)

// TestUnknownNamesAreRefused: a parameter or JSON field an endpoint does
// not read is a 400 naming it and the ones it reads, never a default taken
// in silence (alog=sliding answered by a fixed window), and it counts
// nothing.
func TestUnknownNamesAreRefused(t *testing.T) {
	h := newHarness(t, api.Config{})
	const ok = "id=v&scale=60000&limit=5"
	form, js := "application/x-www-form-urlencoded", "application/json"
	tests := []struct {
		name, method, ct, uri, body string
		field, rule                 string
		index                       int // of a batch's item; -1 for none
	}{
		{"typo of algo", "GET", "", "/check_rate?" + ok + "&alog=sliding", "", "alog", checkKnown, -1},
		{"cache buster", "GET", "", "/check_rate?" + ok + "&_=1700000000", "", "_", checkKnown, -1},
		{"first of several", "GET", "", "/check_rate?" + ok + "&b=1&a=2", "", "b", checkKnown, -1},
		{"before the fields it lacks", "GET", "", "/check_rate?x=1", "", "x", checkKnown, -1},
		{"a name without a value", "GET", "", "/check_rate?" + ok + "&peek", "", "peek", checkKnown, -1},
		{"names are case-sensitive", "GET", "", "/check_rate?ID=v&scale=60000&limit=5", "", "ID", checkKnown, -1},
		{"an empty name with a value", "GET", "", "/check_rate?" + ok + "&=5", "", `""`, checkKnown, -1},
		{"a NUL in the name", "GET", "", "/check_rate?" + ok + "&a%00=1", "", "a\x00", checkKnown, -1},
		{"a name that is not UTF-8", "GET", "", "/check_rate?" + ok + "&%ff=1", "", "\ufffd", checkKnown, -1},
		{"a long name is cut", "GET", "", "/check_rate?" + ok + "&" + strings.Repeat("n", 5000) + "=1", "",
			strings.Repeat("n", 64) + "...", checkKnown, -1},
		{"by policy", "GET", "", "/check_rate?policy=p&id=v&alog=sliding", "", "alog", checkKnown, -1},
		{"form", "POST", form, "/check_rate", ok + "&alog=sliding", "alog", checkKnown, -1},
		{"json", "POST", js, "/check_rate", `{"id":"v","scale":60000,"limit":5,"alog":"sliding"}`, "alog", checkKnown, -1},
		{"json, escaped name", "POST", js, "/check_rate", `{"id":"v","scale":60000,"limit":5,"\u0061log":"sliding"}`, "alog", checkKnown, -1},
		{"json, an object's value", "POST", js, "/check_rate", `{"id":"v","x":{"a":[1,2.5e3,null,true]},"scale":60000,"limit":5}`, "x", checkKnown, -1},
		{"json, case", "POST", js, "/check_rate", `{"Id":"v","scale":60000,"limit":5}`, "Id", checkKnown, -1},
		{"json, empty name", "POST", js, "/check_rate", `{"id":"v","scale":60000,"limit":5,"":1}`, `""`, checkKnown, -1},
		{"json sniffed", "POST", "", "/check_rate", `{"id":"v","scale":60000,"limit":5,"alog":"sliding"}`, "alog", checkKnown, -1},
		{"query of a POSTed form", "POST", form, "/check_rate?alog=sliding", ok, "alog", "reads its checks from the body alone", -1},
		{"query of a POSTed JSON", "POST", js, "/check_rate?id=v", `{"id":"v","scale":60000,"limit":5}`, "id", "reads its checks from the body alone", -1},
		{"batch item", "POST", js, "/check_rates", `[{"id":"v","scale":60000,"limit":5},{"id":"v","scale":60000,"limit":5,"alog":"sliding"}]`, "alog", batchKnown, 1},
		{"query of a batch", "POST", js, "/check_rates?alog=sliding", `[{"id":"v","scale":60000,"limit":5}]`, "alog", "reads its checks from the body alone", -1},
		{"buckets, GET", "GET", "", "/buckets?id=v&scope=60000", "", "scope", bucketsGet, -1},
		{"buckets, DELETE", "DELETE", "", "/buckets?id=v&sclae=60000", "", "sclae", bucketsTaken, -1},
		{"buckets, a DELETE's page", "DELETE", "", "/buckets?id=v&limit=2", "", "limit", "is only for GET", -1},
		{"buckets, a DELETE's cursor", "DELETE", "", "/buckets?id=v&cursor=2", "", "cursor", "is only for GET", -1},
		{"buckets, limit twice", "GET", "", "/buckets?id=v&limit=2&limit=3", "", "limit", "must be given once", -1},
		{"buckets, cursor twice", "GET", "", "/buckets?id=v&cursor=2&cursor=0", "", "cursor", "must be given once", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.method, tt.uri, tt.ct, tt.body)
			require.Equal(t, 400, r.status, r.body)
			var e errBody
			require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
			assert.Equal(t, tt.field, e.Field)
			assert.Contains(t, e.Rule, tt.rule)
			assert.Contains(t, e.Error, e.Rule)
			if tt.index < 0 {
				assert.Nil(t, e.Index)
			} else if assert.NotNil(t, e.Index) {
				assert.Equal(t, tt.index, *e.Index)
			}
		})
	}
	r := h.get(t, "/check_rate?"+ok+"&hits=0")
	require.Equal(t, 200, r.status, r.body)
	assert.Contains(t, r.body, `"count":0,`, "nothing refused was counted")
}

// TestEmptyPairsAreNoNames: a query's stray separators ("&&", a trailing
// "&") hold no name; a percent-escaped name is the name it spells.
func TestEmptyPairsAreNoNames(t *testing.T) {
	h := newHarness(t, api.Config{})
	for _, q := range []string{
		"id=v&scale=60000&limit=5&",
		"&&id=v&&scale=60000&limit=5",
		"%69d=v&scale=60000&%6cimit=5",
	} {
		r := h.get(t, "/check_rate?"+q)
		assert.Equal(t, 200, r.status, "%s: %s", q, r.body)
	}
	r := h.do(t, "POST", "/check_rate?", "application/json", `{"id":"v","scale":60000,"limit":5}`)
	assert.Equal(t, 200, r.status, "an empty query on a POST: %s", r.body)
}

// TestAuthQuery: /auth reads its query only from nginx, whose
// configuration writes it: there anything but one deny_status is a
// mistake of that configuration, a 400. Caddy and Traefik pass the
// client's query on, which /auth never reads, so it refuses nothing there.
func TestAuthQuery(t *testing.T) {
	const src = "policies:\n  - {name: api, key: ip, limit: 2, scale: 1m}\n"
	nginx, _ := newGateway(t, src, api.Config{})
	orig := []string{"X-Original-Method", "GET", "X-Original-URI", "/x", "X-Forwarded-For", "198.51.100.1"}
	tests := []struct {
		name, uri   string
		status      int
		field, rule string
	}{
		{"typo", "/auth?deny_stauts=403", 400, "deny_stauts", "is not a parameter of /auth; the only one is deny_status"},
		{"beside deny_status", "/auth?deny_status=403&x=1", 400, "x", "the only one is deny_status"},
		{"deny_status twice", "/auth?deny_status=403&deny_status=401", 400, "deny_status", "must be given once"},
		{"bad deny_status", "/auth?deny_status=500", 400, "deny_status", "must be 401, 403 or 429"},
		{"stray separators", "/auth?&deny_status=403&", 200, "", ""},
		{"no query", "/auth", 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := nginx.do(t, "GET", tt.uri, "", "", orig...)
			require.Equal(t, tt.status, r.status, r.body)
			if tt.status != 400 {
				return
			}
			var e errBody
			require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
			assert.Equal(t, tt.field, e.Field)
			assert.Contains(t, e.Rule, tt.rule)
		})
	}
	r := nginx.do(t, "GET", "/auth?deny_status=403", "", "", orig...)
	assert.Equal(t, 403, r.status, "the two allowed checks were taken above: %s", r.body)

	caddy, _ := newGateway(t, src, api.Config{AuthHeaders: policy.GatewayCaddy})
	fwd := []string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/x?alog=1", "X-Forwarded-For", "198.51.100.1"}
	for range 2 {
		r = caddy.do(t, "GET", "/auth?alog=1&deny_status=403", "", "", fwd...)
		assert.Equal(t, 200, r.status, "the client's query is not read: %s", r.body)
	}
	r = caddy.do(t, "GET", "/auth?alog=1&deny_status=403", "", "", fwd...)
	assert.Equal(t, 429, r.status, "nor its deny_status: %s", r.body)
}
