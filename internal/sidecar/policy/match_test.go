package policy_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// input is a request as the sidecar sees it: fasthttp's request header is
// the policy.Headers of the real path, and the path is read by CleanPath
// (a path it refuses is left empty: it matches no prefix).
func input(method, host, path, peer string, kv ...string) *policy.Input {
	h := new(fasthttp.RequestHeader)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	in := &policy.Input{Method: []byte(method), Host: []byte(host), Peer: netip.MustParseAddr(peer), Header: h}
	if _, err := policy.CleanPath(&in.Path, []byte(path), nil); err != nil {
		in.Path = policy.Path{}
	}
	return in
}

func names(cs []policy.Check) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Rule.Name)
	}
	return out
}

func mustParse(t testing.TB, s string) *policy.File {
	t.Helper()
	f, err := policy.Parse("p.yaml", []byte(s))
	require.NoError(t, err)
	return f
}

func TestMatch(t *testing.T) {
	f := mustParse(t, example)
	for _, tc := range []struct {
		name string
		in   *policy.Input
		want []string
	}{
		{"login by POST on its host", input("POST", "example.com", "/login", "1.2.3.4"), []string{"login"}},
		{"host compared without case and port", input("POST", "EXAMPLE.com:8443", "/login/x", "1.2.3.4"), []string{"login"}},
		{"another host", input("POST", "example.org", "/login", "1.2.3.4"), nil},
		{"another method", input("GET", "example.com", "/login", "1.2.3.4"), nil},
		{"api without its key header: denied (missing_key: deny)", input("GET", "h", "/api/v1", "1.2.3.4"), []string{"api"}},
		{"api with its key", input("GET", "h", "/api/v1", "1.2.3.4", "X-Api-Key", "k1"), []string{"api"}},
		{"path prefix is a prefix", input("GET", "h", "/apix", "1.2.3.4", "X-Api-Key", "k1"), nil},
		{"every matching policy, in file order", input("GET", "h", "/api/", "1.2.3.4", "X-Api-Key", "k", "X-User", "u"), []string{"api", "pair"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := f.Match(tc.in, nil, nil)
			assert.Equal(t, tc.want, names(cs))
		})
	}
}

func TestKeysAreOpaque(t *testing.T) {
	f := mustParse(t, example)
	hostile := []string{"k&hits=0", "k%26hits%3D0", "k?id=x", "k with spaces", "k\tand\ttabs", strings.Repeat("x", 2048), "k&algo=token&limit=1000000"}
	seen := map[string]bool{}
	for _, v := range hostile {
		cs, _ := f.Match(input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", v), nil, nil)
		require.Len(t, cs, 1)
		assert.Equal(t, v, string(cs[0].Key), "the header's bytes are the key, as they are")
		assert.Equal(t, int64(100), cs[0].Rule.Limit, "nothing in a key changes the rule")
		assert.False(t, seen[string(cs[0].Key)])
		seen[string(cs[0].Key)] = true
	}
}

func TestKeyListsNeverCollide(t *testing.T) {
	f := mustParse(t, "policies:\n  - {name: two, key: ['header:A', 'header:B'], limit: 1, scale: 1s}\n")
	key := func(a, b string) string {
		cs, _ := f.Match(input("GET", "h", "/", "1.2.3.4", "A", a, "B", b), nil, nil)
		require.Len(t, cs, 1)
		return string(cs[0].Key)
	}
	assert.NotEqual(t, key("ab", "c"), key("a", "bc"))
	assert.NotEqual(t, key("a\x01b", "c"), key("a", "\x01bc"))
	cs, _ := f.Match(input("GET", "h", "/", "1.2.3.4", "A", "a"), nil, nil)
	require.Len(t, cs, 1)
	assert.True(t, cs[0].MissingKey, "every part must be present")
	assert.Nil(t, cs[0].Key)
}

func TestClientIP(t *testing.T) {
	f := mustParse(t, example) // trusts 127.0.0.1, ::1 and 10.1.2.3
	for _, tc := range []struct {
		name string
		in   *policy.Input
		want string
	}{
		{"an untrusted peer is the client, whatever it forwards", input("GET", "h", "/", "203.0.113.9", "X-Forwarded-For", "1.1.1.1"), "203.0.113.9"},
		{"a trusted peer's X-Forwarded-For", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"the right-most untrusted hop", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.1.2.3"), "198.51.100.7"},
		{"hops over several header lines", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "6.6.6.6", "X-Forwarded-For", "198.51.100.7, 10.1.2.3"), "198.51.100.7"},
		{"all trusted: the left-most", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "10.1.2.3, 127.0.0.1"), "10.1.2.3"},
		{"garbage stops the walk at the last trusted hop", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "1.1.1.1, nonsense, 10.1.2.3"), "10.1.2.3"},
		{"X-Real-IP without X-Forwarded-For", input("GET", "h", "/", "::1", "X-Real-IP", "2001:db8::1"), "2001:db8::1"},
		{"X-Forwarded-For wins over X-Real-IP", input("GET", "h", "/", "::1", "X-Real-IP", "2001:db8::1", "X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"IPv6 with brackets and port", input("GET", "h", "/", "::1", "X-Forwarded-For", "[2001:db8::2]:443"), "2001:db8::2"},
		{"IPv4 with port", input("GET", "h", "/", "::1", "X-Forwarded-For", "198.51.100.7:5555"), "198.51.100.7"},
		{"IPv4-mapped peer", input("GET", "h", "/", "::ffff:127.0.0.1", "X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"IPv4-mapped forwarded", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "::ffff:198.51.100.7"), "198.51.100.7"},
		{"an empty header", input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", " , "), "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, f.ClientIP(tc.in).String())
		})
	}
	noTrust := mustParse(t, "policies:\n  - {name: p, key: ip, limit: 1, scale: 1s}\n")
	assert.Equal(t, "127.0.0.1", noTrust.ClientIP(input("GET", "h", "/", "127.0.0.1", "X-Forwarded-For", "1.1.1.1", "X-Real-IP", "2.2.2.2")).String(),
		"with no trusted proxies, forwarded headers are ignored")
}

func TestEngineCountsByPolicyAndKey(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 1024 + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	f := mustParse(t, example+`  - name: shadow
    match: {path_prefix: /s}
    key: ip
    limit: 0
    scale: 1s
`)
	f.Lookup("shadow").Shadow = true
	e := &policy.Engine{Limiter: lim, MaxKeyBytes: 1024}
	ctx := context.Background()
	decide := func(in *policy.Input) []policy.Result {
		cs, _ := f.Match(in, nil, nil)
		rs, err := e.Decide(ctx, cs, nil)
		require.NoError(t, err)
		return rs
	}
	api := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "k")
	for i := range 50 {
		rs := decide(api)
		require.Len(t, rs, 1)
		assert.True(t, allowed(rs), "hit %d of 100 (2 each)", 2*(i+1))
	}
	rs := decide(api)
	assert.False(t, allowed(rs), "hits count 2: the 51st check passes 100")
	assert.Equal(t, "api", rs[0].Rule.Name)

	other := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "k2")
	assert.True(t, allowed(decide(other)), "another key, its own counter")

	free := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "plan-user", "X-Plan", "free")
	assert.True(t, allowed(decide(free)))
	rs = decide(free)
	assert.False(t, allowed(rs), "the free plan's limit is 2, hits are 2 each")
	assert.Equal(t, int64(2), rs[0].Request.Limit)
	pro := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "plan-user", "X-Plan", "pro")
	rs = decide(pro)
	assert.True(t, allowed(rs), "a key that changes plan keeps its count")
	assert.Equal(t, int64(6), rs[0].Decision.Count, "2 allowed and 2 denied under free (fixed counts denied hits), 2 now")
	unknown := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "plan-user", "X-Plan", "gold")
	assert.Equal(t, int64(100), decide(unknown)[0].Request.Limit, "an unknown plan gets the policy's limit")

	sh := decide(input("GET", "h", "/s", "1.2.3.4"))
	require.Len(t, sh, 1)
	assert.False(t, sh[0].Decision.Allowed, "a shadow rule is decided")
	assert.True(t, allowed(sh), "but never denies")

	long := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", strings.Repeat("k", 1025))
	cs, _ := f.Match(long, nil, nil)
	_, err := e.Decide(ctx, cs, nil)
	require.ErrorIs(t, err, rl.ErrInvalid, "a key over the bound is refused, never cut")
	assert.Contains(t, err.Error(), "key")
}

func TestEngineCounterIDs(t *testing.T) {
	a := policy.CounterID(nil, "login", []byte("1.2.3.4"))
	b := policy.CounterID(nil, "login\x001", []byte(".2.3.4"))
	assert.Equal(t, "\x00login\x001.2.3.4", string(a))
	assert.Equal(t, "\x00login\x001\x00.2.3.4", string(b), "names hold no NUL, so ids never meet")
	assert.Len(t, policy.CounterID(nil, strings.Repeat("n", policy.MaxRuleNameBytes), nil), policy.IDOverhead)
}

// manyPolicies is a file of n policies on distinct path prefixes; the
// request matches the last two.
func manyPolicies(n int) string {
	var b strings.Builder
	b.WriteString("trusted_proxies: [127.0.0.1]\npolicies:\n")
	for i := range n - 2 {
		b.WriteString("  - {name: p" + strconv.Itoa(i) + ", match: {methods: [GET, POST], path_prefix: /p" + strconv.Itoa(i) + "/, host: example.com}, key: ip, limit: 10, scale: 1m}\n")
	}
	b.WriteString("  - {name: by-ip, match: {path_prefix: /api/}, key: ip, limit: 10, scale: 1m}\n")
	b.WriteString("  - {name: by-key, match: {methods: [GET]}, key: [ip, 'header:X-Api-Key'], limit: 10, scale: 1m, plans: {from: 'header:X-Plan', limits: {pro: 100}}}\n")
	return b.String()
}

func TestMatchAllocatesNothing(t *testing.T) {
	f := mustParse(t, manyPolicies(100))
	in := input("GET", "example.com", "/api/v1/things", "127.0.0.1", "X-Forwarded-For", "198.51.100.7, 127.0.0.1", "X-Api-Key", "key-1", "X-Plan", "pro")
	dst := make([]policy.Check, 0, 8)
	buf := make([]byte, 0, 256)
	var cs []policy.Check
	allocs := testing.AllocsPerRun(100, func() {
		cs, buf = f.Match(in, dst[:0], buf[:0])
	})
	assert.Equal(t, []string{"by-ip", "by-key"}, names(cs))
	assert.Equal(t, "198.51.100.7", string(cs[0].Key))
	assert.Zero(t, allocs)
}

func BenchmarkMatch100Policies(b *testing.B) {
	f := mustParse(b, manyPolicies(100))
	in := input("GET", "example.com", "/api/v1/things", "127.0.0.1", "X-Forwarded-For", "198.51.100.7, 127.0.0.1", "X-Api-Key", "key-1", "X-Plan", "pro")
	dst := make([]policy.Check, 0, 8)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst, buf = f.Match(in, dst[:0], buf[:0])
	}
}

// TestMissingKeyFallbackCountsApart: a request without the key header is
// counted by its address under counters of its own, which a key header
// spelling that address never reaches; a missing key that must be denied
// is denied without counting anything.
func TestMissingKeyFallbackCountsApart(t *testing.T) {
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 1024 + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	f := mustParse(t, "policies:\n"+
		"  - {name: fb, match: {path_prefix: /f/}, key: 'header:K', missing_key: 'key:ip', limit: 1, scale: 1m}\n"+
		"  - {name: deny, match: {path_prefix: /d/}, key: 'header:K', limit: 1, scale: 1m}\n")
	e := &policy.Engine{Limiter: lim}
	decide := func(in *policy.Input) []policy.Result {
		cs, _ := f.Match(in, nil, nil)
		rs, err := e.Decide(context.Background(), cs, nil)
		require.NoError(t, err)
		return rs
	}
	anon := decide(input("GET", "h", "/f/x", "1.2.3.4"))
	require.Len(t, anon, 1)
	assert.True(t, allowed(anon))
	assert.Equal(t, string(policy.FallbackCounterID(nil, "fb", []byte("1.2.3.4"))), anon[0].Request.ID)
	assert.False(t, allowed(decide(input("GET", "h", "/f/x", "1.2.3.4"))), "1 a minute by address")
	assert.True(t, allowed(decide(input("GET", "h", "/f/x", "9.9.9.9", "K", "1.2.3.4"))), "the key 1.2.3.4 is not the address 1.2.3.4")
	assert.NotEqual(t, policy.CounterID(nil, "fb", []byte("1.2.3.4")), policy.FallbackCounterID(nil, "fb", []byte("1.2.3.4")))

	d := decide(input("GET", "h", "/d/x", "1.2.3.4"))
	require.Len(t, d, 1)
	assert.True(t, d[0].MissingKey)
	assert.True(t, d[0].Denies())
	assert.Empty(t, d[0].Request.ID, "nothing counted")
	bs, err := lim.Buckets(context.Background(), string(policy.CounterID(nil, "deny", nil)))
	require.NoError(t, err)
	assert.Empty(t, bs)
}

// allowed reports whether every result allows, as /auth decides: shadow
// rules never deny.
func allowed(rs []policy.Result) bool {
	for i := range rs {
		if rs[i].Denies() {
			return false
		}
	}
	return true
}

// TestKeysTheAppMayReadOtherwiseDeny: a key header sent twice, or holding
// a list, could be counted under one value and used by the application
// under another; a key too long could only be cut into someone else's.
// Each denies, whatever missing_key says, counting nothing.
func TestKeysTheAppMayReadOtherwiseDeny(t *testing.T) {
	f := mustParse(t, `policies:
  - {name: api, match: {path_prefix: /api/}, key: 'header:X-Api-Key', missing_key: 'key:ip', limit: 5, scale: 1m}
  - {name: ua, match: {path_prefix: /ua}, key: 'header:User-Agent', key_list: whole, limit: 5, scale: 1m}
`)
	for _, tc := range []struct {
		name  string
		in    *policy.Input
		fault policy.KeyFault
		key   string
	}{
		{"one key", input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "real"), policy.KeyFine, "real"},
		{"the header twice", input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "fresh", "X-Api-Key", "real"), policy.KeyRepeated, ""},
		{"twice, the first empty: no fallback", input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "", "X-Api-Key", "real"), policy.KeyRepeated, ""},
		{"twice, in other cases", input("GET", "h", "/api/x", "1.2.3.4", "x-api-key", "fresh", "X-API-KEY", "real"), policy.KeyRepeated, ""},
		{"a list", input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "fresh, real"), policy.KeyIsList, ""},
		{"a bare comma", input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", ","), policy.KeyIsList, ""},
		{"key_list: whole counts commas", input("GET", "h", "/ua", "1.2.3.4", "User-Agent", "Mozilla/5.0 (KHTML, like Gecko)"), policy.KeyFine, "Mozilla/5.0 (KHTML, like Gecko)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := f.Match(tc.in, nil, nil)
			require.Len(t, cs, 1)
			assert.Equal(t, tc.fault, cs[0].BadKey)
			assert.Equal(t, tc.key, string(cs[0].Key))
			assert.False(t, cs[0].MissingKey)
			assert.False(t, cs[0].Fallback, "a key sent is never replaced by the fallback")
		})
	}
	in := input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", strings.Repeat("k", 11))
	in.MaxKeyBytes = 10
	cs, _ := f.Match(in, nil, nil)
	require.Len(t, cs, 1)
	assert.Equal(t, policy.KeyTooLong, cs[0].BadKey, "never cut short")
	assert.Nil(t, cs[0].Key)
	in.MaxKeyBytes = 11
	cs, _ = f.Match(in, nil, nil)
	assert.Equal(t, policy.KeyFine, cs[0].BadKey)

	lim := memory.New(memory.Config{})
	defer lim.Close()
	e := policy.Engine{Limiter: lim}
	cs, _ = f.Match(input("GET", "h", "/api/x", "1.2.3.4", "X-Api-Key", "a, b"), nil, nil)
	rs, err := e.Decide(context.Background(), cs, nil)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.True(t, rs[0].Denies())
	assert.True(t, rs[0].KeyRefused())
	assert.Equal(t, "list", rs[0].BadKey.String())

	_, err = policy.Parse("p.yaml", []byte("policies:\n  - {name: a, key: ip, key_list: keep, limit: 1, scale: 1s}\n"))
	assert.ErrorContains(t, err, "key_list must be deny or whole")
}
