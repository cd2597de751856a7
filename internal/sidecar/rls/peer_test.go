package rls

// The configuration files of envoyproxy/ratelimit itself, read from its
// module (never copied into this repository): every one it loads loads
// here, every one it refuses is refused here, and request sequences on
// them are answered as it answers them. The expected answers come from
// its loader (src/config/config_impl.go), its cache keys
// (src/limiter/cache_key.go), its service (src/service/ratelimit.go) and
// its own tests (test/config, test/service, test/integration).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// The peer: the version measured against in docs/envoy.md.
const (
	peerModule  = "github.com/envoyproxy/ratelimit"
	peerVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// peerDir is the peer module's directory: in the Go module cache, or
// downloaded into it with `go mod download`. Without either it skips, but
// fails under CI=true.
func peerDir(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		peerMissing(t, "no go command on PATH to find "+peerModule)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "env", "GOMODCACHE").Output(); err == nil {
		dir := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(peerModule)+"@"+peerVersion)
		if fi, err := os.Stat(filepath.Join(dir, "test", "config")); err == nil && fi.IsDir() {
			return dir
		}
	}
	cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", peerModule+"@"+peerVersion)
	cmd.Dir = t.TempDir() // outside any module
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); err == nil {
		err = jerr
	}
	if err != nil || mod.Dir == "" {
		peerMissing(t, fmt.Sprintf("%s@%s is not in the module cache and go mod download failed: %v %s", peerModule, peerVersion, err, mod.Error))
	}
	return mod.Dir
}

func peerMissing(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: tests must not skip)", msg)
	}
	t.Skip(msg)
}

// peerFixtures are test/config's files, each loaded alone, with the
// peer's verdict: "" when it loads them, else (a part of) our message for
// what it refuses them for.
var peerFixtures = map[string]string{
	"bad_limit_unit.yaml":      `unit "foo" must be one of`,
	"bad_yaml.yaml":            "not valid YAML",
	"basic_config.yaml":        "",
	"duplicate_domain.yaml":    "", // descriptors: null
	"duplicate_key.yaml":       `duplicate descriptor "key1_value1"`,
	"empty_domain.yaml":        "domain: must not be empty",
	"empty_key.yaml":           "key must not be empty",
	"merge_domain_key1.yaml":   "",
	"merge_domain_key2.yaml":   "",
	"misspelled_key.yaml":      `unknown field "ratelimit"`,
	"misspelled_key2.yaml":     `unknown field "requestsperunit"`,
	"non_map_list.yaml":        "a descriptor must be a mapping",
	"non_string_key.yaml":      "0.25: a number with a fraction",
	"replaces_empty.yaml":      "replaces: an entry needs a name",
	"replaces_self.yaml":       "cannot replace itself",
	"shadowmode_config.yaml":   "",
	"share_threshold.yaml":     "",
	"unlimited_with_unit.yaml": "unit must not be given with unlimited",
	"wildcard.yaml":            "",
}

func TestPeerFixturesLoadAsThePeerLoadsThem(t *testing.T) {
	dir := peerDir(t)
	fixtures := filepath.Join(dir, "test", "config")
	names, err := filepath.Glob(filepath.Join(fixtures, "*.yaml"))
	require.NoError(t, err)
	var got []string
	for _, n := range names {
		got = append(got, filepath.Base(n))
	}
	want := make([]string, 0, len(peerFixtures))
	for n := range peerFixtures {
		want = append(want, n)
	}
	slices.Sort(want)
	require.Equal(t, want, got, "every fixture of the peer has its verdict here")

	for name, msg := range peerFixtures {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(fixtures, name)
			c, err := Load(path)
			if msg == "" {
				require.NoError(t, err, "the peer loads %s", name)
				assert.NotEmpty(t, c.Domains())
				return
			}
			require.Error(t, err, "the peer refuses %s", name)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), msg)
			assert.True(t, strings.HasPrefix(err.Error(), path+":"), "names the file: %v", err)
		})
	}

	// The other configurations of the peer's repository: its example and
	// its integration tests' runtime directory, each loaded whole.
	for _, tc := range []struct {
		path    string
		domains []string
	}{
		{"examples/ratelimit/config", []string{"mongo_cps", "rl"}},
		{"test/integration/runtime/current/ratelimit/config", []string{"another", "basic", "share-threshold-test"}},
		{"test/integration/runtime/current/ratelimit/reload.yaml", []string{"reload"}},
	} {
		c, err := Load(filepath.Join(dir, filepath.FromSlash(tc.path)))
		require.NoError(t, err, tc.path)
		assert.Equal(t, tc.domains, c.Domains(), tc.path)
	}
}

// TestPeerDomainMerge: one domain in two files is refused, as the peer
// refuses it, unless merging is on (its MERGE_DOMAIN_CONFIG=true); a
// descriptor given twice is refused even then.
func TestPeerDomainMerge(t *testing.T) {
	fixtures := filepath.Join(peerDir(t), "test", "config")
	dirOf := func(files ...string) string {
		d := t.TempDir()
		for i, f := range files {
			b, err := os.ReadFile(filepath.Join(fixtures, f))
			require.NoError(t, err)
			// Numbered, so that the directory reads them in this order.
			require.NoError(t, os.WriteFile(filepath.Join(d, fmt.Sprintf("%d-%s", i, f)), b, 0o600))
		}
		return d
	}
	merge := LoadOptions{MergeDomains: true}

	two := dirOf("merge_domain_key1.yaml", "merge_domain_key2.yaml")
	_, err := Load(two)
	require.ErrorIs(t, err, ErrDuplicateDomain)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), filepath.Join(two, "1-merge_domain_key2.yaml")+":2: "+`domain "test-domain" is defined twice (first in `+filepath.Join(two, "0-merge_domain_key1.yaml"))
	c, err := merge.Load(two)
	require.NoError(t, err)
	assert.Equal(t, []string{"test-domain"}, c.Domains())
	for _, tc := range []struct {
		entries []entryView
		limit   uint32
	}{
		{[]entryView{{"key1", "value1"}}, 10},
		{[]entryView{{"key2", "value2"}}, 20},
	} {
		r, _ := lookupView(c, "test-domain", tc.entries, nil)
		require.NotNil(t, r, "%v", tc.entries)
		assert.Equal(t, tc.limit, r.Limit.RequestsPerUnit)
	}

	_, err = merge.Load(dirOf("merge_domain_key1.yaml", "merge_domain_key1.yaml"))
	assert.ErrorContains(t, err, `duplicate descriptor "key1_value1" in domain "test-domain"`)

	// basic_config.yaml and duplicate_domain.yaml (null descriptors): the
	// peer's TestDuplicateDomain refuses them; merged, they load.
	both := dirOf("basic_config.yaml", "duplicate_domain.yaml")
	_, err = Load(both)
	assert.ErrorIs(t, err, ErrDuplicateDomain)
	c, err = merge.Load(both)
	require.NoError(t, err)
	assert.Len(t, c.Rules(), 10)
}

// TestPeerLookups are the peer's TestBasicConfig, TestShadowModeConfig,
// TestWildcardConfig and TestShareThreshold lookups: the limit a
// descriptor finds, or none.
func TestPeerLookups(t *testing.T) {
	fixtures := filepath.Join(peerDir(t), "test", "config")
	for _, tc := range []struct {
		file    string
		entries string // k=v,k=v
		want    string // "RPU/UNIT" and flags, or "" for none
	}{
		{"basic_config.yaml", "key1=something", ""},
		{"basic_config.yaml", "key1=value1", ""},
		{"basic_config.yaml", "key2=value2,subkey=subvalue", ""},
		{"basic_config.yaml", "key5=value5,subkey5=subvalue", ""},
		{"basic_config.yaml", "key1=value1,subkey1=something", "5/SECOND"},
		{"basic_config.yaml", "key1=value1,subkey1=subvalue1", "10/SECOND"},
		{"basic_config.yaml", "key2=something", "20/MINUTE"},
		{"basic_config.yaml", "key2=value2", "30/MINUTE"},
		{"basic_config.yaml", "key2=value3", ""},
		{"basic_config.yaml", "key3=foo", "1/HOUR"},
		{"basic_config.yaml", "key4=foo", "1/DAY name=key4_rate_limit"},
		{"basic_config.yaml", "key5=value5,subkey5=subvalue5", "25/DAY"},
		{"basic_config.yaml", "key6=foo", "unlimited"},
		{"basic_config.yaml", "key7=unspecified", "70/MINUTE"},
		{"shadowmode_config.yaml", "key1=value1,subkey1=something", "5/SECOND"},
		{"shadowmode_config.yaml", "key1=value1,subkey1=subvalue1", "10/SECOND shadow"},
		{"shadowmode_config.yaml", "key2=something", "20/MINUTE shadow"},
		{"shadowmode_config.yaml", "key2=value2", "30/MINUTE"},
		{"wildcard.yaml", "noVal=foo1", "20/MINUTE"},
		{"wildcard.yaml", "wild=foo1", "20/MINUTE"},
		{"wildcard.yaml", "wild=foo", "20/MINUTE"},
		{"wildcard.yaml", "wild=bar", ""},
		{"wildcard.yaml", "nestedWild=val1,wild=goo2", "20/MINUTE"},
		{"wildcard.yaml", "noWild=foo1", ""},
		{"wildcard.yaml", "midWild=barab", ""},
		{"wildcard.yaml", "midWild=bar1b", ""},
		{"wildcard.yaml", "midWild=bar*b", "20/MINUTE"}, // a '*' inside a value is the character itself
		{"share_threshold.yaml", "files=files/a.pdf", "100/MINUTE share=files_files/*"},
		{"share_threshold.yaml", "nested=parent,files=nested/file1.txt", "200/MINUTE share=,files_nested/*"},
		{"share_threshold.yaml", "files=top/file1.txt,files=nested/file1.txt", "300/MINUTE share=files_top/*,files_nested/*"},
		{"share_threshold.yaml", "route=api/v1,method=GET", "60/MINUTE share=route_api/*,"},
		{"share_threshold.yaml", "service=svc/user,endpoint=get", "80/MINUTE share=service_svc/*,"},
		{"share_threshold.yaml", "path=path/foo,file=file/doc1,type=pdf", "120/MINUTE share=path_path/*,,"},
		{"share_threshold.yaml", "user=user/alice,resource=res/file1,action=read", "150/MINUTE share=user_user/*,resource_res/*,"},
		{"share_threshold.yaml", "file=test1", "50/MINUTE"},
		{"share_threshold.yaml", "file=test23", "100/MINUTE share=file_test*"},
	} {
		t.Run(tc.file+"/"+tc.entries, func(t *testing.T) {
			c, err := Load(filepath.Join(fixtures, tc.file))
			require.NoError(t, err)
			r, _ := lookupView(c, "test-domain", parseEntries(tc.entries), nil)
			assert.Equal(t, tc.want, describeRule(r))
		})
	}
}

func parseEntries(s string) []entryView {
	var es []entryView
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		es = append(es, entryView{k, v})
	}
	return es
}

func describeRule(r *Rule) string {
	if r == nil {
		return ""
	}
	if r.Unlimited {
		return "unlimited"
	}
	s := fmt.Sprintf("%d/%s", r.Limit.RequestsPerUnit, r.Limit.Unit)
	if r.LimitName != "" {
		s += " name=" + r.LimitName
	}
	if r.Shadow {
		s += " shadow"
	}
	if r.Quota {
		s += " quota"
	}
	if r.shared != nil {
		s += " share=" + strings.Join(r.shared, ",")
	}
	return s
}

// peerStep is one call and the answer the peer gives: overall is OK or
// OVER_LIMIT; each status is "CODE" for a descriptor without a limit,
// "OK unlimited", or "CODE RPU/UNIT REMAINING", with " noreset" when it
// carries no duration_until_reset (quota mode).
type peerStep struct {
	desc    []string // each descriptor as k=v,k=v
	hits    uint32
	overall string
	status  []string
}

// TestPeerRequestSequences sends sequences of calls to configurations of
// the peer and checks each answer against the peer's.
func TestPeerRequestSequences(t *testing.T) {
	dir := peerDir(t)
	fixture := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	runtime := fixture("test/integration/runtime/current/ratelimit/config")
	var noShare []peerStep // ten values of files_no_share/*: ten counters
	for i := range 10 {
		noShare = append(noShare, peerStep{desc: []string{fmt.Sprintf("files_no_share=files_no_share/%d", i)}, overall: "OK", status: []string{"OK 10/HOUR 9"}})
	}
	for _, tc := range []struct {
		name   string
		config string // a file or a directory of the peer, or YAML
		domain string
		steps  []peerStep
	}{
		{
			// The peer's integration test TestShareThreshold: ten hits on
			// files/a.pdf exhaust files/*, so files/b.csv is over.
			name: "share_threshold shares one counter", config: runtime, domain: "share-threshold-test",
			steps: slices.Concat(repeatStep(peerStep{desc: []string{"files=files/a.pdf"}, overall: "OK"}, 10, "OK 10/HOUR %d"), []peerStep{
				{desc: []string{"files=files/b.csv"}, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 10/HOUR 0"}},
				{desc: []string{"files=files/"}, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 10/HOUR 0"}},
				{desc: []string{"files=files/*"}, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 10/HOUR 0"}}, // the pattern itself: the same counter
				{desc: []string{"files=file"}, overall: "OK", status: []string{"OK"}},
			}),
		},
		{
			name: "without share_threshold each value has its own counter", config: runtime, domain: "share-threshold-test",
			steps: noShare,
		},
		{
			name: "share_threshold at nested levels", config: fixture("test/config/share_threshold.yaml"), domain: "test-domain",
			steps: []peerStep{
				// An explicit value keeps its own counter beside the shared wildcard.
				{desc: []string{"file=test1"}, overall: "OK", status: []string{"OK 50/MINUTE 49"}},
				{desc: []string{"file=test2"}, overall: "OK", status: []string{"OK 100/MINUTE 99"}},
				{desc: []string{"file=test23"}, overall: "OK", status: []string{"OK 100/MINUTE 98"}},
				{desc: []string{"file=test1"}, overall: "OK", status: []string{"OK 50/MINUTE 48"}},
				// Both levels shared: one counter for all four values.
				{desc: []string{"files=top/a,files=nested/x"}, overall: "OK", status: []string{"OK 300/MINUTE 299"}},
				{desc: []string{"files=top/b,files=nested/y"}, overall: "OK", status: []string{"OK 300/MINUTE 298"}},
				// Only the first level shared: file/* counts per value.
				{desc: []string{"path=path/a,file=file/1,type=pdf"}, overall: "OK", status: []string{"OK 120/MINUTE 119"}},
				{desc: []string{"path=path/b,file=file/1,type=pdf"}, overall: "OK", status: []string{"OK 120/MINUTE 118"}},
				{desc: []string{"path=path/a,file=file/2,type=pdf"}, overall: "OK", status: []string{"OK 120/MINUTE 119"}},
				{desc: []string{"path=path/a,file=file/1,type=doc"}, overall: "OK", status: []string{"OK 120/MINUTE 119"}},
				// The shared wildcard's deeper level, matched by key only, counts per value.
				{desc: []string{"route=api/v1,method=GET", "route=api/v2,method=GET"}, overall: "OK", status: []string{"OK 60/MINUTE 59", "OK 60/MINUTE 58"}},
				{desc: []string{"route=api/v1,method=PUT"}, overall: "OK", status: []string{"OK 60/MINUTE 59"}},
			},
		},
		{
			// Only a trailing '*' is a wildcard, and without share_threshold
			// every value it matches counts on its own.
			name: "trailing-only wildcards", config: fixture("test/config/wildcard.yaml"), domain: "test-domain",
			steps: []peerStep{
				{desc: []string{"wild=foo1", "wild=foo2", "wild=foo1"}, hits: 10, overall: "OK", status: []string{"OK 20/MINUTE 10", "OK 20/MINUTE 10", "OK 20/MINUTE 0"}},
				{desc: []string{"wild=foo1"}, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 20/MINUTE 0"}},
				{desc: []string{"midWild=bar1b", "midWild=barab", "wild=bar", "noWild=foo1"}, overall: "OK", status: []string{"OK", "OK", "OK", "OK"}},
				{desc: []string{"midWild=bar*b"}, hits: 21, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 20/MINUTE 0"}},
				{desc: []string{"nestedWild=val1,wild=goo"}, overall: "OK", status: []string{"OK 20/MINUTE 19"}},
				{desc: []string{"nestedWild=val1,wild=go"}, overall: "OK", status: []string{"OK"}},
			},
		},
		{
			// The peer's TestServicePerDescriptorQuotaMode and
			// TestServiceQuotaModeOnly: over a quota_mode limit the status
			// is OK, with the limit, nothing remaining and no reset; a
			// shadow_mode limit wins over quota_mode.
			name: "quota_mode", domain: "quota-domain", config: `domain: quota-domain
descriptors:
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: both
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`,
			steps: []peerStep{
				{desc: []string{"quota=a", "both=a"}, overall: "OK", status: []string{"OK 1/MINUTE 0", "OK 1/MINUTE 0"}},
				{desc: []string{"quota=a", "both=a"}, overall: "OK", status: []string{"OK 1/MINUTE 0 noreset", "OK 1/MINUTE 0"}},
				{desc: []string{"regular=a", "quota=a"}, hits: 2, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 1/MINUTE 0", "OK 1/MINUTE 0 noreset"}},
			},
		},
		{
			// Null fields and YAML 1.1's scalars, as the peer's parser reads
			// them.
			name: "YAML 1.1", domain: "y", config: `domain: y
descriptors:
  - key: octal
    value: ~
    shadow_mode: no
    rate_limit: {unit: second, requests_per_unit: 010, name: }
  - key: absent
    rate_limit: {unit: second}
    descriptors:
  - key: on
    value: yes
    shadow_mode: on
    rate_limit: {unit: second, requests_per_unit: 1_0, replaces: }
  - &base
    key: base
    rate_limit: {unit: hour, requests_per_unit: 0x3}
  - <<: *base
    key: merged
`,
			steps: []peerStep{
				{desc: []string{"octal=x", "absent=x", "on=yes", "merged=x"}, overall: "OVER_LIMIT",
					status: []string{"OK 8/SECOND 7", "OVER_LIMIT 0/SECOND 0", "OK 10/SECOND 9", "OK 3/HOUR 2"}},
				{desc: []string{"on=yes"}, hits: 20, overall: "OK", status: []string{"OK 10/SECOND 0"}}, // shadow_mode: on
			},
		},
		{
			name: "unlimited and a value without a limit", config: fixture("test/config/basic_config.yaml"), domain: "test-domain",
			steps: []peerStep{
				{desc: []string{"key6=a", "key2=value3", "key2=value2", "key2=other"}, hits: 20, overall: "OK",
					status: []string{"OK unlimited", "OK", "OK 30/MINUTE 10", "OK 20/MINUTE 0"}},
				{desc: []string{"key2=other"}, overall: "OVER_LIMIT", status: []string{"OVER_LIMIT 20/MINUTE 0"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *Config
			var err error
			if strings.Contains(tc.config, "\n") {
				c, err = Parse(tc.name+".yaml", []byte(tc.config))
			} else {
				c, err = Load(tc.config)
			}
			require.NoError(t, err)
			clock := limitertest.NewClock(limitertest.T0)
			lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
			t.Cleanup(func() { lim.Close() })
			s := New(Options{Limiter: lim, Config: c})
			for i, st := range tc.steps {
				req := &rlspb.RateLimitRequest{Domain: tc.domain, HitsAddend: st.hits}
				for _, d := range st.desc {
					req.Descriptors = append(req.Descriptors, peerDescriptor(d))
				}
				resp, err := s.ShouldRateLimit(context.Background(), req)
				require.NoError(t, err, "step %d", i)
				var got []string
				for _, ds := range resp.Statuses {
					got = append(got, describeStatus(ds))
				}
				assert.Equal(t, st.overall, resp.OverallCode.String(), "step %d: %v", i, st.desc)
				assert.Equal(t, st.status, got, "step %d: %v", i, st.desc)
			}
		})
	}
}

// repeatStep is n copies of st, the i-th with the status format filled
// with the limit remaining after i+1 hits of a limit of n.
func repeatStep(st peerStep, n int, format string) []peerStep {
	out := make([]peerStep, n)
	for i := range out {
		out[i] = st
		out[i].status = []string{fmt.Sprintf(format, n-1-i)}
	}
	return out
}

func peerDescriptor(s string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, e := range parseEntries(s) {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e.key, Value: e.value})
	}
	return d
}

func describeStatus(ds *rlspb.RateLimitResponse_DescriptorStatus) string {
	switch {
	case ds.CurrentLimit == nil && ds.LimitRemaining == math.MaxUint32:
		return ds.Code.String() + " unlimited"
	case ds.CurrentLimit == nil:
		return ds.Code.String()
	}
	s := fmt.Sprintf("%s %d/%s %d", ds.Code, ds.CurrentLimit.RequestsPerUnit, ds.CurrentLimit.Unit, ds.LimitRemaining)
	if ds.DurationUntilReset == nil {
		s += " noreset"
	}
	return s
}

// TestPeerScalarsAreRefusedAsThePeerRefusesThem: what the peer's parser
// refuses in a field is refused here; what it reads, is read the same.
func TestPeerScalarsAreRefusedAsThePeerRefusesThem(t *testing.T) {
	const head = "domain: d\ndescriptors:\n  - key: k\n"
	for _, tc := range []struct {
		name, yaml string
		loads      bool
	}{
		{"a value that is a number", head + "    value: 12\n", true},
		{"a value that is a boolean", head + "    value: true\n", true},
		{"a value that is a date", head + "    value: 2001-01-01\n", true},
		{"a value with a fraction", head + "    value: 1.5\n", false},
		{"a value past 64 bits", head + "    value: 99999999999999999999\n", false},
		{"a value that is a mapping", head + "    value: {key: a}\n", false},
		{"an integer boolean", head + "    shadow_mode: 1\n", false},
		{"a null boolean", head + "    shadow_mode:\n", true},
		{"a null rate_limit", head + "    rate_limit:\n", true},
		{"an empty rate_limit", head + "    rate_limit: {}\n", false},
		{"requests_per_unit with an exponent", head + "    rate_limit: {unit: second, requests_per_unit: 1e3}\n", false},
		{"requests_per_unit negative", head + "    rate_limit: {unit: second, requests_per_unit: -1}\n", false},
		{"requests_per_unit past 32 bits", head + "    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", false},
		{"requests_per_unit with unlimited", head + "    rate_limit: {unlimited: true, requests_per_unit: 5}\n", true},
		{"an unknown unit with unlimited", head + "    rate_limit: {unlimited: true, unit: foo}\n", true},
		{"unit unknown", head + "    rate_limit: {unit: unknown, requests_per_unit: 1}\n", false},
		{"unit a number", head + "    rate_limit: {unit: 1, requests_per_unit: 1}\n", false},
		{"share_threshold on a key ending in *", "domain: d\ndescriptors:\n  - key: k*\n    share_threshold: true\n", true},
		{"share_threshold: false without a wildcard", head + "    share_threshold: false\n", true},
		{"replaces not a list", head + "    rate_limit: {unit: second, requests_per_unit: 1, replaces: abc}\n", false},
		{"descriptors a mapping", "domain: d\ndescriptors: {key: k}\n", false},
		{"a null descriptor", "domain: d\ndescriptors:\n  -\n", false},
		{"a list at the top", "- domain: d\n", false},
		{"a domain that is a number", "domain: 5\n", true},
		{"a domain that is a list", "domain: [a]\n", false},
		{"metadata", head + "    metadata: {a: b}\n", false},
		{"a tab", "domain: d\ndescriptors:\n\t- key: k\n", false},
		{"a second document is not read", "domain: d\n---\nfoo: 1\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.yaml))
			if tc.loads {
				assert.NoError(t, err)
			} else {
				assert.True(t, errors.Is(err, ErrInvalidConfig), "%v", err)
			}
		})
	}
}
