package raterlimiter_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// engine lists the packages behind memory: the store, its owner goroutine
// and the sweeper. They sit at the top level, as the design draws them,
// but no package other than memory (and the engine's own) may import them.
var engine = []string{"actor", "buckets", "sweeper"}

// TestEngineIsSealed fails when any package of the module, tests included,
// imports actor, buckets or sweeper other than memory and the engine
// itself: everything else reaches the engine through package memory.
func TestEngineIsSealed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	const mod = "github.com/raterlimiter/raterlimiter/"
	out, err := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", "./...").Output()
	require.NoError(t, err, "go list: %s", stderrOf(err))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(lines), 20, "go list listed too few packages")
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, "\t")
		if rel := strings.TrimPrefix(basePackage(pkg), mod); rel == "memory" || slices.Contains(engine, rel) {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			for _, e := range engine {
				if basePackage(imp) == mod+e {
					t.Errorf("%s imports %s: the engine is reached through package memory only", pkg, imp)
				}
			}
		}
	}
}

// basePackage strips go list's test decorations: "p [p.test]", "p_test",
// "p.test".
func basePackage(p string) string {
	p, _, _ = strings.Cut(p, " ")
	p = strings.TrimSuffix(p, ".test")
	return strings.TrimSuffix(p, "_test")
}

// apiUsers are the packages whose code (tests aside) may import api: the
// sidecar. api is the sidecar's HTTP face;
// its Config names the sidecar's internal types, so no package a user
// imports may offer it.
var apiUsers = []string{"cmd/raterlimiter"}

// TestAPIIsSealed fails when code of the module other than the sidecar
// imports package api (the lab, a module of its own, may), but for tests
// and the test helpers
// only tests import (they serve a real sidecar in process).
func TestAPIIsSealed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	const mod = "github.com/raterlimiter/raterlimiter/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", "./...").Output()
	require.NoError(t, err, "go list: %s", stderrOf(err))
	importers := map[string][]string{} // package -> the non-test packages that import it
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		for _, imp := range strings.Fields(imports) {
			importers[imp] = append(importers[imp], pkg)
		}
	}
	require.NotEmpty(t, importers[mod+"api"], "go list found no importer of api: the test would prove nothing")
	// testOnly reports whether only tests reach pkg: an internal package
	// that no code but tests, and other such packages, imports.
	var testOnly func(pkg string, depth int) bool
	testOnly = func(pkg string, depth int) bool {
		if depth > 10 || !strings.Contains(pkg, "/internal/") {
			return false
		}
		for _, p := range importers[pkg] {
			if !testOnly(p, depth+1) {
				return false
			}
		}
		return true
	}
	for _, pkg := range importers[mod+"api"] {
		switch {
		case slices.Contains(apiUsers, strings.TrimPrefix(pkg, mod)):
		case testOnly(pkg, 0):
			// A test helper: only tests reach it.
		default:
			t.Errorf("%s imports api: only %v (and tests) may", pkg, apiUsers)
		}
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
