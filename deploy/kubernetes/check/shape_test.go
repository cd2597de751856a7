package check

import (
	"net"
	"net/url"
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
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// sidecarPath is where deploy/Dockerfile puts the binary.
const sidecarPath = "/usr/local/bin/raterlimiter"

// The shapes a raterlimiter container comes in.
const (
	shapeSidecar = "sidecar" // a native sidecar in an app's pod, on a unix socket
	shapeGateway = "gateway" // a shared HTTP service (/auth, checks by policy)
	shapeRLS     = "rls"     // Envoy's shared rate limit service (gRPC)
)

// workload is the raterlimiter container of a Deployment, and what it needs.
type workload struct {
	set       set
	dep       *appsv1.Deployment
	container corev1.Container
	args      map[string]string // -name=value, by name
	shape     string
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
		require.NotNil(t, d.Spec.Selector, "%s: a selector", d.Name)
		require.NotEmpty(t, d.Spec.Selector.MatchLabels, "%s: a selector", d.Name)
		require.True(t, selects(d.Spec.Selector, d.Spec.Template.Labels), "%s: the selector matches its pods", d.Name)
		var found []workload
		for _, c := range pod.InitContainers {
			if c.Name == "raterlimiter" {
				found = append(found, workload{set: s, dep: d, container: c, args: parseArgs(t, c.Args), shape: shapeSidecar})
			}
		}
		for _, c := range pod.Containers {
			if c.Name == "raterlimiter" {
				w := workload{set: s, dep: d, container: c, args: parseArgs(t, c.Args), shape: shapeGateway}
				if _, ok := w.args["rls-listen"]; ok {
					w.shape = shapeRLS
				}
				found = append(found, w)
			}
		}
		require.Len(t, found, 1, "%s: one raterlimiter container", d.Name)
		w := found[0]
		switch w.shape {
		case shapeSidecar:
			checkSidecar(t, w)
		case shapeGateway:
			checkGateway(t, w)
		case shapeRLS:
			checkRLS(t, w)
		}
		if w.shape != shapeSidecar {
			checkShared(t, w)
		}
		checkHardening(t, w)
		checkMemory(t, w)
		checkMetrics(t, w)
		out = append(out, w)
	}
	return out
}

// selects reports whether sel selects a pod with podLabels.
func selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
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

// probeTarget is what a probe asks: an exec of the binary's own probe
// (-healthcheck URL) or the kubelet's GET; path is the health check.
type probeTarget struct {
	exec string // -healthcheck's URL, for an exec probe
	port string // httpGet's port (a name or a number)
	path string
}

// checkProbes: every probe asks the binary's health checks, startup and
// liveness /livez (the process serves: a backend that is down is no reason
// to restart it), readiness /readyz (the backend answers); check sees each
// probe's target.
func checkProbes(t *testing.T, w workload, check func(name string, p *corev1.Probe, target probeTarget)) {
	t.Helper()
	c := w.container
	for _, pr := range []struct {
		name, path string
		p          *corev1.Probe
	}{{"startup", "/livez", c.StartupProbe}, {"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/livez", c.LivenessProbe}} {
		require.NotNil(t, pr.p, "%s: a %s probe", w.dep.Name, pr.name)
		var target probeTarget
		switch {
		case pr.p.Exec != nil:
			cmd := pr.p.Exec.Command
			require.GreaterOrEqual(t, len(cmd), 3, pr.name)
			assert.Equal(t, []string{sidecarPath, "-healthcheck"}, cmd[:2], "%s: no shell nor curl in the image: an exec of the binary", pr.name)
			target.exec = cmd[2]
			if rest, ok := strings.CutPrefix(target.exec, "unix:"); ok {
				_, path, _ := strings.Cut(rest, ":/")
				target.path = "/" + path
			} else {
				u, err := url.Parse(target.exec)
				require.NoError(t, err, pr.name)
				target.path = u.Path
			}
			hcTimeout := 1.0 // -healthcheck-timeout's default
			for _, a := range cmd[3:] {
				if v, ok := strings.CutPrefix(a, "-healthcheck-timeout="); ok {
					d, err := time.ParseDuration(v)
					require.NoError(t, err)
					hcTimeout = d.Seconds()
				}
			}
			assert.Greater(t, float64(pr.p.TimeoutSeconds), hcTimeout, "%s: timeoutSeconds above -healthcheck-timeout", pr.name)
		case pr.p.HTTPGet != nil:
			target.port, target.path = pr.p.HTTPGet.Port.String(), pr.p.HTTPGet.Path
			assert.GreaterOrEqual(t, pr.p.TimeoutSeconds, int32(1), pr.name)
		default:
			t.Fatalf("%s: %s probe: an exec of the binary or an httpGet", w.dep.Name, pr.name)
		}
		assert.Equal(t, pr.path, target.path, "%s: the %s probe asks %s", w.dep.Name, pr.name, pr.path)
		check(pr.name, pr.p, target)
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
	checkProbes(t, w, func(name string, _ *corev1.Probe, target probeTarget) {
		assert.Equal(t, listen+":"+target.path, target.exec, "%s: through the socket", name)
	})
}

// checkGateway: the HTTP API beyond the pod on a port a Service exposes,
// /auth reading one proxy's headers, probed by the kubelet's GET, its
// policies from a ConfigMap, one replica on memory.
func checkGateway(t *testing.T, w workload) {
	t.Helper()
	assert.Nil(t, w.container.RestartPolicy)
	host, port := splitPort(t, w.args["listen"])
	assert.Equal(t, "0.0.0.0", host, "the gateway answers beyond the pod")
	assert.Equal(t, port, containerPort(t, w.container, "http"))
	assert.Contains(t, []string{"nginx", "traefik", "caddy"}, w.args["auth-headers"], "/auth reads one proxy's headers")
	require.NotEmpty(t, w.args["policies"])
	checkConfigMapFile(t, w, w.args["policies"], false)
	checkProbes(t, w, func(name string, _ *corev1.Probe, target probeTarget) {
		assert.Equal(t, "http", target.port, "%s: the kubelet GETs the gateway's port", name)
	})
	checkService(t, w, port, "http")
}

// checkRLS: the RLS on a TCP port a Service exposes as gRPC, the HTTP API
// on loopback for the probes (an exec of the binary: they hold whatever
// TLS the RLS port speaks), its configuration from a ConfigMap.
func checkRLS(t *testing.T, w workload) {
	t.Helper()
	assert.Nil(t, w.container.RestartPolicy)
	host, port := splitPort(t, w.args["rls-listen"])
	assert.Equal(t, "0.0.0.0", host, "the RLS answers beyond the pod")
	require.NotEmpty(t, w.args["rls-config"])
	checkConfigMapFile(t, w, w.args["rls-config"], true)
	assert.Equal(t, port, containerPort(t, w.container, "grpc"))
	api := w.args["listen"]
	apiHost, _ := splitPort(t, api)
	assert.Equal(t, "127.0.0.1", apiHost, "the HTTP API stays in the pod")
	checkProbes(t, w, func(name string, _ *corev1.Probe, target probeTarget) {
		assert.Equal(t, "http://"+api+target.path, target.exec, "%s: the HTTP API on loopback", name)
	})
	for _, f := range []string{"rls-tls-cert", "rls-tls-key", "rls-tls-client-ca"} {
		if path, ok := w.args[f]; ok {
			_, v := mountOf(t, w, path)
			require.NotNil(t, v.Secret, "-%s comes from a Secret", f)
		}
	}
	checkService(t, w, port, "grpc")
}

// checkService: a Service selects the pods and exposes port under name,
// as the protocol (Istio reads it from the name and appProtocol).
func checkService(t *testing.T, w workload, port int32, name string) {
	t.Helper()
	var exposed bool
	for _, o := range w.set.all("Service") {
		svc := o.(*corev1.Service)
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.dep.Spec.Template.Labels)) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if targetPort(t, w.container, sp) == port {
				exposed = true
				assert.Equal(t, name, sp.Name, "Istio reads the protocol from the port's name")
				require.NotNil(t, sp.AppProtocol)
				assert.Equal(t, name, *sp.AppProtocol)
			}
		}
	}
	assert.True(t, exposed, "%s: a Service exposes port %d", w.dep.Name, port)
}

// checkShared: a shared service (gateway, RLS) counts on one replica on
// memory, and a NetworkPolicy lets only labelled clients reach its port
// and only a named namespace its metrics.
func checkShared(t *testing.T, w workload) {
	t.Helper()
	if backend := w.args["backend"]; backend == "" || backend == "memory" {
		replicas := int32(1)
		if w.dep.Spec.Replicas != nil {
			replicas = *w.dep.Spec.Replicas
		}
		assert.Equal(t, int32(1), replicas, "memory replicas would count apart")
	}
	served := "grpc"
	if w.shape == shapeGateway {
		served = "http"
	}
	var found bool
	for _, o := range w.set.all("NetworkPolicy") {
		np := o.(*networkingv1.NetworkPolicy)
		if !selects(&np.Spec.PodSelector, w.dep.Spec.Template.Labels) {
			continue
		}
		found = true
		assert.Contains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		ports := map[string]bool{}
		for _, rule := range np.Spec.Ingress {
			require.NotEmpty(t, rule.From, "%s: a rule without from lets everyone in", np.Name)
			require.NotEmpty(t, rule.Ports, "%s: a rule without ports opens every port", np.Name)
			for _, p := range rule.Ports {
				require.NotNil(t, p.Port)
				name := p.Port.String()
				ports[name] = true
				for _, peer := range rule.From {
					assert.Nil(t, peer.IPBlock, "%s: clients by label, not by address", np.Name)
					switch name {
					case served:
						require.NotNil(t, peer.PodSelector, "%s: port %s only from labelled pods", np.Name, name)
						assert.NotEmpty(t, peer.PodSelector.MatchLabels, "%s: port %s only from labelled pods", np.Name, name)
					case "metrics":
						assert.Nil(t, peer.PodSelector, "%s: metrics from a namespace", np.Name)
						require.NotNil(t, peer.NamespaceSelector)
						assert.NotEmpty(t, peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"], "%s: metrics from one named namespace", np.Name)
					default:
						t.Errorf("%s: port %s opened", np.Name, name)
					}
				}
			}
		}
		assert.True(t, ports[served], "%s: the clients reach port %s", np.Name, served)
		if _, ok := w.args["admin-listen"]; ok {
			assert.True(t, ports["metrics"], "%s: Prometheus reaches the metrics port", np.Name)
		}
	}
	assert.True(t, found, "%s: a NetworkPolicy selects the pods", w.dep.Name)
}

// checkSpread: the chart's shared services survive a drain (a
// PodDisruptionBudget) and spread over nodes and zones.
func checkSpread(t *testing.T, w workload) {
	t.Helper()
	var pdbs int
	for _, o := range w.set.all("PodDisruptionBudget") {
		pdb := o.(*policyv1.PodDisruptionBudget)
		if selects(pdb.Spec.Selector, w.dep.Spec.Template.Labels) {
			pdbs++
			assert.Nil(t, pdb.Spec.MinAvailable, "minAvailable would block every drain of a single replica")
			require.NotNil(t, pdb.Spec.MaxUnavailable)
		}
	}
	assert.Equal(t, 1, pdbs, "%s: one PodDisruptionBudget", w.dep.Name)
	keys := map[string]bool{}
	for _, c := range w.dep.Spec.Template.Spec.TopologySpreadConstraints {
		assert.True(t, selects(c.LabelSelector, w.dep.Spec.Template.Labels), "%s: spread over its own pods", c.TopologyKey)
		keys[c.TopologyKey] = true
	}
	assert.True(t, keys["kubernetes.io/hostname"], "spread over nodes")
	assert.True(t, keys["topology.kubernetes.io/zone"], "spread over zones")
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

// portName is the name of the container's port number n.
func portName(t *testing.T, c corev1.Container, n int32) string {
	t.Helper()
	for _, p := range c.Ports {
		if p.ContainerPort == n {
			require.NotEmpty(t, p.Name, "port %d is named", n)
			return p.Name
		}
	}
	t.Fatalf("container %s has no port %d", c.Name, n)
	return ""
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
// The user is the container's or, failing that, the pod's; a shared
// service's pod mounts no API token (an app's pod is the app's affair).
func checkHardening(t *testing.T, w workload) {
	t.Helper()
	pod := w.dep.Spec.Template.Spec
	sc := w.container.SecurityContext
	require.NotNil(t, sc)
	nonRoot, user := sc.RunAsNonRoot, sc.RunAsUser
	if w.shape != shapeSidecar && pod.SecurityContext != nil {
		nonRoot, user = cmpOr(nonRoot, pod.SecurityContext.RunAsNonRoot), cmpOr(user, pod.SecurityContext.RunAsUser)
	}
	require.NotNil(t, nonRoot, "runAsNonRoot")
	assert.True(t, *nonRoot)
	require.NotNil(t, user, "runAsUser")
	assert.NotZero(t, *user)
	if w.shape != shapeSidecar {
		require.NotNil(t, pod.AutomountServiceAccountToken)
		assert.False(t, *pod.AutomountServiceAccountToken, "raterlimiter needs no API token")
	}
	require.NotNil(t, sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
	assert.True(t, sc.Privileged == nil || !*sc.Privileged)
}

// cmpOr is a unless it is nil, else b.
func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
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
// on a named container port, found by the scrape annotations or a monitor
// of the set.
func checkMetrics(t *testing.T, w workload) {
	t.Helper()
	addr, ok := w.args["admin-listen"]
	if !ok {
		return
	}
	_, port := splitPort(t, addr)
	name := portName(t, w.container, port)
	require.NotEmpty(t, w.args["admin-token-file"], "an -admin-listen beyond loopback needs a token")
	_, v := mountOf(t, w, w.args["admin-token-file"])
	require.NotNil(t, v.Secret, "the token comes from a Secret")
	ann := w.dep.Spec.Template.Annotations
	annotated := ann["prometheus.io/scrape"] == "true"
	if annotated {
		assert.Equal(t, strconv.Itoa(int(port)), ann["prometheus.io/port"])
		assert.Equal(t, "/metrics", ann["prometheus.io/path"])
	}
	podLabels := w.dep.Spec.Template.Labels
	monitored := false
	for _, o := range w.set.all("PodMonitor") {
		pm := o.(*monitoringv1.PodMonitor)
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		require.NoError(t, err)
		if !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
		e := pm.Spec.PodMetricsEndpoints[0]
		require.NotNil(t, e.Port)
		if *e.Port == name {
			monitored = true
			checkJob(t, e.RelabelConfigs)
		}
	}
	for _, o := range w.set.all("ServiceMonitor") {
		sm := o.(*monitoringv1.ServiceMonitor)
		for _, so := range w.set.all("Service") {
			svc := so.(*corev1.Service)
			if !selects(&sm.Spec.Selector, svc.Labels) || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
				continue
			}
			monitored = true
			require.Len(t, sm.Spec.Endpoints, 1)
			e := sm.Spec.Endpoints[0]
			assert.True(t, slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
				return sp.Name == e.Port && targetPort(t, w.container, sp) == port
			}), "Service %s exposes the metrics port as %s", svc.Name, e.Port)
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
