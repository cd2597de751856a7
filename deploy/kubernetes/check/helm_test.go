package check

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// chart is the Helm chart's directory.
var chart = filepath.Join("..", "..", "helm", "raterlimiter")

// kubeVersion is the cluster helm template renders for (the chart needs
// 1.29 or later: native sidecars).
const kubeVersion = "1.33.0"

// needHelm finds helm on PATH: .ci/run builds it from the Go module proxy.
// Locally the test skips without it; under CI=true it fails.
func needHelm(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("helm is not on PATH: .ci/run builds it (helm.sh/helm/v3) into its cache")
		}
		t.Skip("helm is not on PATH: build it as .ci/run does (go build ./cmd/helm of helm.sh/helm/v3) to run this test")
	}
	return path
}

func helm(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// setArgs are --set flags, one a value.
func setArgs(sets []string) []string {
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// render runs helm lint --strict and helm template on dir with the values
// flags (--set, -f), and decodes what it renders strictly.
func render(t *testing.T, bin, dir string, flags ...string) set {
	t.Helper()
	out, err := helm(t, bin, append([]string{"lint", "--strict", "--kube-version", kubeVersion, dir}, flags...)...)
	require.NoError(t, err, "helm lint:\n%s", out)
	assert.Contains(t, out, "1 chart(s) linted, 0 chart(s) failed")
	out, err = helm(t, bin, append([]string{"template", "rl", dir, "--kube-version", kubeVersion}, flags...)...)
	require.NoError(t, err, "helm template:\n%s", out)
	s, err := decodeAll("helm template "+strings.Join(flags, " "), []byte(out))
	require.NoError(t, err)
	return s
}

// copyDir copies the directory src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
}

// notesTemplate renders NOTES.txt into a ConfigMap: helm template, which
// needs no cluster, leaves the notes out, and helm install --dry-run asks
// a cluster.
const notesTemplate = `{{- define "raterlimiter.test.notes" -}}
%s
{{- end -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ include "raterlimiter.test.notes" . | quote }}
`

// notes renders the chart's NOTES.txt with the values flags, through helm template on
// a copy of the chart that holds it as a template too. sub is the chart's
// path in parent, a chart that has it as a dependency ("" for the chart
// alone).
func notes(t *testing.T, bin, parent string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	top, sub := dir, dir
	if parent != "" {
		copyDir(t, parent, dir)
		sub = filepath.Join(dir, "charts", "raterlimiter")
	}
	copyDir(t, chart, sub)
	text, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(sub, "templates", "zz-notes.yaml"), []byte(strings.Replace(notesTemplate, "%s", string(text), 1)), 0o644))
	show, err := filepath.Rel(top, filepath.Join(sub, "templates", "zz-notes.yaml"))
	require.NoError(t, err)
	out, err := helm(t, bin, append([]string{"template", "rl", top, "--kube-version", kubeVersion, "--show-only", show}, flags...)...)
	require.NoError(t, err, "helm template (notes):\n%s", out)
	objs, err := decodeAll("notes", []byte(out))
	require.NoError(t, err)
	cm, _ := set(objs).find("ConfigMap", "notes").(*corev1.ConfigMap)
	require.NotNil(t, cm)
	return cm.Data["notes"]
}

// chartCases are the values the chart is linted and rendered with: each
// shape, each backend, TLS, the settings an operator overrides, with and
// without the operator's monitors and the metrics port. serve: the test
// runs what it renders (a Redis one is only checked: no Redis here).
var chartCases = []struct {
	name  string
	set   []string
	kinds []string // what it renders
	serve bool
}{
	{"gateway", nil, []string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Secret", "Service"}, true},
	{"gateway-settings", []string{"image.tag=1.2.3", "imagePullSecrets[0].name=regcred", "extraEnv[0].name=RATERLIMITER_TIMEOUT", "extraEnv[0].value=200ms",
		"extraArgs={-max-wait=2s}", "resources.limits.memory=300Mi", "securityContext.runAsUser=1000", "podSecurityContext.runAsUser=1000",
		"networkPolicy.metricsNamespace=prometheus", "podDisruptionBudget.maxUnavailable=50%"},
		[]string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Secret", "Service"}, true},
	{"gateway-traefik-servicemonitor", []string{"gateway.authHeaders=traefik", "metrics.serviceMonitor.enabled=true", "admin.existingSecret=my-admin"},
		[]string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Service", "ServiceMonitor"}, true},
	{"gateway-redis", []string{"backend=redis", "redis.url=redis://redis:6379/0", "replicas=3"},
		[]string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Secret", "Service"}, false},
	{"rls", []string{"mode=rls"}, []string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Secret", "Service"}, true},
	{"rls-mtls", []string{"mode=rls", "rls.tls.secretName=rls-tls", "rls.tls.clientCA=true", "rls.tls.clientSAN=" + clientSAN},
		[]string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Secret", "Service"}, true},
	{"rls-tls-no-metrics", []string{"mode=rls", "rls.tls.secretName=rls-tls", "metrics.enabled=false"},
		[]string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Service"}, true},
	{"rls-redis-secret", []string{"mode=rls", "backend=redis", "redis.existingSecret=redis", "replicas=2", "extraArgs={-redis-fail=open}"},
		[]string{"ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget", "Secret", "Service"}, false},
	{"sidecar", []string{"mode=sidecar"}, []string{"ConfigMap", "Pod", "Secret"}, false},
	{"sidecar-podmonitor", []string{"mode=sidecar", "metrics.serviceMonitor.enabled=true"}, []string{"ConfigMap", "Pod", "PodMonitor", "Secret"}, false},
}

// chartSecrets are the Secrets chartCases tell the chart exist.
func chartSecrets(t *testing.T) map[string]*corev1.Secret {
	t.Helper()
	k, err := pki()
	require.NoError(t, err)
	return map[string]*corev1.Secret{
		"my-admin": {StringData: map[string]string{"token": "k8s-check-token-0123456789"}},
		"redis":    {StringData: map[string]string{"redis-url": "redis://:secret@redis:6379/0"}},
		"rls-tls":  k.secret,
	}
}

// TestHelmChart runs helm lint --strict and helm template on the chart with
// each case's values, decodes what it renders strictly, checks its shape as
// the manifests' is, runs the chart's test (the binary checks the
// configuration) and runs the process it describes.
func TestHelmChart(t *testing.T) {
	bin := needHelm(t)
	out, err := helm(t, bin, "version", "--short")
	require.NoError(t, err, out)
	t.Logf("helm %s", strings.TrimSpace(out))
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &meta))
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			s := render(t, bin, chart, setArgs(c.set)...)
			var kinds []string
			for _, o := range s {
				kinds = append(kinds, o.kind)
			}
			sort.Strings(kinds)
			assert.Equal(t, c.kinds, kinds)
			secrets := chartSecrets(t)
			runs := runTestPods(t, s, secrets)
			require.Len(t, runs, 1, "helm test: one check of the configuration")
			assert.Equal(t, 0, runs[0].code, "helm test %s: %s", runs[0].name, runs[0].out)
			n := notes(t, bin, "", setArgs(c.set)...)
			ws := workloads(t, s)
			if slices.Contains(c.set, "mode=sidecar") {
				require.Empty(t, ws, "the sidecar goes in your own Deployment")
				assert.Contains(t, n, "raterlimiter.sidecar.*")
				return
			}
			require.Len(t, ws, 1)
			w := ws[0]
			checkSpread(t, w)
			image := "example.com/raterlimiter:" + meta.AppVersion
			if slices.Contains(c.set, "image.tag=1.2.3") {
				image = "example.com/raterlimiter:1.2.3"
				checkSettings(t, w)
			}
			assert.Equal(t, image, w.container.Image, "the tag defaults to the chart's appVersion")
			if slices.Contains(c.set, "rls.tls.secretName=rls-tls") {
				assert.NotEmpty(t, w.args["rls-tls-cert"], "TLS on the RLS port")
			}
			if slices.Contains(c.set, "rls.tls.clientCA=true") {
				assert.NotEmpty(t, w.args["rls-tls-client-ca"], "mutual TLS")
				assert.Equal(t, clientSAN, w.args["rls-tls-client-san"])
			}
			r := runEnv{secrets: secrets, serve: c.serve}
			if w.shape == shapeGateway && w.args["auth-headers"] == "nginx" {
				r.authURL = authURLIn(t, n)
			}
			if w.args["auth-headers"] == "traefik" {
				assert.Contains(t, n, "forwardAuth:\n      address: http://rl-raterlimiter.default.svc.cluster.local:8080/auth")
			}
			runWorkload(t, w, r)
		})
	}
}

// checkSettings: what gateway-settings sets reaches the objects.
func checkSettings(t *testing.T, w workload) {
	t.Helper()
	pod := w.dep.Spec.Template.Spec
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, pod.ImagePullSecrets)
	assert.Contains(t, w.container.Env, corev1.EnvVar{Name: "RATERLIMITER_TIMEOUT", Value: "200ms"})
	assert.Equal(t, "2s", w.args["max-wait"])
	assert.True(t, resource.MustParse("300Mi").Equal(*w.container.Resources.Limits.Memory()))
	require.NotNil(t, w.container.SecurityContext.RunAsUser)
	assert.Equal(t, int64(1000), *w.container.SecurityContext.RunAsUser)
	assert.Equal(t, int64(1000), *pod.SecurityContext.RunAsUser)
	for _, o := range w.set.all("PodDisruptionBudget") {
		pdb := o.(*policyv1.PodDisruptionBudget)
		require.NotNil(t, pdb.Spec.MaxUnavailable)
		assert.Equal(t, "50%", pdb.Spec.MaxUnavailable.String())
	}
	for _, o := range w.set.all("NetworkPolicy") {
		np := o.(*networkingv1.NetworkPolicy)
		assert.Contains(t, np.Spec.Ingress[len(np.Spec.Ingress)-1].From[0].NamespaceSelector.MatchLabels, "kubernetes.io/metadata.name")
		assert.Equal(t, "prometheus", np.Spec.Ingress[len(np.Spec.Ingress)-1].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
	}
}

// TestHelmSidecarInYourChart renders a chart of one's own (testdata/app-chart)
// whose Deployment adds the sidecar with the named templates, the
// raterlimiter chart as its dependency, and checks and runs the sidecar
// as the manifests' is; the notes warn that memory sidecars in several
// pods count apart.
func TestHelmSidecarInYourChart(t *testing.T) {
	bin := needHelm(t)
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", "app-chart"), dir)
	copyDir(t, chart, filepath.Join(dir, "charts", "raterlimiter"))
	s := render(t, bin, dir)
	ws := workloads(t, s)
	require.Len(t, ws, 1)
	w := ws[0]
	require.Equal(t, shapeSidecar, w.shape)
	assert.Equal(t, int32(3), *w.dep.Spec.Replicas, "the app's chart reads raterlimiter.replicas")
	app := w.dep.Spec.Template.Spec.Containers[0]
	assert.Contains(t, app.Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: "info"}, "the app's own settings stay")
	secrets := chartSecrets(t)
	runs := runTestPods(t, s, secrets)
	require.Len(t, runs, 1)
	assert.Equal(t, 0, runs[0].code, "helm test %s: %s", runs[0].name, runs[0].out)
	runWorkload(t, w, runEnv{secrets: secrets, serve: true})

	warning := "WARNING: backend memory with replicas 3"
	assert.Contains(t, notes(t, bin, filepath.Join("testdata", "app-chart")), warning)
	for _, set := range [][]string{{"raterlimiter.replicas=1"}, {"raterlimiter.backend=redis", "raterlimiter.redis.url=redis://redis:6379/0"}} {
		assert.NotContains(t, notes(t, bin, filepath.Join("testdata", "app-chart"), setArgs(set)...), "WARNING", set)
	}
}

// TestHelmChartRefuses: values that cannot work stop helm template (and
// so helm install): the schema refuses unknown keys and wrong types, also
// in helm lint; the templates refuse what only several values together
// say, which helm lint reports without failing.
func TestHelmChartRefuses(t *testing.T) {
	bin := needHelm(t)
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	require.NoError(t, os.WriteFile(typo, []byte("policies:\n  policies:\n    - {name: login, key: ip, limt: 5, scale: 1m}\n"), 0o644))
	rlsTypo := filepath.Join(t.TempDir(), "rls-typo.yaml")
	require.NoError(t, os.WriteFile(rlsTypo, []byte("mode: rls\nrls:\n  config:\n    a.yaml:\n      domain: a\n      descriptors:\n        - key: k\n          rate_limt: {unit: second, requests_per_unit: 1}\n"), 0o644))
	for _, c := range []struct {
		args []string
		msg  string
		fail bool // refused by a template's fail, which helm lint reports but passes
	}{
		{[]string{"-f", typo}, "additional properties 'limt' not allowed", false},
		{[]string{"-f", rlsTypo}, "additional properties 'rate_limt' not allowed", false},
		{[]string{"--set", "replica=2"}, "additional properties 'replica' not allowed", false},
		{[]string{"--set", "replicas=two"}, "got string, want integer", false},
		{[]string{"--set", "image.tag=2"}, "got number, want string", false},
		{[]string{"--set", "mode=proxy"}, "'/mode'", false},
		{[]string{"--set", "backend=etcd"}, "'/backend'", false},
		{[]string{"--set", "policies.policies[0].algo=slidng"}, "'/policies/policies/0/algo'", false},
		{[]string{"--set", "extraArgs={--x}"}, "'/extraArgs/0'", false},
		{[]string{"--set", "mode=gateway,replicas=2"}, "mode gateway: replicas above 1 needs backend: redis", true},
		{[]string{"--set", "mode=rls,replicas=2"}, "mode rls: replicas above 1 needs backend: redis", true},
		{[]string{"--set", "backend=redis"}, "backend redis needs redis.url or redis.existingSecret", true},
		{[]string{"--set", "mode=rls,rls.tls.secretName=t,rls.tls.clientSAN=x"}, "rls.tls.clientSAN needs rls.tls.clientCA", true},
		{[]string{"--set", "mode=rls,rls.tls.clientCA=true"}, "rls.tls.clientCA needs rls.tls.secretName", true},
	} {
		out, err := helm(t, bin, append([]string{"template", "rl", chart, "--kube-version", kubeVersion}, c.args...)...)
		require.Error(t, err, "helm template %v", c.args)
		assert.Contains(t, out, c.msg, "helm template %v", c.args)
		out, err = helm(t, bin, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chart}, c.args...)...)
		if !c.fail {
			require.Error(t, err, "helm lint %v", c.args)
		}
		assert.Contains(t, out, c.msg, "helm lint %v", c.args)
	}
	// The chart needs native sidecars.
	out, err := helm(t, bin, "template", "rl", chart, "--kube-version", "1.28.0")
	require.Error(t, err)
	assert.Contains(t, out, "kubeVersion")
}

// TestHelmTestChecksWhatTheSchemaCannot: values of the right shape that
// the binary refuses render, and the chart's test (helm test) fails on
// them with the binary's message.
func TestHelmTestChecksWhatTheSchemaCannot(t *testing.T) {
	bin := needHelm(t)
	for _, c := range []struct {
		values, msg string
	}{
		{"policies: {trusted_proxies: [not-an-address], policies: [{name: a, key: ip, limit: 1, scale: 1s}]}", "not-an-address"},
		{"policies: {policies: [{name: a, key: ip, limit: 1, scale: 1s, match: {path_prefix: /a/../b}}]}", "path_prefix"},
		{"policies: {policies: [{name: a, key: ip, limit: 1, scale: 1s}, {name: a, key: ip, limit: 2, scale: 1s}]}", "\"a\""},
		{"{mode: rls, rls: {config: {a.yaml: {domain: edge}, b.yaml: {domain: edge}}}}", "defined twice"},
	} {
		values := filepath.Join(t.TempDir(), "values.yaml")
		require.NoError(t, os.WriteFile(values, []byte(c.values), 0o644))
		s := render(t, bin, chart, "-f", values)
		runs := runTestPods(t, s, chartSecrets(t))
		require.Len(t, runs, 1)
		assert.Equal(t, 2, runs[0].code, "%s: %s", c.values, runs[0].out)
		assert.Contains(t, runs[0].out, c.msg, c.values)
	}
}

// TestSchemaMatchesTheBinary: every field values.schema.json allows in a
// policy or an RLS file is one the binary loads: testdata/every-field.yaml
// uses each (the test finds every name of the schema's definitions in
// it), and the chart's test passes on it.
func TestSchemaMatchesTheBinary(t *testing.T) {
	bin := needHelm(t)
	b, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(b, &schema))
	every, err := os.ReadFile(filepath.Join("testdata", "every-field.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(every, &values))
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				used[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(values)
	for _, def := range []string{"policiesFile", "policy", "rlsFile", "descriptor"} {
		names := propertyNames(t, schema.Definitions[def])
		require.NotEmpty(t, names, def)
		for _, n := range names {
			assert.True(t, used[n], "testdata/every-field.yaml uses %s's field %s", def, n)
		}
	}
	for _, mode := range []string{"gateway", "rls"} {
		s := render(t, bin, chart, "-f", filepath.Join("testdata", "every-field.yaml"), "--set", "mode="+mode)
		runs := runTestPods(t, s, chartSecrets(t))
		require.Len(t, runs, 1)
		assert.Equal(t, 0, runs[0].code, "%s: the binary refuses a field the schema allows: %s", mode, runs[0].out)
	}
}

// propertyNames are the names of a schema object's properties, and of the
// objects nested in them (not through a $ref).
func propertyNames(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var node map[string]any
	require.NoError(t, json.Unmarshal(raw, &node))
	var names []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if props, ok := n["properties"].(map[string]any); ok {
			for k, p := range props {
				names = append(names, k)
				if pm, ok := p.(map[string]any); ok {
					walk(pm)
				}
			}
		}
		if items, ok := n["items"].(map[string]any); ok {
			walk(items)
		}
		for _, alt := range []string{"oneOf", "anyOf"} {
			if alts, ok := n[alt].([]any); ok {
				for _, a := range alts {
					if am, ok := a.(map[string]any); ok {
						walk(am)
					}
				}
			}
		}
	}
	walk(node)
	return names
}
