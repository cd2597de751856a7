package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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

// chartCases are the values the chart is linted and rendered with: each
// mode, each backend, with and without the operator's monitors and the
// metrics port. serve: the test runs the rendered sidecar (a Redis one is
// only checked: no Redis here).
var chartCases = []struct {
	name  string
	set   []string
	kinds []string // what it renders, in order of kind
	serve bool
}{
	{"defaults", nil, []string{"ConfigMap", "Deployment", "Secret"}, true},
	{"sidecar-podmonitor", []string{"metrics.serviceMonitor.enabled=true"}, []string{"ConfigMap", "Deployment", "PodMonitor", "Secret"}, true},
	{"sidecar-no-metrics", []string{"metrics.enabled=false"}, []string{"ConfigMap", "Deployment"}, true},
	{"rls-memory", []string{"mode=rls"}, []string{"ConfigMap", "Deployment", "Secret", "Service"}, true},
	{"rls-servicemonitor", []string{"mode=rls", "metrics.serviceMonitor.enabled=true", "admin.existingSecret=my-admin"}, []string{"ConfigMap", "Deployment", "Service", "ServiceMonitor"}, true},
	{"rls-redis", []string{"mode=rls", "backend=redis", "redis.url=redis://redis:6379/0", "rls.replicas=3"}, []string{"ConfigMap", "Deployment", "Secret", "Service"}, false},
	{"rls-redis-secret", []string{"mode=rls", "backend=redis", "redis.existingSecret=redis", "rls.replicas=2"}, []string{"ConfigMap", "Deployment", "Secret", "Service"}, false},
	{"sidecar-redis", []string{"backend=redis", "redis.url=rediss://user:pass@redis:6380/0", "extraArgs={-redis-fail=open}"}, []string{"ConfigMap", "Deployment", "Secret"}, false},
}

// TestHelmChart runs helm lint --strict and helm template on the chart with
// each case's values, decodes what it renders strictly, checks its shape as
// the manifests' is, and runs the sidecar it describes.
func TestHelmChart(t *testing.T) {
	bin := needHelm(t)
	out, err := helm(t, bin, "version", "--short")
	require.NoError(t, err, out)
	t.Logf("helm %s", strings.TrimSpace(out))
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			var sets []string
			for _, s := range c.set {
				sets = append(sets, "--set", s)
			}
			out, err := helm(t, bin, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chart}, sets...)...)
			require.NoError(t, err, "helm lint:\n%s", out)
			assert.Contains(t, out, "1 chart(s) linted, 0 chart(s) failed")
			out, err = helm(t, bin, append([]string{"template", "rl", chart, "--kube-version", kubeVersion}, sets...)...)
			require.NoError(t, err, "helm template:\n%s", out)
			s, err := decodeAll("helm template "+c.name, []byte(out))
			require.NoError(t, err)
			var kinds []string
			for _, o := range s {
				kinds = append(kinds, o.kind)
			}
			assert.ElementsMatch(t, c.kinds, kinds)
			ws := workloads(t, s)
			require.Len(t, ws, 1)
			runWorkload(t, ws[0], chartSecrets(), c.serve)
		})
	}
}

// TestHelmChartRefuses: values that cannot work stop helm template with
// a message.
func TestHelmChartRefuses(t *testing.T) {
	bin := needHelm(t)
	for _, c := range []struct{ set, msg string }{
		{"mode=gateway", "mode must be sidecar-example or rls"},
		{"backend=etcd", "backend must be memory or redis"},
		{"mode=rls,rls.replicas=2", "rls.replicas above 1 needs backend: redis"},
		{"backend=redis", "backend redis needs redis.url or redis.existingSecret"},
	} {
		out, err := helm(t, bin, "template", "rl", chart, "--kube-version", kubeVersion, "--set", c.set)
		require.Error(t, err, c.set)
		assert.Contains(t, out, c.msg, c.set)
	}
	// The chart needs native sidecars.
	out, err := helm(t, bin, "template", "rl", chart, "--kube-version", "1.28.0")
	require.Error(t, err)
	assert.Contains(t, out, "kubeVersion")
}

// chartSecrets are the Secrets chartCases tell the chart exist.
func chartSecrets() map[string]*corev1.Secret {
	return map[string]*corev1.Secret{
		"my-admin": {StringData: map[string]string{"token": "k8s-check-token-0123456789"}},
		"redis":    {StringData: map[string]string{"redis-url": "redis://:secret@redis:6379/0"}},
	}
}
