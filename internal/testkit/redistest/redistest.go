// Package redistest starts and stops private redis-server processes for
// tests: a single node (plain or TLS), a node of a Redis Cluster, or a
// Sentinel, each on ports the operating system picks, with persistence off
// and their files in a test's temporary directory. It never talks to a
// Redis it did not start.
//
// Without redis-server on PATH the helpers skip the test with a message
// saying how to install it, unless RATERLIMITER_REQUIRE_REDIS=1, when they fail
// it instead.
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a failure instead of a skip.
const RequireEnv = "RATERLIMITER_REQUIRE_REDIS"

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Available reports whether redis-server and redis-cli are on PATH. When they
// are not, it skips t, or fails it when RATERLIMITER_REQUIRE_REDIS=1.
func Available(t testing.TB) {
	t.Helper()
	if err := lookPath(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%v (%s=1)", err, RequireEnv)
		}
		t.Skip(err)
	}
}

// lookPath fails when redis-server or redis-cli is not on PATH.
func lookPath() error {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("redistest: %s not found on PATH: apt-get install -y redis-server", bin)
		}
	}
	return nil
}

// Server is one redis-server process started by this package.
type Server struct {
	// Port is the TCP port it listens on, on 127.0.0.1.
	Port int
	// BusPort is the cluster bus port (cluster nodes only).
	BusPort int

	dir      string
	cluster  bool
	sentinel bool        // runs as a Sentinel, from dir/sentinel.conf
	tls      *tls.Config // the client's side, for a StartTLS server
	tlsArgs  []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL returns redis://127.0.0.1:PORT/0 (without the database for a cluster
// node).
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr() + "/0"
	}
	if s.cluster {
		return "redis://" + s.Addr()
	}
	return "redis://" + s.Addr() + "/0"
}

// Start starts a single-node redis-server and registers its stop with
// t.Cleanup.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir()}
	s.startFresh(t, extra)
	return s
}

// StartMain starts a single-node redis-server for a TestMain, which has
// no testing.TB (go test's examples need a Redis started before they
// run): its files go to dir, and the caller stops it with Kill. It
// returns an error when redis-server is not on PATH or does not start.
func StartMain(dir string) (*Server, error) {
	if err := lookPath(); err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if err := s.start(nil, func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("redistest: could not start redis-server: %w", err)
	}
	return s, nil
}

// startFresh starts s, skipping t (Available) when redis-server is missing.
func (s *Server) startFresh(t testing.TB, extra []string) {
	t.Helper()
	Available(t)
	if err := s.start(extra, t.Logf); err != nil {
		t.Fatalf("redistest: could not start redis-server: %v", err)
	}
	t.Cleanup(s.Kill)
}

func (s *Server) args(extra []string) []string {
	if s.sentinel {
		// A Sentinel rewrites its configuration file: it must have one.
		return append([]string{filepath.Join(s.dir, "sentinel.conf"), "--sentinel",
			"--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--dir", s.dir, "--daemonize", "no", "--logfile", ""}, extra...)
	}
	port := []string{"--port", strconv.Itoa(s.Port)}
	if s.tls != nil {
		port = append([]string{"--port", "0", "--tls-port", strconv.Itoa(s.Port)}, s.tlsArgs...)
	}
	a := append([]string{"--bind", "127.0.0.1"}, port...)
	a = append(a,
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
		"--protected-mode", "yes",
	)
	if s.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(s.BusPort),
			"--cluster-config-file", filepath.Join(s.dir, "nodes-"+strconv.Itoa(s.Port)+".conf"),
			"--cluster-node-timeout", "2000",
			// A replica syncs at once, not after waiting five seconds
			// for others to share the transfer.
			"--repl-diskless-sync-delay", "0",
		)
	}
	return append(a, extra...)
}

// logName is the file in the server's directory that holds what its latest
// process wrote.
const logName = "redis.log"

// launch starts the process and waits until it answers PING.
func (s *Server) launch(extra []string) error {
	log, err := os.Create(filepath.Join(s.dir, logName))
	if err != nil {
		return err
	}
	defer log.Close() // the process writes to its own copy
	cmd := exec.Command("redis-server", s.args(extra)...)
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", s.logTail(5))
		default:
		}
		// With --requirepass an unauthenticated PING is refused: up all the same.
		if reply, err := s.command(200*time.Millisecond, "PING"); err == nil && (reply == "+PONG" || strings.HasPrefix(reply, "-NOAUTH")) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server did not answer PING within %v: %s", startTimeout, s.logTail(5))
}

// Kill stops the server at once with SIGKILL, as a crash would, and waits
// for the process to be gone. Its data is lost (persistence is off). It is
// idempotent, and the helpers that take a testing.TB register it with
// t.Cleanup.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Pause stops the server's process with SIGSTOP: connections stay open and
// nothing answers, as a hung Redis. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Restart starts a killed server again on the same port, empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.launch(nil); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // the port may linger briefly
	}
	t.Fatalf("redistest: restart on port %d: %v", s.Port, err)
}

// Do sends one command over a fresh connection and returns the reply's first
// line (e.g. "+PONG", ":3", "$5") or an error.
func (s *Server) Do(args ...string) (string, error) { return s.command(time.Second, args...) }

func (s *Server) command(timeout time.Duration, args ...string) (string, error) {
	var conn net.Conn
	var err error
	if s.tls != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", s.Addr(), s.tls)
	} else {
		conn, err = net.DialTimeout("tcp", s.Addr(), timeout)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// CLI runs redis-cli against the server with args and returns its output.
func (s *Server) CLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)
	out, err := exec.CommandContext(ctx, "redis-cli", a...).CombinedOutput()
	return string(out), err
}

// StartClusterNode starts one cluster-enabled redis-server, its files in
// dir (made if missing), on free ports for its clients and its cluster bus,
// and registers its stop with t.Cleanup. Unlike the other helpers it may
// run on any goroutine, so that a cluster's nodes start together (call
// Available first); the test joins them with redis-cli --cluster create.
func StartClusterNode(t testing.TB, dir string, extra ...string) (*Server, error) {
	s := &Server{dir: dir, cluster: true}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := s.start(extra, t.Logf); err != nil {
		return nil, err
	}
	t.Cleanup(s.Kill)
	return s, nil
}

// StartSentinel starts a Redis Sentinel configured by conf (the lines of
// its sentinel.conf, which it rewrites as it learns the set it watches)
// and registers its stop with t.Cleanup.
func StartSentinel(t testing.TB, conf string) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), sentinel: true}
	if err := os.WriteFile(filepath.Join(s.dir, "sentinel.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s.startFresh(t, nil)
	return s
}

// start starts a fresh server on a free port, retrying a port another
// process took first, and logs each retry with logf. It may run on any
// goroutine.
func (s *Server) start(extra []string, logf func(format string, a ...any)) error {
	var last error
	for attempt := 0; attempt < 8; attempt++ {
		if s.Port, last = freePort(); last != nil {
			continue
		}
		if s.cluster {
			if s.BusPort, last = freePort(); last != nil || s.BusPort == s.Port {
				continue
			}
		}
		if last = s.launch(extra); last == nil {
			return nil
		}
		logf("redistest: port %d: %v; retrying", s.Port, last)
	}
	return last
}

// freePort asks the OS for a free port on 127.0.0.1. Another process may take
// it before redis-server binds it; the callers retry on that.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the last n lines the server wrote, joined by " | ".
func (s *Server) logTail(n int) string {
	log, _ := os.ReadFile(filepath.Join(s.dir, logName))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
