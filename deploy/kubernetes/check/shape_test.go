package check

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// sidecarPath is where deploy/Dockerfile puts the binary.
const sidecarPath = "/usr/local/bin/raterlimiter"

// workload is the raterlimiter container of a Deployment, and what it needs.
type workload struct {
	set       set
	dep       *appsv1.Deployment
	container corev1.Container
	args      map[string]string // -name=value, by name
	rls       bool              // the shared RLS shape, else the sidecar
}

// parseArgs reads a container's args, each -name=value (or -name for a
// boolean): the manifests keep that one form.
func parseArgs(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		require.True(t, strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--"), "arg %q: -name=value", a)
		name, value, ok := strings.Cut(a[1:], "=")
		if !ok {
			value = "true"
		}
		_, dup := m[name]
		require.False(t, dup, "-%s given twice", name)
		m[name] = value
	}
	return m
}

// workloads finds the raterlimiter containers of s's Deployments and checks
// each against its shape.
func workloads(t *testing.T, s set) []workload {
	t.Helper()
	var out []workload
	for _, o := range s.all("Deployment") {
		d := o.(*appsv1.Deployment)
		pod := d.Spec.Template.Spec
		sel, err := metav1LabelSelector(d)
		require.NoError(t, err)
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s: the selector matches its pods", d.Name)
		var found []workload
		for _, c := range pod.InitContainers {
			if c.Name == "raterlimiter" {
				found = append(found, workload{set: s, dep: d, container: c, args: parseArgs(t, c.Args)})
			}
		}
		for _, c := range pod.Containers {
			if c.Name == "raterlimiter" {
				found = append(found, workload{set: s, dep: d, container: c, args: parseArgs(t, c.Args), rls: true})
			}
		}
		require.Len(t, found, 1, "%s: one raterlimiter container", d.Name)
		w := found[0]
		if w.rls {
			checkRLS(t, w)
		} else {
			checkSidecar(t, w)
		}
		checkHardening(t, w)
		checkMemory(t, w)
		checkMetrics(t, w)
		out = append(out, w)
	}
	return out
}

func metav1LabelSelector(d *appsv1.Deployment) (labels.Selector, error) {
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		return nil, fmt.Errorf("%s: no selector", d.Name)
	}
	return labels.SelectorFromSet(d.Spec.Selector.MatchLabels), nil
}

// mountOf is the volume mounted at the longest mount path path lies under.
func mountOf(t *testing.T, w workload, path string) (corev1.VolumeMount, corev1.Volume) {
	t.Helper()
	var best corev1.VolumeMount
	for _, m := range w.container.VolumeMounts {
		if (path == m.MountPath || strings.HasPrefix(path, m.MountPath+"/")) && len(m.MountPath) > len(best.MountPath) {
			best = m
		}
	}
	require.NotEmpty(t, best.Name, "%s: no volume mounted where %s is", w.dep.Name, path)
	for _, v := range w.dep.Spec.Template.Spec.Volumes {
		if v.Name == best.Name {
			return best, v
		}
	}
	t.Fatalf("%s: no volume %s", w.dep.Name, best.Name)
	return best, corev1.Volume{}
}

// checkConfigMapFile checks path is a file of a ConfigMap volume the
// kubelet updates in place (no subPath) and the ConfigMap is in the set.
func checkConfigMapFile(t *testing.T, w workload, path string, dir bool) *corev1.ConfigMap {
	t.Helper()
	m, v := mountOf(t, w, path)
	require.NotNil(t, v.ConfigMap, "%s is on a ConfigMap", path)
	assert.Empty(t, m.SubPath, "a subPath mount is never updated: %s would not reload", path)
	assert.True(t, m.ReadOnly)
	cm, _ := w.set.find("ConfigMap", v.ConfigMap.Name).(*corev1.ConfigMap)
	require.NotNil(t, cm, "ConfigMap %s is in the set", v.ConfigMap.Name)
	if dir {
		assert.Equal(t, m.MountPath, path)
		require.NotEmpty(t, cm.Data)
		for k := range cm.Data {
			assert.True(t, strings.HasSuffix(k, ".yaml"), "%s: only *.yaml files are read", k)
		}
	} else {
		assert.Equal(t, m.MountPath, filepath.Dir(path))
		assert.Contains(t, cm.Data, filepath.Base(path))
	}
	return cm
}

func checkProbes(t *testing.T, w workload, check func(name string, p *corev1.Probe)) {
	t.Helper()
	c := w.container
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		require.NotNil(t, p, "%s: a %s probe", w.dep.Name, name)
		check(name, p)
	}
}

// checkSidecar: a native sidecar on a unix socket the app is told, probed
// by the binary itself, its policies from a ConfigMap.
func checkSidecar(t *testing.T, w workload) {
	t.Helper()
	c := w.container
	pod := w.dep.Spec.Template.Spec
	require.NotNil(t, c.RestartPolicy)
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *c.RestartPolicy, "a native sidecar")
	require.NotEmpty(t, pod.Containers, "the app")
	listen := w.args["listen"]
	require.True(t, strings.HasPrefix(listen, "unix:"), "-listen on a unix socket")
	sock := strings.TrimPrefix(listen, "unix:")
	m, v := mountOf(t, w, sock)
	require.NotNil(t, v.EmptyDir, "the socket lives in an emptyDir")
	assert.Equal(t, filepath.Dir(sock), m.MountPath)
	for _, app := range pod.Containers {
		assert.Contains(t, app.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: m.MountPath}, "%s mounts the socket's directory", app.Name)
		assert.Contains(t, app.Env, corev1.EnvVar{Name: "RATERLIMITER_URL", Value: listen}, "%s is told the socket", app.Name)
	}
	require.NotEmpty(t, w.args["policies"])
	checkConfigMapFile(t, w, w.args["policies"], false)
	checkProbes(t, w, func(name string, p *corev1.Probe) {
		require.NotNil(t, p.Exec, "%s: no shell nor curl in the image: an exec of the binary", name)
		cmd := p.Exec.Command
		require.GreaterOrEqual(t, len(cmd), 3, name)
		assert.Equal(t, []string{sidecarPath, "-healthcheck", listen}, cmd[:3], name)
		hcTimeout := 1.0 // -healthcheck-timeout's default
		for _, a := range cmd[3:] {
			if v, ok := strings.CutPrefix(a, "-healthcheck-timeout="); ok {
				d, err := time.ParseDuration(v)
				require.NoError(t, err)
				hcTimeout = d.Seconds()
			}
		}
		assert.Greater(t, float64(p.TimeoutSeconds), hcTimeout, "%s: timeoutSeconds above -healthcheck-timeout", name)
	})
}

// checkRLS: the RLS on a TCP port a Service exposes as gRPC, probed over
// grpc.health.v1, its configuration from a ConfigMap, one replica on memory.
func checkRLS(t *testing.T, w workload) {
	t.Helper()
	c := w.container
	assert.Nil(t, c.RestartPolicy)
	host, port := splitPort(t, w.args["rls-listen"])
	assert.Equal(t, "0.0.0.0", host, "the RLS answers beyond the pod")
	require.NotEmpty(t, w.args["rls-config"])
	checkConfigMapFile(t, w, w.args["rls-config"], true)
	backend := w.args["backend"]
	if backend == "" || backend == "memory" {
		replicas := int32(1)
		if w.dep.Spec.Replicas != nil {
			replicas = *w.dep.Spec.Replicas
		}
		assert.Equal(t, int32(1), replicas, "memory replicas would count apart")
	}
	cport := containerPort(t, c, "grpc")
	assert.Equal(t, port, cport)
	checkProbes(t, w, func(name string, p *corev1.Probe) {
		require.NotNil(t, p.GRPC, "%s: a grpc probe", name)
		assert.Equal(t, port, p.GRPC.Port, name)
		assert.GreaterOrEqual(t, p.TimeoutSeconds, int32(1), name)
	})
	// A Service selects the pods and exposes the port as gRPC.
	var exposed bool
	for _, o := range w.set.all("Service") {
		svc := o.(*corev1.Service)
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.dep.Spec.Template.Labels)) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if targetPort(t, c, sp) == port {
				exposed = true
				assert.Equal(t, "grpc", sp.Name, "Istio reads the protocol from the port's name")
				require.NotNil(t, sp.AppProtocol)
				assert.Equal(t, "grpc", *sp.AppProtocol)
			}
		}
	}
	assert.True(t, exposed, "%s: a Service exposes the RLS port", w.dep.Name)
}

func splitPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	n, err := strconv.Atoi(p)
	require.NoError(t, err, addr)
	return host, int32(n)
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, name)
	return 0
}

func targetPort(t *testing.T, c corev1.Container, sp corev1.ServicePort) int32 {
	t.Helper()
	if sp.TargetPort.StrVal != "" {
		for _, p := range c.Ports {
			if p.Name == sp.TargetPort.StrVal {
				return p.ContainerPort
			}
		}
		return -1
	}
	if sp.TargetPort.IntVal != 0 {
		return sp.TargetPort.IntVal
	}
	return sp.Port
}

// checkHardening: non-root, read-only root file system, no capabilities.
func checkHardening(t *testing.T, w workload) {
	t.Helper()
	pod := w.dep.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext)
	require.NotNil(t, pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.RunAsUser)
	assert.NotZero(t, *pod.SecurityContext.RunAsUser)
	require.NotNil(t, pod.AutomountServiceAccountToken)
	assert.False(t, *pod.AutomountServiceAccountToken, "the sidecar needs no API token")
	sc := w.container.SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
	assert.True(t, sc.Privileged == nil || !*sc.Privileged)
}

// Memory figures of the memory backend (memory's package doc): a record
// rounded up by the allocator by at most an eighth, up to ~19 MB of denied
// ids a shard, and room for buffers and the runtime.
const (
	deniedPerShard = 19 << 20
	runtimeRoom    = 32 << 20
	defaultBytes   = 256 << 20 // -max-bucket-bytes's default
)

// checkMemory: requests and a memory limit, and a memory backend bounded
// to fit under GOMEMLIMIT, itself under the limit.
func checkMemory(t *testing.T, w workload) {
	t.Helper()
	r := w.container.Resources
	require.Contains(t, r.Requests, corev1.ResourceCPU)
	require.Contains(t, r.Requests, corev1.ResourceMemory)
	require.Contains(t, r.Limits, corev1.ResourceMemory)
	limit := r.Limits.Memory().Value()
	var goMemLimit int64
	for _, e := range w.container.Env {
		if e.Name == "GOMEMLIMIT" {
			q, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
			require.NoError(t, err, "GOMEMLIMIT %q", e.Value)
			goMemLimit = q.Value()
		}
	}
	require.NotZero(t, goMemLimit, "%s: GOMEMLIMIT set", w.dep.Name)
	assert.Less(t, goMemLimit, limit, "GOMEMLIMIT under the memory limit")
	if b := w.args["backend"]; b != "" && b != "memory" {
		return
	}
	bytes := int64(defaultBytes)
	if v, ok := w.args["max-bucket-bytes"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		bytes = n
	}
	require.Contains(t, w.args, "shards", "-shards set: its default follows the node's CPUs, and each shard holds memory")
	shards, err := strconv.Atoi(w.args["shards"])
	require.NoError(t, err)
	live := bytes*9/8 + int64(shards)*deniedPerShard + runtimeRoom
	assert.Less(t, live, goMemLimit, "-max-bucket-bytes %d on %d shards: %d bytes live at worst, GOMEMLIMIT %d", bytes, shards, live, goMemLimit)
}

// checkMetrics: -admin-listen beyond loopback with a token from a Secret,
// on the container's port "metrics", found by the scrape annotations or a
// monitor of the set.
func checkMetrics(t *testing.T, w workload) {
	t.Helper()
	addr, ok := w.args["admin-listen"]
	if !ok {
		return
	}
	_, port := splitPort(t, addr)
	assert.Equal(t, port, containerPort(t, w.container, "metrics"))
	require.NotEmpty(t, w.args["admin-token-file"], "an -admin-listen beyond loopback needs a token")
	_, v := mountOf(t, w, w.args["admin-token-file"])
	require.NotNil(t, v.Secret, "the token comes from a Secret")
	ann := w.dep.Spec.Template.Annotations
	annotated := ann["prometheus.io/scrape"] == "true"
	if annotated {
		assert.Equal(t, strconv.Itoa(int(port)), ann["prometheus.io/port"])
		assert.Equal(t, "/metrics", ann["prometheus.io/path"])
	}
	podLabels := labels.Set(w.dep.Spec.Template.Labels)
	monitored := false
	for _, o := range w.set.all("PodMonitor") {
		pm := o.(*monitoringv1.PodMonitor)
		if labels.SelectorFromSet(pm.Spec.Selector.MatchLabels).Matches(podLabels) {
			monitored = true
			require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
			e := pm.Spec.PodMetricsEndpoints[0]
			require.NotNil(t, e.Port)
			assert.Equal(t, "metrics", *e.Port)
			checkJob(t, e.RelabelConfigs)
		}
	}
	for _, o := range w.set.all("ServiceMonitor") {
		sm := o.(*monitoringv1.ServiceMonitor)
		for _, so := range w.set.all("Service") {
			svc := so.(*corev1.Service)
			if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) ||
				!labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
				continue
			}
			monitored = true
			require.Len(t, sm.Spec.Endpoints, 1)
			e := sm.Spec.Endpoints[0]
			assert.Equal(t, "metrics", e.Port)
			assert.True(t, slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
				return sp.Name == e.Port && targetPort(t, w.container, sp) == port
			}), "Service %s exposes the metrics port", svc.Name)
			checkJob(t, e.RelabelConfigs)
		}
	}
	assert.True(t, annotated || monitored, "%s: scraped by annotations or a monitor", w.dep.Name)
}

// checkJob: the monitor scrapes as job="raterlimiter", the alerts' job.
func checkJob(t *testing.T, rs []monitoringv1.RelabelConfig) {
	t.Helper()
	assert.True(t, slices.ContainsFunc(rs, func(r monitoringv1.RelabelConfig) bool {
		return r.TargetLabel == "job" && r.Replacement != nil && *r.Replacement == "raterlimiter"
	}), "job=\"raterlimiter\", as deploy/prometheus/alerts.yml reads")
}
