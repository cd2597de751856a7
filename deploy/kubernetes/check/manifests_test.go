package check

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// patchSuffix marks a file that is a patch for one's own objects, not
// objects to apply.
const patchSuffix = "-patch.yaml"

// readSet decodes every manifest of deploy/kubernetes, strictly, but the
// patches.
func readSet(t *testing.T) (set, map[string]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var s set
	text := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		text[filepath.Base(f)] = string(b)
		if strings.HasSuffix(f, patchSuffix) {
			continue
		}
		objs, err := decodeAll(filepath.Base(f), b)
		require.NoError(t, err)
		require.NotEmpty(t, objs, f)
		s = append(s, objs...)
	}
	return s, text
}

// patchDeployment applies a strategic merge patch to a Deployment as
// `kubectl patch deployment NAME --patch-file FILE` does, both read
// strictly (a misspelt field of the patch is an error, not a no-op), and
// returns the result, decoded strictly.
func patchDeployment(t *testing.T, original, patch []byte) object {
	t.Helper()
	require.NoError(t, strictPatch(patch), "the patch is a part of a Deployment")
	oj, err := yaml.YAMLToJSON(original)
	require.NoError(t, err)
	pj, err := yaml.YAMLToJSON(patch)
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(oj, pj, appsv1.Deployment{})
	require.NoError(t, err)
	objs, err := decodeAll("the patched Deployment", merged)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs[0]
}

// strictPatch decodes a patch strictly as a part of a Deployment.
func strictPatch(patch []byte) error { return yaml.UnmarshalStrict(patch, &appsv1.Deployment{}) }

// TestStrictDecoding proves the decoder refuses what Kubernetes would not
// take as written: a misspelt or misplaced field, a field twice, a bad
// quantity, an unknown kind.
func TestStrictDecoding(t *testing.T) {
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
	for name, doc := range map[string]string{
		"unknown field":   deployment + "      initContainer: []\n",
		"misplaced field": deployment + "      restartPolicy: Always\n      containers: [{name: c, image: i, readinessProbe: {grpc: {port: 1}, path: /}}]\n",
		"field twice":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\ndata: {c: d}\n",
		"bad quantity":    deployment + "      containers: [{name: c, image: i, resources: {limits: {memory: 256MB2}}}]\n",
		"unknown kind":    "apiVersion: v1\nkind: Pod2\nmetadata: {name: p}\n",
		"bad name":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n",
		"policy typo":     "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: n}\nspec: {podSelector: {}, ingress: [{form: []}]}\n",
	} {
		_, err := decodeAll(name, []byte(doc))
		assert.Error(t, err, name)
	}
	objs, err := decodeAll("ok", []byte("# a comment\n---\n"+deployment+"      containers: [{name: c, image: i}]\n"))
	require.NoError(t, err)
	assert.Len(t, objs, 1)
	// A misspelt field of a patch is refused too.
	assert.Error(t, strictPatch([]byte("spec:\n  template:\n    spec:\n      initContainer: []\n")))
	assert.NoError(t, strictPatch([]byte("spec:\n  template:\n    spec:\n      initContainers: []\n")))
}

// TestManifests decodes deploy/kubernetes strictly, adds the sidecar to a
// sample Deployment with sidecar-patch.yaml as kubectl patch does, checks
// the sidecar's, the gateway's and the RLS's shapes, and runs each: flags,
// policies, probes, metrics, the gateway's /auth through nginx, and a
// ConfigMap update reloaded without a restart.
func TestManifests(t *testing.T) {
	s, text := readSet(t)
	app, err := os.ReadFile(filepath.Join("testdata", "app.yaml"))
	require.NoError(t, err)
	patched := patchDeployment(t, app, []byte(text["sidecar"+patchSuffix]))
	d := patched.obj.(*appsv1.Deployment)
	// The app's own settings stay beside what the patch adds.
	spec := d.Spec.Template.Spec
	require.Len(t, spec.Containers, 1)
	assert.Contains(t, spec.Containers[0].Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: "info"})
	assert.Contains(t, spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/cache"})
	assert.Equal(t, "example.com/app:1.2", spec.Containers[0].Image)
	assert.Len(t, spec.Volumes, 4, "the app's volume and the sidecar's three")
	s = append(s, patched)

	ws := workloads(t, s)
	require.Len(t, ws, 3, "the sidecar, the gateway and the RLS")
	// The admin token's Secret is made by hand, by the command in the
	// comments.
	re := regexp.MustCompile(`kubectl create secret generic (\S+) \\\n#\s+--from-literal=token=`)
	m := re.FindStringSubmatch(text["sidecar.yaml"])
	require.NotNil(t, m, "sidecar.yaml says how to make the admin token's Secret")
	secrets := map[string]*corev1.Secret{m[1]: {StringData: map[string]string{"token": "k8s-check-token-0123456789"}}}
	shapes := map[string]int{}
	for _, w := range ws {
		shapes[w.shape]++
		t.Run(w.dep.Name, func(t *testing.T) {
			r := runEnv{secrets: secrets, serve: true}
			if w.shape == shapeGateway {
				r.authURL = authURLIn(t, text["gateway.yaml"])
			}
			runWorkload(t, w, r)
		})
	}
	assert.Equal(t, map[string]int{shapeSidecar: 1, shapeGateway: 1, shapeRLS: 1}, shapes)
	// The monitors are there, on the operator's types.
	assert.Len(t, s.all("ServiceMonitor"), 1)
	assert.Len(t, s.all("PodMonitor"), 1)
}
