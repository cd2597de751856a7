package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartTLS starts a single-node redis-server that speaks TLS only, with a
// certificate for 127.0.0.1 made for the test, and registers its stop with
// t.Cleanup. ClientTLS returns the settings that trust it; URL returns a
// rediss:// URL. Extra arguments (e.g. --requirepass) are passed on.
func StartTLS(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir()}
	certFile, keyFile, pool := selfSigned(t, s.dir)
	s.tls = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	s.tlsArgs = []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", certFile,
		"--tls-auth-clients", "no"}
	s.startFresh(t, extra)
	return s
}

// ClientTLS returns TLS settings that trust a StartTLS server, or nil for a
// plain one.
func (s *Server) ClientTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Clone()
}

// selfSigned writes a self-signed certificate and key for 127.0.0.1 into dir.
func selfSigned(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
