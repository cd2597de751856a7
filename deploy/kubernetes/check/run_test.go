package check

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// sidecarBin is the sidecar built from the repository by TestMain.
var sidecarBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "k8scheck")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin = filepath.Join(dir, "raterlimiter")
	cmd := exec.Command("go", "build", "-o", sidecarBin, "./cmd/raterlimiter")
	cmd.Dir = filepath.Join("..", "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/raterlimiter: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pod is a container run here as the kubelet would run it: its volumes
// written under a directory of its own (ConfigMaps and Secrets in the
// kubelet's layout, ..data swapped on update), its TCP addresses moved to
// free loopback ports.
type pod struct {
	set    set
	spec   corev1.PodSpec
	c      corev1.Container
	root   string
	mounts map[string]string // mount path → directory here
	ports  map[int32]int32   // the manifest's port → the one here
	env    []string
	args   []string
	proc   *exec.Cmd
	out    *syncBuffer
	done   chan struct{} // closed when proc has ended
}

// syncBuffer is what the sidecar writes, read while it writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

// writeVolume writes files in dir as the kubelet's atomic writer does:
// dir/..<version>/name, dir/..data → ..<version>, dir/name → ..data/name.
func writeVolume(t *testing.T, dir string, files map[string][]byte, version int) {
	t.Helper()
	ts := fmt.Sprintf("..v%d", version)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ts), 0o755))
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ts, name), b, 0o644))
	}
	tmp := filepath.Join(dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "..data")))
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), link))
		}
	}
	if version > 1 {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, fmt.Sprintf("..v%d", version-1))))
	}
}

func configMapFiles(cm *corev1.ConfigMap) map[string][]byte {
	files := map[string][]byte{}
	for k, v := range cm.Data {
		files[k] = []byte(v)
	}
	return files
}

// newPod lays out the volumes c mounts from spec and rewrites its args and
// environment. secrets are the Secrets s does not hold (made by hand before
// applying it), by name.
func newPod(t *testing.T, s set, spec corev1.PodSpec, c corev1.Container, secrets map[string]*corev1.Secret) *pod {
	t.Helper()
	root, err := os.MkdirTemp("", "k8spod") // short: a unix socket's path is at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	p := &pod{set: s, spec: spec, c: c, root: root, mounts: map[string]string{}, ports: map[int32]int32{}}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	secret := func(name string) *corev1.Secret {
		if s, _ := s.find("Secret", name).(*corev1.Secret); s != nil {
			return s
		}
		require.Contains(t, secrets, name, "Secret %s", name)
		return secrets[name]
	}
	for i, m := range c.VolumeMounts {
		dir := filepath.Join(root, strconv.Itoa(i))
		p.mounts[m.MountPath] = dir
		v, ok := vols[m.Name]
		require.True(t, ok, "volume %s", m.Name)
		switch {
		case v.EmptyDir != nil:
			require.NoError(t, os.Mkdir(dir, 0o755))
		case v.ConfigMap != nil:
			cm, _ := s.find("ConfigMap", v.ConfigMap.Name).(*corev1.ConfigMap)
			require.NotNil(t, cm, "ConfigMap %s", v.ConfigMap.Name)
			writeVolume(t, dir, configMapFiles(cm), 1)
		case v.Secret != nil:
			sec := secret(v.Secret.SecretName)
			files := map[string][]byte{}
			for k, b := range sec.Data {
				files[k] = b
			}
			for k, b := range sec.StringData {
				files[k] = []byte(b)
			}
			writeVolume(t, dir, files, 1)
		default:
			t.Fatalf("volume %s: a kind this test does not lay out", m.Name)
		}
	}
	for _, a := range c.Args {
		name, value, _ := strings.Cut(a, "=")
		if strings.HasSuffix(name, "listen") && !strings.HasPrefix(value, "unix:") {
			_, port := splitPort(t, value)
			p.ports[port] = freePort(t)
			a = fmt.Sprintf("%s=127.0.0.1:%d", name, p.ports[port])
		}
		p.args = append(p.args, p.path(a))
	}
	p.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			sec := secret(ref.Name)
			v, ok := sec.Data[ref.Key]
			if !ok {
				v = []byte(sec.StringData[ref.Key])
			}
			p.env = append(p.env, e.Name+"="+string(v))
		case e.ValueFrom != nil:
			t.Fatalf("env %s: a source this test does not read", e.Name)
		default:
			p.env = append(p.env, e.Name+"="+e.Value)
		}
	}
	return p
}

// path rewrites the mount paths in s to their directories here.
func (p *pod) path(s string) string {
	paths := make([]string, 0, len(p.mounts))
	for m := range p.mounts {
		paths = append(paths, m)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, m := range paths {
		if strings.HasSuffix(s, m) {
			return strings.TrimSuffix(s, m) + p.mounts[m]
		}
		if strings.Contains(s, m+"/") {
			return strings.Replace(s, m+"/", p.mounts[m]+"/", 1)
		}
	}
	return s
}

// loopback rewrites the loopback addresses in s to their ports here.
func (p *pod) loopback(s string) string {
	return loopbackAddr.ReplaceAllStringFunc(s, func(addr string) string {
		port, _ := strconv.Atoi(strings.TrimPrefix(addr, "127.0.0.1:"))
		if local, ok := p.ports[int32(port)]; ok {
			return fmt.Sprintf("127.0.0.1:%d", local)
		}
		return addr
	})
}

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// run runs the sidecar with args to its end, in the pod's environment.
func (p *pod) run(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sidecarBin, args...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err, "%s", out)
	return 0, string(out)
}

// checkFlags has the binary parse and check the container's args and
// environment (-version parses and checks every flag, then exits), and
// finds each RATERLIMITER_ variable in -h.
func (p *pod) checkFlags(t *testing.T) {
	t.Helper()
	code, out := p.run(t, 30*time.Second, append(append([]string{}, p.args...), "-version")...)
	require.Equal(t, 0, code, "the sidecar refuses %v: %s", p.c.Args, out)
	assert.True(t, strings.HasPrefix(out, "raterlimiter "), out)
	code, help := p.run(t, 30*time.Second, "-h")
	require.Equal(t, 0, code, help)
	for _, e := range p.c.Env {
		if strings.HasPrefix(e.Name, "RATERLIMITER_") {
			assert.Contains(t, help, "("+e.Name+", default ", "no flag reads %s", e.Name)
		}
	}
}

// start runs the sidecar as the pod's container.
func (p *pod) start(t *testing.T) {
	t.Helper()
	p.out = &syncBuffer{}
	p.proc = exec.Command(sidecarBin, p.args...)
	p.proc.Env = p.env
	p.proc.Stdout, p.proc.Stderr = p.out, p.out
	require.NoError(t, p.proc.Start())
	p.done = make(chan struct{})
	go func() { p.proc.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.proc.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.proc.Process.Kill()
			<-p.done
		}
	})
}

// probe runs one probe as the kubelet does and reports whether it passed.
func (p *pod) probe(t *testing.T, pr *corev1.Probe) error {
	t.Helper()
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	switch {
	case pr.Exec != nil:
		cmd := pr.Exec.Command
		require.Equal(t, sidecarPath, cmd[0])
		var args []string
		for _, a := range cmd[1:] {
			args = append(args, p.loopback(p.path(a)))
		}
		if code, out := p.run(t, timeout+5*time.Second, args...); code != 0 {
			return fmt.Errorf("%v: exit status %d: %s", cmd, code, out)
		}
		return nil
	case pr.HTTPGet != nil:
		port := pr.HTTPGet.Port.IntVal
		if name := pr.HTTPGet.Port.StrVal; name != "" {
			port = containerPort(t, p.c, name)
		}
		local, ok := p.ports[port]
		require.True(t, ok, "the probe's port %d is one the container listens on", port)
		c := http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", local, pr.HTTPGet.Path))
		if err != nil {
			return err
		}
		resp.Body.Close()
		// The kubelet's rule: 200 to 399 passes.
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s", pr.HTTPGet.Path, resp.Status)
		}
		return nil
	}
	t.Fatalf("a probe this test does not run")
	return nil
}

// waitStarted runs the startup probe until it passes (bounded by its own
// failureThreshold × periodSeconds), then the readiness and liveness probes.
func (p *pod) waitStarted(t *testing.T) {
	t.Helper()
	c := p.c
	sp := c.StartupProbe
	deadline := time.Now().Add(time.Duration(max(sp.FailureThreshold, 1)*max(sp.PeriodSeconds, 1)) * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = p.probe(t, sp); err == nil {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("the sidecar ended before its startup probe passed (%v):\n%s", p.proc.ProcessState, p.out)
		default:
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err, "startup probe; the sidecar wrote:\n%s", p.out)
	require.NoError(t, p.probe(t, c.ReadinessProbe), "readiness probe")
	require.NoError(t, p.probe(t, c.LivenessProbe), "liveness probe")
}

// adminGet asks the admin listener (-admin-listen, else -listen: on
// loopback or a socket, where the admin endpoints answer) for path,
// without a token.
func (p *pod) adminGet(t *testing.T, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	args := parseArgs(t, p.c.Args)
	url := "http://localhost" + path
	addr, ok := args["admin-listen"]
	if !ok && !strings.HasPrefix(args["listen"], "unix:") {
		addr, ok = args["listen"], true
	}
	if ok {
		_, port := splitPort(t, addr)
		url = fmt.Sprintf("http://127.0.0.1:%d%s", p.ports[port], path)
	} else {
		sock, ok := strings.CutPrefix(p.path(args["listen"]), "unix:")
		require.True(t, ok, "without -admin-listen, the admin endpoints are on a unix -listen")
		c.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
	}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// gauge reads one unlabelled series from /metrics.
func (p *pod) gauge(t *testing.T, name string) float64 {
	t.Helper()
	code, body := p.adminGet(t, "/metrics")
	require.Equal(t, http.StatusOK, code, "/metrics without a token: %s", body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	require.NotNil(t, m, "%s in /metrics", name)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// waitGauge waits (bounded) for a series to reach want.
func (p *pod) waitGauge(t *testing.T, name string, want float64) {
	t.Helper()
	var got float64
	for range 150 {
		if got = p.gauge(t, name); got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s = %v, want %v after the ConfigMap's update; the sidecar wrote:\n%s", name, got, want, p.out)
}

// runEnv is what runWorkload needs beside the workload.
type runEnv struct {
	// secrets are the Secrets made by hand before applying the set.
	secrets map[string]*corev1.Secret
	// serve: run the process, not only check its flags and files (a Redis
	// one is only checked: no Redis here).
	serve bool
	// authURL is the gateway's /auth as the proxy's snippet names it.
	authURL string
}

// runWorkload checks w against the binary: its flags parse, its files
// load (the binary's own checks), it starts, its probes pass, /metrics
// answers on the metrics port without a token (the rest with one only),
// the gateway's /auth answers through nginx, the RLS speaks the TLS it is
// given, and a ConfigMap update is reloaded without a restart.
func runWorkload(t *testing.T, w workload, r runEnv) {
	t.Helper()
	p := newPod(t, w.set, w.dep.Spec.Template.Spec, w.container, r.secrets)
	p.checkFlags(t)
	// The binary's own checks, beside the container's flags (which may
	// change what loads: -rls-merge-domains).
	if w.shape == shapeRLS {
		code, out := p.run(t, 30*time.Second, append(append([]string{}, p.args...), "-check-rls-config", p.path(w.args["rls-config"]))...)
		require.Equal(t, 0, code, "the ConfigMap's RLS configuration loads with the binary's loader: %s", out)
	} else {
		code, out := p.run(t, 30*time.Second, append(append([]string{}, p.args...), "-check-policies", p.path(w.args["policies"]))...)
		require.Equal(t, 0, code, "the ConfigMap's policies load with the binary's loader: %s", out)
	}
	if !r.serve {
		return
	}
	p.start(t)
	p.waitStarted(t)
	if _, ok := w.args["admin-listen"]; ok {
		code, body := p.adminGet(t, "/buckets")
		assert.Equal(t, http.StatusUnauthorized, code, "/buckets needs the admin token: %s", body)
	}
	if w.shape == shapeRLS && w.args["rls-tls-cert"] != "" {
		checkRLSTLS(t, p, w)
	}
	if w.shape == shapeGateway && w.args["auth-headers"] == "nginx" {
		require.NotEmpty(t, r.authURL, "the proxy's snippet names the gateway's /auth")
		checkAuthThroughNginx(t, p, w, r.authURL)
	}
	// Update the ConfigMap as the kubelet does (a new ..data), with one
	// rule more, and see the process take it.
	var path, series string
	var files map[string][]byte
	if w.shape == shapeRLS {
		path, series = w.args["rls-config"], "raterlimiter_rls_rules"
		_, v := mountOf(t, w, path)
		files = configMapFiles(w.set.find("ConfigMap", v.ConfigMap.Name).(*corev1.ConfigMap))
		files["zz-reloaded.yaml"] = []byte("domain: reloaded\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	} else {
		path, series = w.args["policies"], "raterlimiter_policies"
		_, v := mountOf(t, w, path)
		files = configMapFiles(w.set.find("ConfigMap", v.ConfigMap.Name).(*corev1.ConfigMap))
		var f map[string]any
		name := filepath.Base(path)
		require.NoError(t, yaml.Unmarshal(files[name], &f))
		pols := f["policies"].([]any)
		extra := map[string]any{"name": "reloaded", "match": map[string]any{"path_prefix": "/reloaded/"}, "key": "ip", "limit": 1, "scale": "1s"}
		f["policies"] = append(pols, extra)
		b, err := yaml.Marshal(f)
		require.NoError(t, err)
		files[name] = b
	}
	before := p.gauge(t, series)
	m, _ := mountOf(t, w, path)
	writeVolume(t, p.mounts[m.MountPath], files, 2)
	p.waitGauge(t, series, before+1)
	require.NoError(t, p.probe(t, w.container.LivenessProbe), "liveness after the reload")
	require.NoError(t, p.probe(t, w.container.ReadinessProbe), "readiness after the reload")
}

// testRun is what one container of a test pod said.
type testRun struct {
	name string
	code int
	out  string
}

// runTestPods runs the chart's test pods (helm test) as the kubelet would,
// each container to its end.
func runTestPods(t *testing.T, s set, secrets map[string]*corev1.Secret) []testRun {
	t.Helper()
	var runs []testRun
	for _, o := range s.all("Pod") {
		tp := o.(*corev1.Pod)
		if tp.Annotations["helm.sh/hook"] != "test" {
			continue
		}
		assert.Equal(t, corev1.RestartPolicyNever, tp.Spec.RestartPolicy, "%s: a test runs once", tp.Name)
		for _, c := range tp.Spec.Containers {
			p := newPod(t, s, tp.Spec, c, secrets)
			code, out := p.run(t, 30*time.Second, p.args...)
			runs = append(runs, testRun{tp.Name + "/" + c.Name, code, out})
		}
	}
	return runs
}
