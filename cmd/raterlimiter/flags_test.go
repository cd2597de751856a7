package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

// table is a fresh flag table, its values holding their defaults.
func table() []flagDef {
	var c config
	return c.flagTable()
}

// envOf is a lookup of the variables kv, name then value.
func envOf(kv ...string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1], true
			}
		}
		return "", false
	}
}

func TestFlagTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range table() {
		assert.False(t, seen[d.name], "-%s is declared twice", d.name)
		seen[d.name] = true
		assert.Regexp(t, `^[a-z][a-z0-9-]*[a-z0-9]$`, d.name)
		assert.NotEmpty(t, d.group.title, "-%s has no group", d.name)
		_, _, use := d.shown()
		assert.LessOrEqual(t, len(use), 100, "-%s's usage line: %q", d.name, use)
		assert.NotRegexp(t, `\d(\.\d+)?x\b|times the`, use, "-%s's usage line is no benchmark", d.name)
		if d.group.commands {
			assert.Empty(t, d.env(), "-%s is set on the command line only", d.name)
		} else {
			assert.Equal(t, "RATERLIMITER_"+strings.ToUpper(strings.ReplaceAll(d.name, "-", "_")), d.env())
		}
		if d.off != "" {
			assert.NotEqual(t, "", d.value.arg(), "-%s: only a number can be -1", d.name)
		}
	}
	for _, g := range flagGroups(table()) {
		assert.LessOrEqual(t, len(g.note), 100, "%s's note", g.title)
	}
	assert.Equal(t, "Commands", flagGroups(table())[len(flagGroups(table()))-1].title, "-version and the other commands come last")
}

// TestEnvironmentIsASecondSource: a variable sets the flag the command
// line leaves unset; the command line wins; a command's flag is not read
// from the environment; a bad value names the variable.
func TestEnvironmentIsASecondSource(t *testing.T) {
	var c config
	require.NoError(t, c.parse(nil, envOf("RATERLIMITER_MAX_ID_BYTES", "7", "RATERLIMITER_VERSION", "true", "RATERLIMITER_HEALTHCHECK", "http://x")))
	assert.Equal(t, 7, c.maxIDBytes)
	assert.False(t, c.version)
	assert.Empty(t, c.healthcheck)

	c = config{}
	require.NoError(t, c.parse([]string{"-max-id-bytes", "3"}, envOf("RATERLIMITER_MAX_ID_BYTES", "7")))
	assert.Equal(t, 3, c.maxIDBytes, "the command line wins")

	c = config{}
	err := c.parse(nil, envOf("RATERLIMITER_MAX_ID_BYTES", "seven"))
	var ue *cli.UsageError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, `invalid value "seven" for RATERLIMITER_MAX_ID_BYTES: want a whole number, such as 100 (see -h)`, err.Error())
}

// TestDurationsNameTheirUnit: every duration, by flag or by variable, that
// lacks its unit is refused with a word on units and an example.
func TestDurationsNameTheirUnit(t *testing.T) {
	n := 0
	for _, d := range table() {
		if d.value.arg() != "duration" {
			continue
		}
		n++
		var c config
		err := c.parse([]string{"-" + d.name, "5"}, noEnv)
		require.Error(t, err, d.name)
		assert.Equal(t, `invalid value "5" for flag -`+d.name+`: a duration needs a unit: 5s, 5ms or 5m, say (see -h)`, err.Error())
		if d.env() != "" {
			err = c.parse(nil, envOf(d.env(), "30"))
			require.Error(t, err, d.name)
			assert.Contains(t, err.Error(), `invalid value "30" for `+d.env()+`: a duration needs a unit: 30s`)
		}
		err = c.parse([]string{"-" + d.name, "5 s"}, noEnv)
		require.Error(t, err, d.name)
		assert.Contains(t, err.Error(), "want a duration such as 5s, 250ms, 1m30s or 2h")
	}
	assert.GreaterOrEqual(t, n, 10)
}

// TestZeroIsTheDefaultAndMinusOneIsOff holds every number to the
// convention: 0 sets the default, -1 is accepted exactly where the flag
// says what it means.
func TestZeroIsTheDefaultAndMinusOneIsOff(t *testing.T) {
	for _, d := range table() {
		if arg := d.value.arg(); arg != "int" && arg != "duration" {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			_, def, _ := d.shown()
			var backend []string
			if d.group.backends == redisBackend {
				backend = []string{"-backend", "redis"}
			}
			var c config
			bound := c.flagTable() // the same fields parse sets
			require.NoError(t, c.parse(append(backend, "-"+d.name, "0"), noEnv))
			for _, e := range bound {
				if e.name == d.name {
					assert.Equal(t, def, e.value.String(), "0 is the default")
				}
			}
			c = config{}
			err := c.parse(append(backend, "-"+d.name, "-1"), noEnv)
			if d.off == "" {
				require.Error(t, err)
				assert.Equal(t, "-"+d.name+" must not be negative (0 means its default, "+def+") (see -h)", err.Error())
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// TestFlagsApplyToTheirBackends: a flag of a backend other than the chosen
// one is refused, whether by flag or by variable.
func TestFlagsApplyToTheirBackends(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend []string
		ok      backendSet
	}{
		{"memory", nil, memoryBackend},
		{"redis", []string{"-backend", "redis"}, redisBackend},
		{"redis with its own counters", []string{"-backend", "redis", "-redis-fail", "local"}, redisBackend | localCounters},
	} {
		for _, d := range table() {
			if d.group.backends == 0 || d.name == "redis-fail" {
				continue
			}
			def := d.value.String()
			if d.value.arg() == "string" && d.name != "redis-url" {
				def = "x" // a file's name; -redis-fail is not here
			}
			var c config
			err := c.parse(append(tc.backend, "-"+d.name+"="+def), noEnv)
			if d.group.backends&tc.ok != 0 {
				assert.NoError(t, err, "%s: -%s", tc.name, d.name)
				continue
			}
			require.Error(t, err, "%s: -%s", tc.name, d.name)
			assert.Contains(t, err.Error(), "-"+d.name+" applies only to ")
			c = config{}
			err = c.parse(tc.backend, envOf(d.env(), def))
			require.Error(t, err, "%s: %s", tc.name, d.env())
			assert.Contains(t, err.Error(), "-"+d.name+" applies only to ")
		}
	}
}

func TestUnknownVariables(t *testing.T) {
	environ := []string{
		"RATERLIMITER_MAX_ID_BYTES=7",       // a flag's
		"RATERLIMITER_MAX_ID_BYTE=7",        // a typo
		"RATERLIMITER_VERSION=true",         // a command's
		"RATERLIMITER_COLOUR=blue",          // nothing like any flag
		"OTHER_MAX_ID_BYTES=1",              // another prefix
		"RATERLIMITER_GONE=x",               // in environ but not seen by lookup
		"RATERLIMITER_SECRET_TOKN=hunter2x", // a value is never repeated
	}
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		seen[name] = name != "RATERLIMITER_GONE"
	}
	got := envWarnings(func(k string) (string, bool) { return "", seen[k] }, environ)
	assert.Equal(t, []string{
		"RATERLIMITER_COLOUR is ignored: no flag reads it",
		"RATERLIMITER_MAX_ID_BYTE is ignored: no flag reads it (did you mean RATERLIMITER_MAX_ID_BYTES?)",
		"RATERLIMITER_SECRET_TOKN is ignored: no flag reads it",
		"RATERLIMITER_VERSION is ignored: -version is set on the command line only",
	}, got)
	for _, w := range got {
		assert.NotContains(t, w, "hunter2x", "values may be secrets")
	}
}

// TestFlagDefaultsAreTheLibraries: where a flag sets a field of a Go
// package's Config, the field's doc comment states the flag's default, so
// that the sidecar and a Go user of the package get the same numbers.
func TestFlagDefaultsAreTheLibraries(t *testing.T) {
	defaults := map[string]string{}
	for _, d := range table() {
		_, def, _ := d.shown()
		defaults[d.name] = def
	}
	for _, tc := range []struct{ flag, dir, typ, field string }{
		{"sweep-interval", "memory", "Config", "SweepInterval"},
		{"max-buckets", "memory", "Config", "MaxBuckets"},
		{"max-bucket-bytes", "memory", "Config", "MaxBucketBytes"},
		{"max-scales-per-id", "memory", "Config", "MaxScalesPerID"},
		{"max-id-bytes", "memory", "Config", "MaxIDBytes"},
		{"redis-url", "redisbackend", "Config", "URL"},
		{"redis-deny-cache", "redisbackend", "Config", "DenyCache"},
		{"max-id-bytes", "redisbackend", "Config", "MaxIDBytes"},
		{"timeout", "api", "Config", "Timeout"},
		{"max-batch", "api", "Config", "MaxBatch"},
		{"max-id-bytes", "api", "Config", "MaxIDBytes"},
		{"max-wait", "api", "Config", "MaxWait"},
		{"max-held", "api", "Config", "MaxHeld"},
		{"max-held-per-client", "api", "Config", "MaxHeld"},
		{"max-conns-per-ip", "api", "ConnLimits", "PerIP"},
		{"max-conns-per-proxy", "api", "ConnLimits", "PerProxy"},
		{"first-byte-timeout", "api", "ConnLimits", "FirstByteTimeout"},
		{"body-budget", "api", "ConnLimits", "BodyBudget"},
		{"max-id-bytes", "client", "Config", "MaxIDBytes"},
		{"max-batch", "client", "Config", "BatchMaxSize"},
		{"max-wait", "middleware", "Config", "Policy"},
	} {
		doc := fieldDoc(t, filepath.Join("..", "..", tc.dir), tc.typ, tc.field)
		def, ok := defaults[tc.flag]
		require.True(t, ok, tc.flag)
		found := false
		for _, s := range spellings(def) {
			found = found || regexp.MustCompile(`(^|[^\w,.])`+regexp.QuoteMeta(s)+`($|[^\w,])`).MatchString(doc)
		}
		assert.True(t, found, "%s.%s.%s's doc does not state -%s's default %s:\n%s", tc.dir, tc.typ, tc.field, tc.flag, def, doc)
	}
}

// spellings are the ways a doc comment writes a flag's default def: as
// -h does, with thousands separated by commas, in MiB.
func spellings(def string) []string {
	if s, err := strconv.Unquote(def); err == nil {
		return []string{s}
	}
	n, err := strconv.Atoi(def)
	if err != nil {
		return []string{def}
	}
	out := []string{def}
	if n >= 1000 {
		s := def
		var b []string
		for len(s) > 3 {
			b = append([]string{s[len(s)-3:]}, b...)
			s = s[:len(s)-3]
		}
		out = append(out, s+","+strings.Join(b, ","))
	}
	if n >= 1<<20 && n%(1<<20) == 0 {
		out = append(out, strconv.Itoa(n>>20)+" MiB")
	}
	return out
}

// fieldDoc is the doc comment of field of type typ in the package in dir,
// its lines joined by spaces.
func fieldDoc(t *testing.T, dir, typ, field string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || ts.Name.Name != typ {
					continue
				}
				for _, fl := range ts.Type.(*ast.StructType).Fields.List {
					for _, n := range fl.Names {
						if n.Name == field {
							return strings.Join(strings.Fields(fl.Doc.Text()), " ")
						}
					}
				}
			}
		}
	}
	t.Fatalf("no field %s.%s in %s", typ, field, dir)
	return ""
}

// FuzzFlagValues: whatever a flag or a variable says, a number's and a
// duration's Set refuse it or take it, never panic; what they take reads
// back as the same value, and a bare number is told it needs a unit.
func FuzzFlagValues(f *testing.F) {
	for _, s := range []string{"5", "5s", "-1", "0", "1.5", "1h30m", "", "soon", "9223372036854775807", "1e3", "+5", ".5", "inf", "0x10", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d time.Duration
		dv := duration(&d, time.Second)
		if err := dv.Set(s); err == nil {
			again := d
			require.NoError(t, dv.Set(dv.String()), "%q read back as %q", s, dv.String())
			assert.Equal(t, again, d)
			assert.NotZero(t, d, "0 is the default")
		} else if _, numErr := strconv.ParseFloat(s, 64); numErr == nil && strings.Trim(s, "+-.0123456789") == "" {
			assert.Contains(t, err.Error(), "a duration needs a unit: "+s+"s")
		}
		var n int64
		nv := number(&n, 7)
		if err := nv.Set(s); err == nil {
			again := n
			require.NoError(t, nv.Set(nv.String()))
			assert.Equal(t, again, n)
			assert.NotZero(t, n, "0 is the default")
		}
	})
}
