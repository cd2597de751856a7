package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const rlsDayConfig = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2}\n"

// clientCA is a CA that signs client certificates.
type clientCA struct {
	file string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newClientCA(t *testing.T, dir, name string) clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	file := filepath.Join(dir, name+".pem")
	writePEM(t, file, "CERTIFICATE", der)
	return clientCA{file: file, cert: cert, key: key}
}

// issue makes a client certificate signed by ca that names uri.
func (ca clientCA) issue(t *testing.T, uri string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	u, err := url.Parse(uri)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "envoy"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), URIs: []*url.URL{u},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// rlsClient dials the RLS at target with creds.
func rlsClient(t *testing.T, target string, creds credentials.TransportCredentials) rlspb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

// refused asks once and returns the error, which must be one.
func refused(t *testing.T, c rlspb.RateLimitServiceClient) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "v")}})
	require.Error(t, err)
	return err
}

func TestRLSOverTLS(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t, dir, "rls", 11)
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsDayConfig))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "d.yaml"),
		"-rls-tls-cert", pki.certFile, "-rls-tls-key", pki.keyFile)
	addr := s.listenAddr(t, "rls")

	c := rlsClient(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pki.pool, ServerName: "localhost"}))
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 1})

	// Plaintext is refused: nothing is counted.
	err := refused(t, rlsClient(t, addr, insecure.NewCredentials()))
	t.Logf("plaintext: %v", err)
	// A client that does not trust the certificate does not talk to it.
	err = refused(t, rlsClient(t, addr, credentials.NewTLS(&tls.Config{ServerName: "localhost"})))
	t.Logf("untrusted: %v", err)
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 0})
	require.NoError(t, s.stop(t))
}

func TestRLSOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t, dir, "rls", 12)
	ca := newClientCA(t, dir, "clients")
	other := newClientCA(t, dir, "strangers")
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsDayConfig))
	const envoyID = "spiffe://cluster.local/ns/edge/sa/envoy"
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "d.yaml"),
		"-rls-tls-cert", pki.certFile, "-rls-tls-key", pki.keyFile,
		"-rls-tls-client-ca", ca.file, "-rls-tls-client-san", envoyID)
	addr := s.listenAddr(t, "rls")
	// The client sends its certificate whatever the server asks for, as
	// an attacker's would.
	with := func(certs ...tls.Certificate) rlspb.RateLimitServiceClient {
		return rlsClient(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pki.pool, ServerName: "localhost",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if len(certs) == 0 {
					return &tls.Certificate{}, nil
				}
				return &certs[0], nil
			}}))
	}

	// Hostile first: no certificate, one from another CA, one of the right
	// CA that names someone else.
	t.Logf("no client certificate: %v", refused(t, with()))
	t.Logf("another CA: %v", refused(t, with(other.issue(t, envoyID))))
	t.Logf("another name: %v", refused(t, with(ca.issue(t, "spiffe://cluster.local/ns/edge/sa/app"))))

	c := with(ca.issue(t, envoyID))
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 1}) // the refused calls counted nothing

	// The CA rotated (its Secret updated): new connections are verified
	// against the new bundle, without a restart.
	pem, err := os.ReadFile(other.file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(ca.file+".tmp", pem, 0o600))
	require.NoError(t, os.Rename(ca.file+".tmp", ca.file))
	waitLog(t, s, "RLS client CA reloaded", 1)
	t.Logf("the old CA after the rotation: %v", refused(t, with(ca.issue(t, envoyID))))
	checkRLS(t, ask(t, with(other.issue(t, envoyID)), "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 0})
	require.NoError(t, s.stop(t))
}

func TestRLSOnUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "rls.sock")
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsDayConfig))
	s := start(t, nil, "-rls-listen", "unix:"+sock, "-rls-config", filepath.Join(dir, "d.yaml"), "-unix-mode", "0600")
	s.listenAddr(t, "rls")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	c := rlsClient(t, "unix:"+sock, insecure.NewCredentials())
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 1})
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 0})
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), true, st{over: true, rpu: 2, unit: day})

	// gRPC health answers on the socket too, for a probe.
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)

	require.NoError(t, s.stop(t))
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err), "the socket file is removed on shutdown")
}

func TestRLSGlobalShadowMode(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsDayConfig))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "d.yaml"), "-rls-shadow-mode")
	c := rlsClient(t, s.listenAddr(t, "rls"), insecure.NewCredentials())
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 1})
	checkRLS(t, ask(t, c, "d", 0, desc("k", "v")), false, st{rpu: 2, unit: day, remaining: 0})
	// Over the limit: the descriptor says so, the overall code does not.
	resp := ask(t, c, "d", 0, desc("k", "v"))
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	require.Len(t, resp.Statuses, 1)
	assert.Equal(t, rlspb.RateLimitResponse_OVER_LIMIT, resp.Statuses[0].Code)
	assert.Contains(t, s.get(t, "/metrics").body, `result="shadow_denied"`)
	require.NoError(t, s.stop(t))
}

func TestRLSTransportFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsDayConfig))
	base := []string{"-listen", "127.0.0.1:0", "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "d.yaml")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rls-tls-cert", "c.pem"}, "-rls-tls-cert and -rls-tls-key go together"},
		{[]string{"-rls-tls-client-ca", "ca.pem"}, "-rls-tls-client-ca needs -rls-tls-cert"},
		{[]string{"-rls-tls-cert", "c.pem", "-rls-tls-key", "k.pem", "-rls-tls-client-san", "x"}, "-rls-tls-client-san needs -rls-tls-client-ca"},
	} {
		code, _, errOut := runBinary(t, nil, append(base, tc.args...)...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Contains(t, errOut, tc.want)
	}
	code, _, errOut := runBinary(t, nil, append(base, "-rls-tls-cert", filepath.Join(dir, "none.pem"), "-rls-tls-key", filepath.Join(dir, "none.pem"))...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "-rls-tls-cert")
}
