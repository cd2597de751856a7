package rls

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadTheCompatibilityDirectory(t *testing.T) {
	c, err := Load("../../../docs/gateways/rls")
	require.NoError(t, err)
	assert.Len(t, c.Files, 8)
	assert.Len(t, c.domains, 8)
	r, _ := lookupView(c, "messaging", []entryView{{"message_type", "marketing"}, {"to_number", "1"}}, nil)
	require.NotNil(t, r)
	assert.Equal(t, "message_type_marketing.to_number", r.Path)
	assert.Equal(t, int64(86_400_000), r.Scale)
	assert.Equal(t, int64(5), r.Rule.Limit)
	assert.Equal(t, "rls:messaging.message_type_marketing.to_number", r.Name)
}

func TestLookupAsEnvoyproxyRatelimit(t *testing.T) {
	c, err := Load("../../../docs/gateways/rls")
	require.NoError(t, err)
	for _, tc := range []struct {
		domain  string
		entries []entryView
		want    string // the rule's path, "" for none
	}{
		{"mongo_cps", []entryView{{"database", "users"}}, "database_users"},
		{"mongo_cps", []entryView{{"database", "nope"}}, ""},
		{"edge_proxy_per_ip", []entryView{{"remote_address", "50.0.0.5"}}, "remote_address_50.0.0.5"},
		{"edge_proxy_per_ip", []entryView{{"remote_address", "1.1.1.1"}}, "remote_address"},
		{"edge_proxy_per_ip", []entryView{{"remote_address", "1.1.1.1"}, {"x", "y"}}, ""},
		{"example4", []entryView{{"key", "value"}, {"subkey", "subvalue"}}, ""},
		{"example4", []entryView{{"deep", "value"}}, ""},
		{"example4", []entryView{{"deep", "value"}, {"subkey", "s"}}, "deep_value.subkey"},
		{"wildcard", []entryView{{"path", "/api/x/y"}}, "path_/api/*"},
		{"wildcard", []entryView{{"path", "/apix"}}, "path"},
		{"messaging", []entryView{{"to_number", "1"}, {"message_type", "marketing"}}, ""},
		{"nope", []entryView{{"a", "b"}}, ""},
	} {
		r, _ := lookupView(c, tc.domain, tc.entries, nil)
		got := ""
		if r != nil {
			got = r.Path
		}
		assert.Equal(t, tc.want, got, "%s %v", tc.domain, tc.entries)
	}
}

func TestConfigErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"empty", "", 0, "is empty"},
		{"no domain", "descriptors: []\n", 1, "domain: must not be empty"},
		{"unknown top field", "domain: d\nrules: []\n", 2, `unknown field "rules"`},
		{"empty key", "domain: d\ndescriptors:\n  - value: v\n", 3, "key must not be empty"},
		{"unknown descriptor field", "domain: d\ndescriptors:\n  - key: k\n    limit: 3\n", 4, `unknown field "limit"`},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", 4, `unit "fortnight"`},
		{"unit with unlimited", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, unlimited: true}\n", 4, "unit must not be given with unlimited"},
		{"negative requests_per_unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, "requests_per_unit must be an integer"},
		{"requests_per_unit past the bound", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", 4, "requests_per_unit must be an integer"},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - {key: k, value: v}\n  - {key: k, value: v}\n", 4, `duplicate descriptor "k_v"`},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}\n", 4, "cannot replace itself"},
		{"replaces without a name", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n", 4, "replaces: an entry needs a name"},
		{"misplaced field", "domain: d\ndescriptors:\n  - key: k\n    unit: second\n", 4, `field "unit" does not belong here`},
		{"share_threshold without a wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: a*b\n    share_threshold: true\n", 5, `share_threshold needs a value ending in '*'`},
		{"a value that is a list", "domain: d\ndescriptors:\n  - key: k\n    value: [a]\n", 4, "value must be a string"},
		{"a fraction", "domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n", 4, "1.5: a number with a fraction"},
		{"requests_per_unit quoted", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: \"5\"}\n", 4, "requests_per_unit must be an integer"},
		{"a quoted boolean", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: \"true\"\n", 4, "shadow_mode must be true or false"},
		{"a field given twice", "domain: d\ndescriptors:\n  - key: k\n    key: j\n", 4, `field "key" given twice`},
		{"shadow mode not a bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n", 4, "shadow_mode must be true or false"},
		{"not yaml", "domain: [\n", 0, "not valid YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml))
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidConfig))
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.line, ce.Line, "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "c.yaml"), err.Error())
		})
	}
}

func TestDuplicateDomainsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b.yml"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("domain: same\ndescriptors: []\n"), 0o600))
	}
	_, err := Load(dir)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), `domain "same" is defined twice`)
	_, err = Load(t.TempDir())
	assert.ErrorContains(t, err, "holds no *.yaml or *.yml file")
}

// TestDirectoryEntriesReadAndSkipped: of a directory, the *.yaml and *.yml
// files are read, in name order, symlinks to files included (a Kubernetes
// ConfigMap's files); dot files, subdirectories (a symlink to one too) and
// other names are not, and each is listed, but a ConfigMap volume's own
// "..data" entries.
func TestDirectoryEntriesReadAndSkipped(t *testing.T) {
	dir := t.TempDir()
	write := func(name, domain string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("domain: "+domain+"\ndescriptors: []\n"), 0o600))
	}
	write("..2026_01_01/a.yaml", "a")
	require.NoError(t, os.Symlink("..2026_01_01", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "a.yaml"), filepath.Join(dir, "a.yaml")))
	write("b.yml", "b")
	write(".c.yaml", "c")
	write("d.yaml~", "d")
	write("README", "e")
	write("team/f.yaml", "f")
	require.NoError(t, os.Symlink("team", filepath.Join(dir, "g.yaml")))
	c, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.Domains())
	assert.Equal(t, []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yml")}, c.Files)
	assert.Equal(t, []string{
		filepath.Join(dir, ".c.yaml") + ": a dot file",
		filepath.Join(dir, "README") + ": not *.yaml or *.yml",
		filepath.Join(dir, "d.yaml~") + ": not *.yaml or *.yml",
		filepath.Join(dir, "g.yaml") + ": a directory: subdirectories are not read",
		filepath.Join(dir, "team") + ": a directory: subdirectories are not read",
	}, c.Skipped)
}

func TestUnits(t *testing.T) {
	for unit, ms := range map[string]int64{"second": 1000, "MINUTE": 60_000, "hour": 3_600_000, "day": 86_400_000,
		"week": 604_800_000, "month": 2_592_000_000, "year": 31_536_000_000} {
		c, err := Parse("u.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: "+unit+", requests_per_unit: 7}\n"))
		require.NoError(t, err, unit)
		r, _ := lookupView(c, "d", []entryView{{"k", "v"}}, nil)
		require.NotNil(t, r)
		assert.Equal(t, ms, r.Scale, unit)
		assert.NotEqual(t, rlspb.RateLimitResponse_RateLimit_UNKNOWN, r.Limit.Unit)
	}
}

func FuzzLoad(f *testing.F) {
	for _, name := range []string{"messaging.yaml", "example7.yaml", "wildcard.yaml", "internal.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../../docs/gateways/rls", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "to_number", "1")
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - &a {key: files, value: f/*, share_threshold: yes, quota_mode: on, rate_limit: {unit: minute, requests_per_unit: 0x10}}\n  - {<<: *a, value: g*}\n  - key: n\n    descriptors:\n"), "files", "f/x")
	f.Fuzz(func(t *testing.T, data []byte, key, value string) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("an error that is not a ConfigError: %v", err)
			}
			return
		}
		for domain := range c.domains {
			r, _ := lookupView(c, domain, []entryView{{key, value}, {value, key}}, nil)
			if r != nil && !r.Unlimited && (r.Scale <= 0 || r.Rule.Limit < 0) {
				t.Fatalf("rule %+v out of bounds", r)
			}
		}
	})
}

// TestTheDocumentedFormatLoads keeps docs/envoy.md's example of the
// configuration format loadable, and its wildcard shared.
func TestTheDocumentedFormatLoads(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/envoy.md")
	require.NoError(t, err)
	s := string(doc)
	i := strings.Index(s, "## The configuration format")
	require.GreaterOrEqual(t, i, 0)
	j := strings.Index(s[i:], "```yaml\n")
	require.GreaterOrEqual(t, j, 0)
	block := s[i+j+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	c, err := Parse("envoy.md", []byte(block))
	require.NoError(t, err)
	r, _ := lookupView(c, "files", []entryView{{"path", "/downloads/a.zip"}}, nil)
	require.NotNil(t, r)
	assert.Equal(t, "/downloads/*", r.sharedValue(0, "path", "/downloads/a.zip"))
}

// TestAliasesCannotBlowUpTheTree: a few lines of anchors and aliases
// that would expand to 2^30 descriptors, or merge 2^30 times, are refused
// quickly instead.
func TestAliasesCannotBlowUpTheTree(t *testing.T) {
	desc := "domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: k}]\n"
	merge := "domain: d\ndescriptors:\n  - key: m0\n    rate_limit: &m0 {unit: second, requests_per_unit: 1}\n"
	for i := 1; i <= 30; i++ {
		desc += fmt.Sprintf("  - key: l%d\n    descriptors: &l%d [{key: a, descriptors: *l%d}, {key: b, descriptors: *l%d}]\n", i, i, i-1, i-1)
		merge += fmt.Sprintf("  - key: m%d\n    rate_limit: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	for name, src := range map[string]string{"descriptors": desc, "merge keys": merge} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("bomb.yaml", []byte(src))
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), "expands to more than")
		})
	}
}

func TestRemovedNamesTheRulesAReloadDrops(t *testing.T) {
	parse := func(src string) *Config {
		t.Helper()
		c, err := Parse("d.yaml", []byte(src))
		require.NoError(t, err)
		return c
	}
	old := parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n  - key: b\n    value: x\n    rate_limit: {unit: day, requests_per_unit: 1}\n")
	assert.Nil(t, Removed(nil, old), "nothing before: nothing removed")
	assert.Empty(t, Removed(old, old))
	assert.Equal(t, []string{"d.b_x"}, Removed(old, parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 5}\n")))
}

func TestConfigFilesAreBounded(t *testing.T) {
	big := "domain: d\ndescriptors:\n" + strings.Repeat("# padding\n", MaxFileBytes/10)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big), 0o600))
	_, err := Load(dir)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.EqualError(t, err, fmt.Sprintf("%s: is %d bytes; at most %d are read", filepath.Join(dir, "big.yaml"), len(big), MaxFileBytes))

	// Files each within the bound, more than MaxConfigBytes together.
	dir = t.TempDir()
	one := "domain: d%d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n" + strings.Repeat("# padding\n", (MaxFileBytes-200)/10)
	for i := range MaxConfigBytes/MaxFileBytes + 1 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.yaml", i)), []byte(fmt.Sprintf(one, i)), 0o600))
	}
	_, err = Load(dir)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.EqualError(t, err, fmt.Sprintf("%s: its files hold more than %d bytes together", dir, MaxConfigBytes))
}
