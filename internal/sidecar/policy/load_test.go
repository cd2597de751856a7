package policy_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

const example = `trusted_proxies: [127.0.0.1/32, "::1/128", 10.1.2.3]
policies:
  - name: login
    match:
      methods: [post]
      path_prefix: /login
      host: Example.COM
    key: ip
    algo: sliding
    limit: 3
    scale: 1m
  - name: api
    match: {path_prefix: /api/}
    key: header:X-Api-Key
    limit: 100
    scale: 60000
    hits: 2
    plans:
      from: header:X-Plan
      limits: {free: 2, pro: 50}
  - name: pair
    key: [ip, header:X-User]
    missing_key: skip
    algo: log
    limit: 65536
    scale: 87600h
`

func TestParseEveryField(t *testing.T) {
	f, err := policy.Parse("p.yaml", []byte(example))
	require.NoError(t, err)
	require.Len(t, f.Policies, 3)
	for _, a := range []string{"127.0.0.1", "::1", "10.1.2.3"} {
		assert.True(t, f.Proxies.Trusted(netip.MustParseAddr(a)), a)
	}
	assert.False(t, f.Proxies.Trusted(netip.MustParseAddr("10.1.2.4")))

	login := f.Lookup("login")
	require.NotNil(t, login)
	assert.Equal(t, []string{"POST"}, login.Match.Methods)
	assert.Equal(t, "/login", login.Match.PathPrefix)
	assert.Equal(t, "example.com", login.Match.Host)
	assert.Equal(t, []policy.KeySource{{Kind: policy.KeyIP}}, login.Key)
	assert.Equal(t, rl.Sliding, login.Algo)
	assert.Equal(t, int64(3), login.Limit)
	assert.Equal(t, int64(60_000), login.Scale)
	assert.Equal(t, int64(1), login.Hits, "hits defaults to 1")
	assert.Equal(t, 3, login.Line)

	api := f.Lookup("api")
	require.NotNil(t, api)
	assert.Equal(t, rl.Fixed, api.Algo, "algo defaults to fixed")
	assert.Equal(t, int64(60_000), api.Scale, "an integer scale is milliseconds")
	assert.Equal(t, int64(2), api.Hits)
	assert.Equal(t, []policy.KeySource{{Kind: policy.KeyHeader, Header: "X-Api-Key"}}, api.Key)
	require.NotNil(t, api.Plans)
	assert.Equal(t, map[string]int64{"free": 2, "pro": 50}, api.Plans)
	assert.Equal(t, "X-Plan", api.PlanFrom.Header)
	assert.Equal(t, policy.MissingKey{Action: policy.MissingDeny}, api.MissingKey, "missing_key defaults to deny")

	pair := f.Lookup("pair")
	assert.Equal(t, []policy.KeySource{{Kind: policy.KeyIP}, {Kind: policy.KeyHeader, Header: "X-User"}}, pair.Key)
	assert.Equal(t, rl.Log, pair.Algo)
	assert.Equal(t, check.MaxScale.Milliseconds(), pair.Scale)
	assert.Equal(t, policy.MissingSkip, pair.MissingKey.Action)
	assert.Nil(t, f.Lookup("nope"))
}

func TestLoadFromDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(example), 0o600))
	f, err := policy.Load(path)
	require.NoError(t, err)
	assert.Equal(t, path, f.Path)
	_, err = policy.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, policy.ErrInvalidFile)
	assert.Contains(t, err.Error(), "missing.yaml: cannot be read")
}

// one builds a file of one policy with the given lines (indented under the
// list item) after name.
func one(lines ...string) string {
	return "policies:\n  - name: p\n" + "    " + strings.Join(lines, "\n    ") + "\n"
}

func TestParseRefusesNamingTheLine(t *testing.T) {
	ok := []string{"key: ip", "limit: 3", "scale: 1s"}
	with := func(repl map[string]string, extra ...string) string {
		var ls []string
		for _, l := range ok {
			field := l[:strings.IndexByte(l, ':')]
			if r, found := repl[field]; found {
				if r != "" {
					ls = append(ls, r)
				}
				continue
			}
			ls = append(ls, l)
		}
		return one(append(ls, extra...)...)
	}
	for _, tc := range []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"empty file", "", 0, "is empty"},
		{"only a comment", "# nothing\n", 0, "is empty"},
		{"not yaml", "policies: [\n", 1, "not valid YAML"},
		{"a list at the top", "- a\n", 1, "the file must be a mapping"},
		{"unknown top-level field", "polices: []\n", 1, `unknown field "polices"`},
		{"no policies", "trusted_proxies: []\n", 1, "no policies"},
		{"empty policies", "policies: []\n", 1, "non-empty list"},
		{"unknown policy field", with(nil, "limt: 3"), 6, `unknown field "limt"`},
		{"field twice", with(nil, "limit: 4"), 6, `field "limit" given twice`},
		{"no name", "policies:\n  - key: ip\n    limit: 1\n    scale: 1s\n", 2, "needs a name"},
		{"bad name", strings.Replace(with(nil), "name: p", "name: a b", 1), 2, `name "a b"`},
		{"name too long", strings.Replace(with(nil), "name: p", "name: "+strings.Repeat("n", 65), 1), 2, "1 to 64"},
		{"name of 64", strings.Replace(with(nil), "name: p", "name: "+strings.Repeat("n", 64), 1), 0, ""},
		{"no key", with(map[string]string{"key": ""}), 2, "key is required"},
		{"bad key", with(map[string]string{"key": "key: cookie:x"}), 3, `"cookie:x" must be ip or header:NAME`},
		{"bad header name", with(map[string]string{"key": "key: 'header:X Y'"}), 3, "must be ip or header:NAME"},
		{"empty key list", with(map[string]string{"key": "key: []"}), 3, "a list of 1 to 8"},
		{"no limit", with(map[string]string{"limit": ""}), 2, "limit is required"},
		{"limit -1", with(map[string]string{"limit": "limit: -1"}), 4, "limit: \"-1\" must be an integer from 0 to 4294967295"},
		{"limit 0", with(map[string]string{"limit": "limit: 0"}), 0, ""},
		{"largest limit", with(map[string]string{"limit": "limit: 4294967295"}), 0, ""},
		{"limit past the bound", with(map[string]string{"limit": "limit: 4294967296"}), 4, "from 0 to 4294967295"},
		{"limit as a string", with(map[string]string{"limit": `limit: "3"`}), 4, "must be an integer"},
		{"limit as a float", with(map[string]string{"limit": "limit: 3.0"}), 4, "must be an integer"},
		{"log at its bound", with(map[string]string{"limit": "limit: 65536"}, "algo: log"), 0, ""},
		{"log past its bound", with(map[string]string{"limit": "limit: 65537"}, "algo: log"), 4, "from 0 to 65536"},
		{"unknown algo", with(nil, "algo: gcra"), 6, `algo "gcra": must be one of fixed, sliding, token, log, slices, leaky`},
		{"slices", with(nil, "algo: slices", "slices: 60"), 0, ""},
		{"slices by default", with(nil, "algo: slices"), 0, ""},
		{"one slice", with(nil, "algo: slices", "slices: 1"), 7, "slices: \"1\" must be an integer from 2 to 600"},
		{"slices past the bound", with(nil, "algo: slices", "slices: 601"), 7, "from 2 to 600"},
		{"slices without algo slices", with(nil, "slices: 60"), 6, "slices is for algo: slices"},
		{"leaky with a queue that waits", with(nil, "algo: leaky", "queue: 3", "wait: true"), 0, ""},
		{"leaky with no queue", with(nil, "algo: leaky"), 0, ""},
		{"queue past the bound", with(nil, "algo: leaky", "queue: 65537"), 7, "from 0 to 65536"},
		{"queue without algo leaky", with(nil, "algo: token", "queue: 3"), 7, "queue is for algo: leaky"},
		{"a queue that drains in more than ten years", with(map[string]string{"limit": "limit: 1", "scale": "scale: 315360000000"}, "algo: leaky", "queue: 2"), 7, "queue 2 with limit 1: must drain in at most ten years"},
		{"a plan's queue that drains in more than ten years", with(map[string]string{"limit": "limit: 10", "scale": "scale: 315360000000"}, "algo: leaky", "plans: {from: 'header:X-Plan', limits: {slow: 1}}", "queue: 5"), 8, "queue 5 with limit 1"},
		{"wait without algo leaky", with(nil, "wait: true"), 6, "wait is for algo: leaky"},
		{"wait false with another algo", with(nil, "wait: false"), 0, ""},
		{"wait not a boolean", with(nil, "algo: leaky", "wait: 1"), 7, "wait must be true or false"},
		{"no scale", with(map[string]string{"scale": ""}), 2, "scale is required"},
		{"scale 0", with(map[string]string{"scale": "scale: 0"}), 5, "scale \"0\""},
		{"scale 1 ms", with(map[string]string{"scale": "scale: 1"}), 0, ""},
		{"scale 1ms", with(map[string]string{"scale": "scale: 1ms"}), 0, ""},
		{"scale of a fraction of a ms", with(map[string]string{"scale": "scale: 1500us"}), 5, "whole milliseconds"},
		{"negative scale", with(map[string]string{"scale": "scale: -1s"}), 5, "scale"},
		{"largest scale", with(map[string]string{"scale": "scale: 315360000000"}), 0, ""},
		{"scale past the bound", with(map[string]string{"scale": "scale: 315360000001"}), 5, "315360000000 ms"},
		{"scale past the bound as a duration", with(map[string]string{"scale": "scale: 87601h"}), 5, "scale"},
		{"scale nonsense", with(map[string]string{"scale": "scale: soon"}), 5, `scale "soon"`},
		{"hits 0", with(nil, "hits: 0"), 6, "hits: \"0\" must be an integer from 1"},
		{"hits 1", with(nil, "hits: 1"), 0, ""},
		{"largest hits", with(nil, "hits: 4294967295"), 0, ""},
		{"hits past the bound", with(nil, "hits: 4294967296"), 6, "hits"},
		{"unknown match field", with(nil, "match: {path: /x}"), 6, `match: unknown field "path"`},
		{"relative path prefix", with(nil, "match: {path_prefix: api}"), 6, "must start with /"},
		{"path prefix with a double slash", with(nil, "match: {path_prefix: /api//}"), 6, `path_prefix "/api//" would never match`},
		{"path prefix with an escape", with(nil, "match: {path_prefix: /%61pi/}"), 6, `where it is "/api/"`},
		{"path prefix with dot dot", with(nil, "match: {path_prefix: /a/../b}"), 6, "would never match"},
		{"path prefix with a query", with(nil, "match: {path_prefix: '/a?b'}"), 6, "would never match"},
		{"path prefix with a bad escape", with(nil, "match: {path_prefix: /a%zz}"), 6, "is not a path"},
		{"path prefix in capitals", with(nil, "match: {path_prefix: /API/}"), 0, ""},
		{"missing_key deny", with(nil, "missing_key: deny"), 0, ""},
		{"missing_key skip", with(nil, "missing_key: skip"), 0, ""},
		{"missing_key a header", with(nil, "missing_key: 'key:header:X-Session'"), 0, ""},
		{"missing_key the key itself", with(nil, "missing_key: 'key:ip'"), 6, "is the policy's own key"},
		{"missing_key nonsense", with(nil, "missing_key: allow"), 6, "missing_key must be deny, skip, key:ip or key:header:NAME"},
		{"missing_key a list", with(nil, "missing_key: [deny]"), 6, "missing_key must be"},
		{"missing_key a bad source", with(nil, "missing_key: 'key:cookie'"), 6, `missing_key: key: "cookie" must be ip or header:NAME`},
		{"bad method", with(nil, "match: {methods: ['GE T']}"), 6, "is not a method"},
		{"empty methods", with(nil, "match: {methods: []}"), 6, "non-empty list"},
		{"bad host", with(nil, "match: {host: 'a b'}"), 6, "host name"},
		{"bad trusted proxy", "trusted_proxies: [300.1.1.1]\n" + with(nil), 1, `"300.1.1.1" is not an address`},
		{"trusted proxies not a list", "trusted_proxies: 10.0.0.0/8\n" + with(nil), 1, "must be a list"},
		{"duplicate names", "policies:\n  - {name: a, key: ip, limit: 1, scale: 1s}\n  - {name: a, key: ip, limit: 1, scale: 1s}\n", 3, `"a" is defined twice (first at line 2)`},
		{"plans without from", with(nil, "plans: {limits: {free: 1}}"), 6, "plans.from is required"},
		{"plans from ip", with(nil, "plans: {from: ip, limits: {free: 1}}"), 6, "plans.from must be header:NAME"},
		{"plans without limits", with(nil, "plans: {from: 'header:X-Plan'}"), 6, "plans.limits must map"},
		{"plan limit past the bound", with(nil, "plans: {from: 'header:X-Plan', limits: {free: 4294967296}}"), 6, "plans.limits.free"},
		{"unknown plans field", with(nil, "plans: {from: 'header:X-Plan', limits: {a: 1}, default: 3}"), 6, `unknown field "default"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := policy.Parse("p.yaml", []byte(tc.yaml))
			if tc.msg == "" {
				require.NoError(t, err)
				require.Len(t, f.Policies, 1)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, policy.ErrInvalidFile)
			var fe *policy.FileError
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, tc.line, fe.Line, "%v", err)
			prefix := "p.yaml: "
			if tc.line > 0 {
				prefix = "p.yaml:" + strconv.Itoa(tc.line) + ": "
			}
			assert.True(t, strings.HasPrefix(err.Error(), prefix), "%q starts with %q", err.Error(), prefix)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestParseBoundsThePolicyCount(t *testing.T) {
	var b strings.Builder
	b.WriteString("policies:\n")
	for i := range policy.MaxPolicies + 1 {
		b.WriteString("  - {name: p" + strconv.Itoa(i) + ", key: ip, limit: 1, scale: 1s}\n")
	}
	_, err := policy.Parse("p.yaml", []byte(b.String()))
	require.ErrorIs(t, err, policy.ErrInvalidFile)
	assert.Contains(t, err.Error(), "at most 1000")
}
