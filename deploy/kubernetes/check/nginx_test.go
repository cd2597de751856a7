package check

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ingressNginxAuth is the snippet's auth-url annotation and the auth-method
// beside it (which makes ingress-nginx send X-Original-URI).
var (
	ingressNginxAuth   = regexp.MustCompile(`nginx\.ingress\.kubernetes\.io/auth-url: "([^"]+)"`)
	ingressNginxMethod = regexp.MustCompile(`nginx\.ingress\.kubernetes\.io/auth-method: GET`)
)

// authURLIn is the gateway's /auth as text (a manifest's comments, the
// chart's notes) tells ingress-nginx.
func authURLIn(t *testing.T, text string) string {
	t.Helper()
	m := ingressNginxAuth.FindStringSubmatch(text)
	require.NotNil(t, m, "the ingress-nginx snippet names the gateway's /auth")
	assert.Regexp(t, ingressNginxMethod, text, "the snippet sets auth-method, or ingress-nginx sends no X-Original-URI")
	return m[1]
}

// needNginx finds nginx: locally the test skips without it, under CI=true
// it fails.
func needNginx(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("nginx is not installed: .ci/run installs nginx-light")
	}
	t.Skip("nginx is not installed: apt-get install nginx-light to run this test")
	return ""
}

// ingressNginxConf is the auth location ingress-nginx writes for an
// Ingress with the snippet's annotations (auth-url and auth-method: GET),
// in front of an app: the subrequest's headers as its template sets them,
// Host the auth-url's own.
const ingressNginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen 127.0.0.1:%[2]d;
        location / {
            auth_request /_external-auth;
            proxy_pass http://127.0.0.1:%[3]d;
        }
        location = /_external-auth {
            internal;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Forwarded-Proto "";
            proxy_method GET;
            proxy_set_header X-Original-URI $request_uri;
            proxy_set_header X-Scheme $scheme;
            proxy_set_header Host %[4]s;
            proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
            proxy_set_header X-Original-Method $request_method;
            proxy_set_header X-Sent-From "nginx-ingress-controller";
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Auth-Request-Redirect $request_uri;
            proxy_http_version 1.1;
            proxy_pass http://127.0.0.1:%[5]d%[6]s;
        }
    }
}
`

// checkAuthThroughNginx runs a real nginx set up as ingress-nginx is for
// the snippet's authURL, in front of an app, with the gateway p behind
// authURL's Service: the first policy lets its limit through to the app
// and then denies with 403 (the app never sees those), and a request no
// policy matches passes.
func checkAuthThroughNginx(t *testing.T, p *pod, w workload, authURL string) {
	t.Helper()
	require.Equal(t, "nginx", w.args["auth-headers"], "the ingress-nginx snippet needs -auth-headers=nginx")
	bin := needNginx(t)
	u, err := url.Parse(authURL)
	require.NoError(t, err)
	assert.Equal(t, "/auth", u.Path)
	assert.Equal(t, "403", u.Query().Get("deny_status"), "ingress-nginx passes on 401 and 403 only")
	// The URL's host is the Service: its port leads to the gateway's.
	svcName, _, _ := strings.Cut(u.Hostname(), ".")
	svc, _ := w.set.find("Service", svcName).(*corev1.Service)
	require.NotNil(t, svc, "auth-url names Service %s", svcName)
	svcPort, err := strconv.Atoi(u.Port())
	require.NoError(t, err, authURL)
	var gwPort int32
	for _, sp := range svc.Spec.Ports {
		if sp.Port == int32(svcPort) {
			gwPort = targetPort(t, w.container, sp)
		}
	}
	local, ok := p.ports[gwPort]
	require.True(t, ok, "auth-url's port %d leads to the gateway's port", svcPort)

	var reached atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		rw.Write([]byte("app"))
	}))
	defer app.Close()
	_, appPort, err := net.SplitHostPort(app.Listener.Addr().String())
	require.NoError(t, err)
	ap, err := strconv.Atoi(appPort)
	require.NoError(t, err)

	dir, err := os.MkdirTemp("", "k8snginx")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	proxyPort := freePort(t)
	conf := fmt.Sprintf(ingressNginxConf, dir, proxyPort, ap, u.Host, local, u.RequestURI())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644))
	ngx := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	out := &syncBuffer{}
	ngx.Stdout, ngx.Stderr = out, out
	require.NoError(t, ngx.Start())
	t.Cleanup(func() { ngx.Process.Kill(); ngx.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", proxyPort), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		require.True(t, time.Now().Before(deadline), "nginx never listened: %s", out)
		time.Sleep(50 * time.Millisecond)
	}

	// The first policy of the gateway's file, by the address nginx gives.
	_, v := mountOf(t, w, w.args["policies"])
	cm := w.set.find("ConfigMap", v.ConfigMap.Name).(*corev1.ConfigMap)
	var f struct {
		Policies []struct {
			Key   any `json:"key"`
			Limit int `json:"limit"`
			Match struct {
				Methods    []string `json:"methods"`
				PathPrefix string   `json:"path_prefix"`
			} `json:"match"`
		} `json:"policies"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data[filepath.Base(w.args["policies"])]), &f))
	require.NotEmpty(t, f.Policies)
	pol := f.Policies[0]
	require.Equal(t, "ip", pol.Key, "the first policy counts by address")
	require.True(t, pol.Limit > 0 && pol.Limit <= 100, "a limit this test can reach: %d", pol.Limit)
	method := http.MethodGet
	if len(pol.Match.Methods) > 0 {
		method = pol.Match.Methods[0]
	}
	target := base + pol.Match.PathPrefix + "k8s-check"
	send := func(method, target string) int {
		t.Helper()
		req, err := http.NewRequest(method, target, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range pol.Limit {
		require.Equal(t, http.StatusOK, send(method, target), "%s %s #%d, allowed; nginx wrote:\n%s", method, target, i+1, out)
	}
	assert.Equal(t, http.StatusForbidden, send(method, target), "over the limit: the gateway's 403, passed on")
	assert.Equal(t, int64(pol.Limit), reached.Load(), "the app sees the allowed requests only")
	assert.Equal(t, http.StatusOK, send(http.MethodGet, base+"/matched-by-no-policy"))
	if _, ok := w.args["admin-listen"]; ok {
		code, body := p.adminGet(t, "/metrics")
		require.Equal(t, http.StatusOK, code)
		assert.Regexp(t, `raterlimiter_checks_total\{[^}]*result="denied",via="auth"\} 1\n`, body, "/auth counted the denial")
	}
}
