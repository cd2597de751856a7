package check

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
)

// clientSAN is the name the RLS's clients carry in the tests (a SPIFFE id,
// as a mesh gives its workloads).
const clientSAN = "spiffe://cluster.local/ns/default/sa/envoy"

// testPKI is a CA, a serving pair for 127.0.0.1 in a kubernetes.io/tls
// Secret (tls.crt, tls.key, ca.crt, as cert-manager writes it), and client
// pairs with and without clientSAN.
type testPKI struct {
	secret         *corev1.Secret
	pool           *x509.CertPool
	client, notSAN tls.Certificate
}

var pki = sync.OnceValues(func() (*testPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "k8s check CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	issue := func(serial int64, tmpl *x509.Certificate) (tls.Certificate, []byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, nil, nil, err
		}
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), now.Add(-time.Hour), now.Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return tls.Certificate{}, nil, nil, err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return tls.Certificate{}, nil, nil, err
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		return pair, certPEM, keyPEM, err
	}
	_, srvCert, srvKey, err := issue(2, &x509.Certificate{Subject: pkix.Name{CommonName: "rls"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil, err
	}
	spiffe, err := url.Parse(clientSAN)
	if err != nil {
		return nil, err
	}
	client, _, _, err := issue(3, &x509.Certificate{Subject: pkix.Name{CommonName: "envoy"}, URIs: []*url.URL{spiffe},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	other, err := url.Parse("spiffe://cluster.local/ns/default/sa/other")
	if err != nil {
		return nil, err
	}
	notSAN, _, _, err := issue(4, &x509.Certificate{Subject: pkix.Name{CommonName: "other"}, URIs: []*url.URL{other},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return &testPKI{
		secret: &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{
			"tls.crt": srvCert, "tls.key": srvKey, "ca.crt": caPEM}},
		pool: pool, client: client, notSAN: notSAN,
	}, nil
})

// healthOver asks the RLS port's grpc.health.v1 over TLS, presenting certs.
func healthOver(t *testing.T, addr string, pool *x509.CertPool, certs ...tls.Certificate) error {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc health: %v", resp.Status)
	}
	return nil
}

// checkRLSTLS: the RLS port speaks TLS with the Secret's pair and, with a
// client CA, answers only clients whose certificate chains to it (and
// names -rls-tls-client-san when given).
func checkRLSTLS(t *testing.T, p *pod, w workload) {
	t.Helper()
	k, err := pki()
	require.NoError(t, err)
	_, port := splitPort(t, w.args["rls-listen"])
	addr := fmt.Sprintf("127.0.0.1:%d", p.ports[port])
	if w.args["rls-tls-client-ca"] == "" {
		assert.NoError(t, healthOver(t, addr, k.pool), "TLS without a client certificate")
		return
	}
	assert.NoError(t, healthOver(t, addr, k.pool, k.client), "mutual TLS with a client certificate")
	assert.Error(t, healthOver(t, addr, k.pool), "mutual TLS: no client certificate, no answer")
	if w.args["rls-tls-client-san"] != "" {
		assert.Error(t, healthOver(t, addr, k.pool, k.notSAN), "a client certificate without -rls-tls-client-san's name")
	}
}
