package check

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// readSet decodes every manifest of deploy/kubernetes, strictly.
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
		objs, err := decodeAll(filepath.Base(f), b)
		require.NoError(t, err)
		require.NotEmpty(t, objs, f)
		s = append(s, objs...)
		text[filepath.Base(f)] = string(b)
	}
	return s, text
}

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
	} {
		_, err := decodeAll(name, []byte(doc))
		assert.Error(t, err, name)
	}
	objs, err := decodeAll("ok", []byte("# a comment\n---\n"+deployment+"      containers: [{name: c, image: i}]\n"))
	require.NoError(t, err)
	assert.Len(t, objs, 1)
}

// TestManifests decodes deploy/kubernetes strictly, checks the sidecar's
// and the RLS's shapes, and runs each: flags, policies, probes, metrics,
// and a ConfigMap update reloaded without a restart.
func TestManifests(t *testing.T) {
	s, text := readSet(t)
	ws := workloads(t, s)
	require.Len(t, ws, 2, "the sidecar and the RLS")
	// The admin token's Secret is made by hand, by the command in the
	// comments.
	re := regexp.MustCompile(`kubectl create secret generic (\S+) \\\n#\s+--from-literal=token=`)
	m := re.FindStringSubmatch(text["sidecar.yaml"])
	require.NotNil(t, m, "sidecar.yaml says how to make the admin token's Secret")
	secrets := map[string]*corev1.Secret{m[1]: {StringData: map[string]string{"token": "k8s-check-token-0123456789"}}}
	var rls, sidecar int
	for _, w := range ws {
		if w.rls {
			rls++
		} else {
			sidecar++
		}
		t.Run(w.dep.Name, func(t *testing.T) { runWorkload(t, w, secrets, true) })
	}
	assert.Equal(t, 1, rls)
	assert.Equal(t, 1, sidecar)
	// Both monitors are there, on the operator's types.
	assert.Len(t, s.all("ServiceMonitor"), 1)
	assert.Len(t, s.all("PodMonitor"), 1)
}
