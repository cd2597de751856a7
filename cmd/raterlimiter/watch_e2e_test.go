package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// configMap lays out dir as the kubelet lays out a ConfigMap volume: each
// file a symlink through "..data", itself a symlink to a timestamped
// directory that holds the files.
type configMap struct {
	t   *testing.T
	dir string
	gen int
	cur string
}

func newConfigMap(t *testing.T, dir string, files map[string]string) *configMap {
	cm := &configMap{t: t, dir: dir}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	cm.update(files)
	for name := range files {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	return cm
}

// update swaps in new contents the way the kubelet does: a new timestamped
// directory, a "..data_tmp" symlink to it renamed over "..data" (one atomic
// step), then the old directory removed.
func (cm *configMap) update(files map[string]string) {
	t := cm.t
	cm.gen++
	ts := filepath.Join(cm.dir, "..2026_11_27_00_00_0"+string(rune('0'+cm.gen)))
	require.NoError(t, os.Mkdir(ts, 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(ts, name), []byte(content), 0o644))
	}
	tmp := filepath.Join(cm.dir, "..data_tmp")
	require.NoError(t, os.Symlink(filepath.Base(ts), tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(cm.dir, "..data")))
	if cm.cur != "" {
		require.NoError(t, os.RemoveAll(cm.cur))
	}
	cm.cur = ts
}

// waitLog waits for the n-th line of the sidecar's log that contains want.
func waitLog(t *testing.T, s *sidecar, want string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Count(s.logs(), want) >= n }, 20*time.Second, 20*time.Millisecond,
		"%q not logged %d times\n%s", want, n, s.logs())
}

func TestPoliciesReloadWhenTheConfigMapChanges(t *testing.T) {
	policies := func(limit string) map[string]string {
		return map[string]string{"policies.yaml": "policies:\n  - {name: p, key: 'header:K', limit: " + limit + ", scale: 1m}\n"}
	}
	dir := filepath.Join(t.TempDir(), "config")
	cm := newConfigMap(t, dir, policies("2"))
	s := start(t, nil, "-policies", filepath.Join(dir, "policies.yaml"), "-policies-only")
	for range 2 {
		require.Equal(t, 200, s.get(t, "/check_rate?policy=p&id=a").status)
	}
	require.Equal(t, 429, s.get(t, "/check_rate?policy=p&id=a").status)

	// No signal: the swap alone reloads, and the count is kept.
	cm.update(policies("5"))
	waitLog(t, s, "policies reloaded", 1)
	r := s.get(t, "/check_rate?policy=p&id=a")
	assert.Equal(t, 200, r.status, "the new limit, and the count kept: 4 of 5")
	assert.Equal(t, `"p";q=5;w=60`, r.header.Get("RateLimit-Policy"))

	// A bad new file keeps the rules in force.
	cm.update(map[string]string{"policies.yaml": "policies: [\n"})
	waitLog(t, s, "policies not reloaded", 1)
	assert.Equal(t, 200, s.get(t, "/check_rate?policy=p&id=a").status, "5 of 5 under the rules in force")
	assert.Equal(t, 429, s.get(t, "/check_rate?policy=p&id=a").status)
	assert.Contains(t, s.get(t, "/metrics").body, `raterlimiter_policy_reloads_total{result="failed"}`)

	// And a good one after it is taken again.
	cm.update(policies("7"))
	waitLog(t, s, "policies reloaded", 2)
	r = s.get(t, "/check_rate?policy=p&id=a")
	assert.Equal(t, 200, r.status, "7 of 7")
	assert.Equal(t, `"p";q=7;w=60`, r.header.Get("RateLimit-Policy"))

	// A file written beside it that is not the policies (a snapshot, an
	// editor's backup) reloads nothing.
	reloads := strings.Count(s.logs(), "policies reloaded")
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "other"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "..data", "..ignored"), []byte("x"), 0o600))
	time.Sleep(3 * watchSettle)
	assert.Equal(t, reloads, strings.Count(s.logs(), "policies reloaded"))
	require.NoError(t, s.stop(t))
}

func TestPoliciesReloadWhenEditedInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, writeFile(path, "policies:\n  - {name: p, key: 'header:K', limit: 1, scale: 1m}\n"))
	s := start(t, nil, "-policies", path, "-policies-only")
	require.Equal(t, 200, s.get(t, "/check_rate?policy=p&id=a").status)
	require.Equal(t, 429, s.get(t, "/check_rate?policy=p&id=a").status)
	// An editor that saves by writing a temporary file and renaming it.
	require.NoError(t, writeFile(path+".tmp", "policies:\n  - {name: p, key: 'header:K', limit: 3, scale: 1m}\n"))
	require.NoError(t, os.Rename(path+".tmp", path))
	waitLog(t, s, "policies reloaded", 1)
	assert.Equal(t, 200, s.get(t, "/check_rate?policy=p&id=a").status, "3 of 3")
	require.NoError(t, s.stop(t))
}

func TestPoliciesNotWatchedWhenTurnedOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, writeFile(path, "policies:\n  - {name: p, key: 'header:K', limit: 1, scale: 1m}\n"))
	s := start(t, nil, "-policies", path, "-policies-only", "-watch-files=false")
	require.NoError(t, writeFile(path, "policies:\n  - {name: p, key: 'header:K', limit: 3, scale: 1m}\n"))
	time.Sleep(3 * watchSettle)
	assert.NotContains(t, s.logs(), "policies reloaded")
	assert.Equal(t, `"p";q=1;w=60`, s.get(t, "/check_rate?policy=p&id=a").header.Get("RateLimit-Policy"))
	require.NoError(t, s.stop(t))
}

// TestRLSConfigReloadWhenTheRuntimeRootSwaps lays the configuration out as
// envoyproxy/ratelimit's runtime does (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
// config), with the root a symlink that a deployment swaps to a new
// directory, and the config directory itself a ConfigMap volume.
func TestRLSConfigReloadWhenTheRuntimeRootSwaps(t *testing.T) {
	base := t.TempDir()
	domain := func(rpu string) string {
		return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: " + rpu + "}\n"
	}
	layout := func(version, rpu string) {
		dir := filepath.Join(base, version, "ratelimit", "config")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), domain(rpu)))
	}
	layout("v1", "1")
	require.NoError(t, os.Symlink("v1", filepath.Join(base, "current")))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(base, "current", "ratelimit", "config"))
	conn, err := grpc.NewClient(s.listenAddr(t, "rls"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	c := rlspb.NewRateLimitServiceClient(conn)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 1, unit: day, remaining: 0})
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), true, st{over: true, rpu: 1, unit: day})

	// The root swapped atomically to a new version.
	layout("v2", "5")
	require.NoError(t, os.Symlink("v2", filepath.Join(base, "current.tmp")))
	require.NoError(t, os.Rename(filepath.Join(base, "current.tmp"), filepath.Join(base, "current")))
	waitLog(t, s, "rls: configuration reloaded", 1)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 5, unit: day, remaining: 2})

	// A file added in the directory the root now names is read too.
	require.NoError(t, writeFile(filepath.Join(base, "v2", "ratelimit", "config", "e.yaml"),
		"domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"))
	waitLog(t, s, "rls: configuration reloaded", 2)
	checkRLS(t, ask(t, c, "e", 0, desc("k", "v")), false, st{rpu: 1, unit: day, remaining: 0})

	// A bad version keeps the rules in force.
	layout("v3", "x")
	require.NoError(t, os.Symlink("v3", filepath.Join(base, "current.tmp")))
	require.NoError(t, os.Rename(filepath.Join(base, "current.tmp"), filepath.Join(base, "current")))
	waitLog(t, s, "rls configuration not reloaded", 1)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 5, unit: day, remaining: 1})
	require.NoError(t, s.stop(t))
}

func TestRLSConfigReloadWhenTheConfigMapChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	cm := newConfigMap(t, dir, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"})
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", dir)
	conn, err := grpc.NewClient(s.listenAddr(t, "rls"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	c := rlspb.NewRateLimitServiceClient(conn)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 1, unit: day, remaining: 0})
	cm.update(map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 4}\n"})
	waitLog(t, s, "rls: configuration reloaded", 1)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 4, unit: day, remaining: 2})
	require.NoError(t, s.stop(t))
}

func TestCertificateReloadWhenItsFilesChange(t *testing.T) {
	dir := t.TempDir()
	first := newPKI(t, dir, "first", 1)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	copyFile(t, first.certFile, cert)
	copyFile(t, first.keyFile, key)
	s := start(t, nil, "-tls-cert", cert, "-tls-key", key)
	require.Equal(t, 0, servedSerial(t, s.addr).Cmp(first.serial))
	second := newPKI(t, dir, "second", 2)
	copyFile(t, second.certFile, cert)
	copyFile(t, second.keyFile, key)
	require.Eventually(t, func() bool { return servedSerial(t, s.addr).Cmp(second.serial) == 0 }, 20*time.Second, 20*time.Millisecond,
		"the new certificate not served\n%s", s.logs())
	// The pair is stored before the line is logged: wait for the line.
	waitLog(t, s, "file changed: certificate reloaded", 1)
	require.NoError(t, s.stop(t))
}
