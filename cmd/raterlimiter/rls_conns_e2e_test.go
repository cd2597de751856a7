package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// The connection bounds of the RLS listener against an attacker that
// fills them: 16 addresses holding 64 idle connections each (all of
// -rls-max-conns, 1,024), and addresses that re-dial stalled TLS
// handshakes. A fresh connection, as an Envoy that restarts or scales out
// opens, must still be answered, or Envoy lets its requests through.

// holdIdle opens n connections to addr from the local address from that
// finish their handshake (TLS with tc, when not nil, then the HTTP/2
// preface and settings, acknowledged by the server) and then send nothing.
func holdIdle(from, addr string, n int, tc *tls.Config) ([]net.Conn, error) {
	var conns []net.Conn
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return conns, err
		}
		conns = append(conns, c)
		if tc != nil {
			tlc := tls.Client(c, tc)
			conns[len(conns)-1] = tlc
			c = tlc
		}
		if err := http2Handshake(c); err != nil {
			return conns, fmt.Errorf("%s, connection %d: %w", from, len(conns), err)
		}
	}
	return conns, nil
}

// http2Handshake sends the client preface and empty settings on c and
// reads until the server acknowledges them.
func http2Handshake(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, clientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		return err
	}
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return err
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			return err
		}
		if hdr[3] == 0x4 && hdr[4]&0x1 != 0 { // SETTINGS, ACK
			return nil
		}
	}
}

// fillConns holds 64 idle connections from each of 16 addresses, all of
// -rls-max-conns, and waits until the sidecar counts them; release closes
// them.
func fillConns(t *testing.T, s *sidecar, addr string, tc *tls.Config) (release func()) {
	t.Helper()
	var mu sync.Mutex
	var held []net.Conn
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for a := range 16 {
		wg.Go(func() {
			conns, err := holdIdle("127.0.0."+strconv.Itoa(100+a), addr, 64, tc)
			mu.Lock()
			held = append(held, conns...)
			mu.Unlock()
			errs <- err
		})
	}
	wg.Wait()
	release = func() {
		for _, c := range held {
			c.Close()
		}
	}
	t.Cleanup(release)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s.WaitUntil(t, 10*time.Second, "1,024 RLS connections held", func() bool {
		v, err := tryMetric(s, "raterlimiter_rls_connections")
		return err == nil && v == 1024
	})
	return release
}

// freshCall dials a new connection from the local address from and makes
// one call on it, which must be answered within 1 s (Envoy's own timeout
// for the service is often far less). The connection stays open until the
// test ends.
func freshCall(t *testing.T, from, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := rlspb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "d",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", from)}})
	if err != nil {
		return err
	}
	if resp.OverallCode != rlspb.RateLimitResponse_OK {
		return errors.New("answered " + resp.String())
	}
	return nil
}

const rlsConnsConfig = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1000000}\n"

func TestRLSIdleConnectionsGiveWayInPlaintext(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsConnsConfig))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "d.yaml"))
	addr := s.listenAddr(t, "rls")
	t0 := time.Now()
	release := fillConns(t, s, addr, nil)
	t.Logf("1,024 idle connections held in %v", time.Since(t0))
	for i := range 8 {
		assert.NoError(t, freshCall(t, "127.0.0."+strconv.Itoa(200+i), addr, insecure.NewCredentials()), "fresh connection %d", i)
	}
	assert.Equal(t, 8.0, metric(t, s, "raterlimiter_rls_connections_evicted_total"), "each fresh connection took an idle one's place")
	assert.Equal(t, 1024.0, metric(t, s, "raterlimiter_rls_connections"))
	release() // a graceful stop would wait for them
	require.NoError(t, s.stop(t))
}

// startMutualTLS runs the sidecar's RLS with mutual TLS; it returns the
// address and the TLS configuration of a client the CA vouches for.
func startMutualTLS(t *testing.T) (*sidecar, string, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	pki := newPKI(t, dir, "rls", 21)
	ca := newClientCA(t, dir, "clients")
	require.NoError(t, writeFile(filepath.Join(dir, "d.yaml"), rlsConnsConfig))
	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", filepath.Join(dir, "d.yaml"),
		"-rls-tls-cert", pki.certFile, "-rls-tls-key", pki.keyFile, "-rls-tls-client-ca", ca.file)
	cert := ca.issue(t, "spiffe://cluster.local/ns/edge/sa/envoy")
	return s, s.listenAddr(t, "rls"), &tls.Config{RootCAs: pki.pool, ServerName: "localhost", Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
}

func TestRLSIdleConnectionsGiveWayWithMutualTLS(t *testing.T) {
	s, addr, tc := startMutualTLS(t)
	t0 := time.Now()
	release := fillConns(t, s, addr, tc)
	t.Logf("1,024 idle connections held in %v", time.Since(t0))
	for i := range 8 {
		assert.NoError(t, freshCall(t, "127.0.0."+strconv.Itoa(200+i), addr, credentials.NewTLS(tc)), "fresh connection %d", i)
	}
	assert.Equal(t, 8.0, metric(t, s, "raterlimiter_rls_connections_evicted_total"), "each fresh connection took an idle one's place")
	assert.Equal(t, 1024.0, metric(t, s, "raterlimiter_rls_connections"))
	release() // a graceful stop would wait for them
	require.NoError(t, s.stop(t))
}

// TestRLSStalledHandshakesLeaveRoom: 17 addresses, each with 64 dialers
// that connect, send nothing (a stalled ClientHello) and dial again as soon
// as the sidecar closes them (after 200 ms when it closed them at once, as
// a client retrying), hold at most their handshake budget each: 1,088
// stalled handshakes would take all of -rls-max-conns. Every fresh dial
// meanwhile is answered.
func TestRLSStalledHandshakesLeaveRoom(t *testing.T) {
	s, addr, tc := startMutualTLS(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var dials atomic.Int64
	for a := range 17 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0." + strconv.Itoa(100+a))}}
		for range 64 {
			wg.Go(func() {
				for ctx.Err() == nil {
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						continue
					}
					dials.Add(1)
					t0 := time.Now()
					stop := context.AfterFunc(ctx, func() { c.Close() })
					_, _ = c.Read(make([]byte, 1)) // until the sidecar closes it
					stop()
					c.Close()
					if time.Since(t0) < 100*time.Millisecond {
						time.Sleep(200 * time.Millisecond)
					}
				}
			})
		}
	}
	time.Sleep(3 * time.Second) // past the handshake timeout: the stalled ones have re-dialed
	failed := 0
	for i := range 20 {
		if err := freshCall(t, "127.0.0."+strconv.Itoa(200+i), addr, credentials.NewTLS(tc)); err != nil {
			failed++
			t.Logf("fresh connection %d: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("%d stalled dials from 17 addresses; refused %v", dials.Load(), metric(t, s, "raterlimiter_rls_connections_refused_total"))
	assert.Zero(t, failed, "every fresh connection is answered")
	require.NoError(t, s.stop(t))
}
