package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
)

// listenFlags are the flags of how the sidecar listens beyond -listen: TLS
// and the unix socket's permissions.
type listenFlags struct {
	cert, key string
	unixMode  string
}

func (f *listenFlags) mode() (fs.FileMode, error) {
	m, err := strconv.ParseUint(f.unixMode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, errors.New("bad mode")
	}
	return fs.FileMode(m), nil
}

// unixPrefix marks a -listen address as a unix socket's path.
const unixPrefix = "unix:"

// openListener listens on addr (host:port, or unix:/path) with TLS when
// f names a certificate. A unix socket gets f's permissions, replaces a
// stale socket file that nothing answers on (left by a crash), refuses one
// that something does, and is removed when the listener closes.
func openListener(ctx context.Context, addr string, f listenFlags, watch bool, reloads *prometheus.CounterVec, logger *slog.Logger) (net.Listener, error) {
	var ln net.Listener
	var err error
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		ln, err = listenUnix(path, f, logger)
	} else {
		ln, err = listenTCP(addr)
	}
	if err != nil {
		return nil, err
	}
	if f.cert == "" {
		return ln, nil
	}
	cert, err := reloaded(ctx, []string{f.cert, f.key}, watch, "tls-cert", "certificate", reloads, logger,
		func() (tls.Certificate, error) { return loadKeyPair(f.cert, f.key) })
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("loading -tls-cert %s and -tls-key %s: %w", f.cert, f.key, err)
	}
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil }
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get}), nil
}

// sendBufferBytes is the kernel send buffer of each connection the main
// listener accepts (SO_SNDBUF; Linux reserves twice it). Left to grow to
// net.ipv4.tcp_wmem's maximum (4 MiB by default), a client that pipelines
// requests and never reads the answers pins that much of the host's TCP
// memory per connection until the write timeout; bounded, such a
// connection holds 128 KiB of answers, and nothing more of it is read. A
// check's answer is under 1 KiB; a larger one (a batch's, /metrics) takes
// more round trips, which on the loopback or a LAN cost nothing.
const sendBufferBytes = 64 << 10

// listenTCP listens on addr with sendBufferBytes as the send buffer of the
// listening socket, which every connection it accepts inherits.
func listenTCP(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, sendBufferBytes)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}

func listenUnix(path string, f listenFlags, logger *slog.Logger) (net.Listener, error) {
	if path == "" {
		return nil, cli.Usagef("-listen unix: needs a path")
	}
	mode, _ := f.mode() // validated
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen %s: the file exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another process serves on this socket", path)
		}
		logger.Warn("removing a stale socket file (a previous run did not shut down cleanly)", "path", path)
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The socket exists with the umask's permissions for an instant; the
	// directory's own permissions are what guards it until then.
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// loadKeyPair is tls.LoadX509KeyPair, each file read as readfile.Read
// reads it.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := readfile.Read(certFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := readfile.Read(keyFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// newTLSReloads is the series of reloads of the TLS files, by flag and
// result.
func newTLSReloads() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "raterlimiter_tls_reloads_total",
		Help: "Reloads of the TLS files by flag (tls-cert: -tls-cert and -tls-key; rls-tls-cert; rls-tls-client-ca) and result (ok, failed); a failed one keeps the files in force.",
	}, []string{"file", "result"})
}

// reloaded is what load makes of files, made anew on every SIGHUP and,
// with watch, when one of them changes, until ctx ends. A load that fails
// keeps what is in force: a certificate and its key are rarely replaced in
// one step, and a pair that does not match yet waits for the second file.
// Each reload is counted in reloads under label (ok, failed) and logged
// naming what; a read that hangs is abandoned (loadFile).
func reloaded[T any](ctx context.Context, files []string, watch bool, label, what string, reloads *prometheus.CounterVec, logger *slog.Logger, load func() (T, error)) (*atomic.Pointer[T], error) {
	var cur atomic.Pointer[T]
	var loads fileLoads
	read := func() error {
		v, err := loadFile(&loads, files[0], load)
		if err == nil {
			cur.Store(&v)
		}
		return err
	}
	if err := read(); err != nil {
		return nil, err
	}
	ok, failed := reloads.WithLabelValues(label, "ok"), reloads.WithLabelValues(label, "failed")
	onReload(ctx, logger, watch, files, func(why string) {
		if err := read(); err != nil {
			failed.Inc()
			logger.Warn(why+": "+what+" not reloaded; the previous one stays", "file", files[0], "err", err)
		} else {
			ok.Inc()
			logger.Info(why+": "+what+" reloaded", "file", files[0])
		}
	})
	return &cur, nil
}
