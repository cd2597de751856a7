package deploy

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
	return string(out)
}

func TestAlertRules(t *testing.T) {
	promtool := tooltest.Need(t, "promtool", "prometheus")
	out := run(t, "prometheus", promtool, "check", "rules", "alerts.yml")
	assert.Contains(t, out, "SUCCESS: 7 rules found")
	out = run(t, "prometheus", promtool, "test", "rules", "alerts_test.yml")
	assert.Contains(t, out, "SUCCESS")

	// Every alert has a unit test that expects it to fire.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(read(t, "prometheus/alerts.yml")), &rules))
	var tests struct {
		Tests []struct {
			Alerts []struct {
				Name string `yaml:"alertname"`
				Exp  []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(read(t, "prometheus/alerts_test.yml")), &tests))
	fires := map[string]bool{}
	for _, tt := range tests.Tests {
		for _, a := range tt.Alerts {
			if len(a.Exp) > 0 {
				fires[a.Name] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			assert.True(t, fires[r.Alert], "alerts_test.yml has no test where %s fires", r.Alert)
		}
	}
	assert.Equal(t, 7, n)
}

// grafanaExprs returns every query of the Grafana dashboard.
func grafanaExprs(t *testing.T) []string {
	t.Helper()
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal([]byte(read(t, "grafana/raterlimiter.json")), &d))
	require.NotEmpty(t, d.UID)
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// TestGrafanaQueriesParse has promtool parse every query of the Grafana
// dashboard, as recording rules, with Grafana's variables replaced.
func TestGrafanaQueriesParse(t *testing.T) {
	promtool := tooltest.Need(t, "promtool", "prometheus")
	exprs := grafanaExprs(t)
	require.GreaterOrEqual(t, len(exprs), 10)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rs []rule
	for i, e := range exprs {
		rs = append(rs, rule{Record: "grafana:query" + string(rune('a'+i)), Expr: vars.Replace(e)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "grafana", "rules": rs}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "grafana-rules.yml")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	out := run(t, ".", promtool, "check", "rules", path)
	assert.Contains(t, out, "SUCCESS")
}

func TestSystemdUnit(t *testing.T) {
	unit := read(t, "systemd/raterlimiter.service")
	for _, opt := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "DynamicUser=yes", "CapabilityBoundingSet=\n",
		"PrivateDevices=yes", "SystemCallFilter=@system-service", "RestrictAddressFamilies="} {
		assert.Contains(t, unit, opt)
	}
	analyze := tooltest.Need(t, "systemd-analyze", "systemd")
	// verify wants the binary it names to exist: point it at a real build.
	dir := t.TempDir()
	bin := filepath.Join(dir, "raterlimiter")
	run(t, "..", "go", "build", "-o", bin, "./cmd/raterlimiter")
	path := filepath.Join(dir, "raterlimiter.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/raterlimiter", bin)), 0o600))
	cmd := exec.Command(analyze, "verify", path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	// verify warns (exit 0) about unknown keys and bad values: none allowed.
	assert.Empty(t, strings.TrimSpace(string(out)))
	// The flags in ExecStart are ones the binary takes.
	m := regexp.MustCompile(`(?m)^ExecStart=\S+ (.*)$`).FindStringSubmatch(unit)
	require.NotNil(t, m)
	args := append(strings.Fields(m[1]), "-h")
	out, err = exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The unit's environment gives the sidecar an address a scraper reads
	// /metrics from.
	env := regexp.MustCompile(`(?m)^Environment=RATERLIMITER_ADMIN_LISTEN=(\S+)$`).FindStringSubmatch(unit)
	require.NotNil(t, env, "the unit sets an -admin-listen for /metrics")
	assert.Equal(t, "127.0.0.1:9090", env[1], "loopback: no token needed")
	assert.Contains(t, unit, "scrape_configs:")
}

// dockerBuild is the go build line of the Dockerfile's build stage.
var dockerBuild = regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0) go build (.*) -o (\S+) (\./cmd/raterlimiter)$`)

func TestDockerfile(t *testing.T) {
	df := read(t, "Dockerfile")
	// Lint: named stages, pinned images, a non-root numeric user in the
	// last stage, exec-form ENTRYPOINT, copies from a stage that exists.
	stages := regexp.MustCompile(`(?m)^FROM (\S+) AS (\S+)$`).FindAllStringSubmatch(df, -1)
	require.Len(t, stages, 2, "a build stage and a run stage")
	for _, s := range stages {
		assert.Contains(t, s[1], ":", "image %s needs a tag", s[1])
		assert.NotContains(t, s[1], ":latest")
	}
	assert.Equal(t, []string{"build", "run"}, []string{stages[0][2], stages[1][2]})
	runStage := df[strings.Index(df, stages[1][0]):]
	assert.Regexp(t, `(?m)^USER [1-9][0-9]*:[1-9][0-9]*$`, runStage, "the run stage runs as a numeric non-root user")
	assert.Regexp(t, `(?m)^ENTRYPOINT \["[^"]+"\]$`, runStage)
	assert.Contains(t, runStage, "COPY --from=build /out/raterlimiter ")
	assert.Contains(t, stages[1][1], "static", "a static binary needs no libc")
	// The Go image is the go.mod's release.
	gomod := read(t, "../go.mod")
	gover := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
	require.NotNil(t, gover)
	assert.True(t, strings.HasPrefix(stages[0][1], "golang:"+gover[1]+"-"), "build image %s, go.mod says go %s", stages[0][1], gover[1])

	// The build stage builds the README's package, and with its flags the
	// binary comes out static.
	m := dockerBuild.FindStringSubmatch(df)
	require.NotNil(t, m, "the build stage's go build line")
	readme := read(t, "../README.md")
	assert.Contains(t, readme, "go build -o raterlimiter "+m[4], "the README builds the same package")
	flags := shellWords(m[2])
	bin := filepath.Join(t.TempDir(), "raterlimiter")
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, m[4])...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), m[1])
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "the binary asks for a dynamic loader: not static")
	}
	libs, _ := f.ImportedLibraries()
	assert.Empty(t, libs)
	ver, err := exec.Command(bin, "-version").CombinedOutput()
	require.NoError(t, err, "%s", ver)
	assert.True(t, bytes.HasPrefix(ver, []byte("raterlimiter ")), "%s", ver)
}

// shellWords splits s as a shell would, for words and double quotes only.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
			}
			in = false
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
