package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	rlclient "github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// testPKI is a CA and a server certificate it signed, written as PEM files.
type testPKI struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	serial                    *big.Int
}

// newPKI makes a CA and a certificate for 127.0.0.1 and localhost in dir,
// under names prefixed by name.
func newPKI(t *testing.T, dir, name string, serial int64) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial * 1000), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	p := testPKI{
		caFile:   filepath.Join(dir, name+"-ca.pem"),
		certFile: filepath.Join(dir, name+"-cert.pem"),
		keyFile:  filepath.Join(dir, name+"-key.pem"),
		pool:     x509.NewCertPool(),
		serial:   big.NewInt(serial),
	}
	p.pool.AddCert(ca)
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	writePEM(t, p.certFile, "CERTIFICATE", der)
	writePEM(t, p.keyFile, "PRIVATE KEY", keyDER)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

// checkThrough makes one check through the Go client at url and returns it.
func checkThrough(t *testing.T, cfg rlclient.Config, id string) rl.Decision {
	t.Helper()
	c, err := rlclient.New(cfg)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 5, Hits: 1})
	require.NoError(t, err)
	return d
}

// curl runs the real curl and returns its output (body, then the status).
func curl(t *testing.T, args ...string) string {
	t.Helper()
	bin := tooltest.Need(t, "curl", "curl")
	out, err := exec.Command(bin, append([]string{"-sS", "--max-time", "10", "-w", "\n%{http_code}"}, args...)...).CombinedOutput()
	require.NoError(t, err, "curl %v: %s", args, out)
	return string(out)
}

func TestE2ETLS(t *testing.T) {
	dir := t.TempDir()
	first := newPKI(t, dir, "first", 1)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	copyFile(t, first.certFile, cert)
	copyFile(t, first.keyFile, key)
	s := start(t, nil, "-tls-cert", cert, "-tls-key", key, "-watch-files=false")
	url := "https://" + s.addr

	d := checkThrough(t, rlclient.Config{URL: url, TLSConfig: &tls.Config{RootCAs: first.pool}}, "tls-a")
	assert.True(t, d.Allowed)
	assert.EqualValues(t, 1, d.Count)
	out := curl(t, "--cacert", first.caFile, url+"/check_rate?id=tls-a&scale=60000&limit=5")
	assert.True(t, strings.HasSuffix(out, "\n200"), out)
	assert.Contains(t, out, `"count":2`)

	// A new certificate from another CA, then SIGHUP: the sidecar serves it.
	second := newPKI(t, dir, "second", 2)
	copyFile(t, second.certFile, cert)
	copyFile(t, second.keyFile, key)
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(10 * time.Second)
	for servedSerial(t, s.addr).Cmp(second.serial) != 0 {
		require.True(t, time.Now().Before(deadline), "certificate not reloaded 10 s after SIGHUP\n%s", s.logs())
		time.Sleep(20 * time.Millisecond)
	}
	d = checkThrough(t, rlclient.Config{URL: url, TLSConfig: &tls.Config{RootCAs: second.pool}}, "tls-a")
	assert.EqualValues(t, 3, d.Count, "the counters survive the reload")
	out = curl(t, "--cacert", second.caFile, url+"/healthz")
	assert.Equal(t, "ok\n200", out)

	// A broken pair on SIGHUP keeps the previous certificate.
	require.NoError(t, os.WriteFile(cert, []byte("not a certificate"), 0o600))
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(s.logs(), "certificate not reloaded") {
		require.True(t, time.Now().Before(deadline), "no warning 10 s after SIGHUP\n%s", s.logs())
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, 0, servedSerial(t, s.addr).Cmp(second.serial))
	require.NoError(t, s.stop(t))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to+".tmp", b, 0o600))
	require.NoError(t, os.Rename(to+".tmp", to))
}

// servedSerial is the serial number of the certificate served at addr.
func servedSerial(t *testing.T, addr string) *big.Int {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	require.NoError(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

func TestE2EUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "rl.sock")

	// A stale socket file, as a crash leaves it: nothing listens on it.
	stale, err := net.Listen("unix", sock)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())
	_, err = os.Stat(sock)
	require.NoError(t, err, "the stale socket file is there")

	s := start(t, nil, "-listen", "unix:"+sock, "-unix-mode", "0600")
	assert.Contains(t, s.logs(), "removing a stale socket file")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSocket, fi.Mode().Type())
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())

	d := checkThrough(t, rlclient.Config{URL: "unix:" + sock}, "sock-a")
	assert.EqualValues(t, 1, d.Count)
	d = checkThrough(t, rlclient.Config{URL: "unix:" + sock, BatchMaxSize: 10}, "sock-a")
	assert.EqualValues(t, 2, d.Count)
	out := curl(t, "--unix-socket", sock, "http://localhost/check_rate?id=sock-a&scale=60000&limit=5")
	assert.True(t, strings.HasSuffix(out, "\n200"), out)
	assert.Contains(t, out, `"count":3`)

	// A second sidecar on the same live socket refuses to start.
	code, _, stderr := runBinary(t, nil, "-listen", "unix:"+sock)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "another process serves on this socket")

	require.NoError(t, s.stop(t))
	_, err = os.Stat(sock)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the socket file is removed on shutdown")
}

func TestListenFlagsValidate(t *testing.T) {
	for _, tt := range []struct {
		args []string
		bad  bool
	}{
		{[]string{"-unix-mode", "0660"}, false},
		{[]string{"-tls-cert", "c", "-tls-key", "k"}, false},
		{[]string{"-tls-cert", "c"}, true},
		{[]string{"-tls-key", "k"}, true},
		{[]string{"-unix-mode", "rw"}, true},
		{[]string{"-unix-mode", "01777"}, true},
		{[]string{"-unix-mode", "0999"}, true},
	} {
		var c config
		err := c.parse(tt.args, noEnv)
		assert.Equal(t, tt.bad, err != nil, "%q: %v", tt.args, err)
	}
}
