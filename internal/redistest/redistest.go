// Package redistest starts and stops private redis-server processes for
// tests: a single node, or a three-master Redis Cluster, each on ports the
// operating system picks, with persistence off and their files in a test's
// temporary directory. It never talks to a Redis it did not start.
//
// Without redis-server on PATH the helpers skip the test with a message
// saying how to install it, unless RATERLIMITER_REQUIRE_REDIS=1, when they fail
// it instead.
package redistest

import (
	"bufio"
	"bytes"
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
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			msg := bin + " not found on PATH: apt-get install -y redis-server"
			if os.Getenv(RequireEnv) == "1" {
				t.Fatalf("redistest: %s (%s=1)", msg, RequireEnv)
			}
			t.Skip("redistest: " + msg)
		}
	}
}

// Server is one redis-server process started by this package.
type Server struct {
	// Port is the TCP port it listens on, on 127.0.0.1.
	Port int
	// BusPort is the cluster bus port (cluster nodes only).
	BusPort int

	dir     string
	cluster bool
	tls     *tls.Config // the client's side, for a StartTLS server
	tlsArgs []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedWriter
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
	Available(t)
	s := &Server{dir: t.TempDir()}
	s.startFresh(t, extra)
	return s
}

func (s *Server) startFresh(t testing.TB, extra []string) {
	t.Helper()
	var last error
	for attempt := 0; attempt < 8; attempt++ {
		s.Port = freePort(t)
		if s.cluster {
			s.BusPort = freePort(t)
			if s.BusPort == s.Port {
				continue
			}
		}
		if last = s.launch(extra); last == nil {
			t.Cleanup(s.Stop)
			return
		}
		t.Logf("redistest: port %d: %v; retrying", s.Port, last)
	}
	t.Fatalf("redistest: could not start redis-server: %v", last)
}

func (s *Server) args(extra []string) []string {
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
		)
	}
	return append(a, extra...)
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch(extra []string) error {
	cmd := exec.Command("redis-server", s.args(extra)...)
	log := &lockedWriter{}
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.log = cmd, done, log
	s.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", lastLines(s.Log(), 5))
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
	return fmt.Errorf("redis-server did not answer PING within %v: %s", startTimeout, lastLines(s.Log(), 5))
}

// Log returns what the server wrote so far.
func (s *Server) Log() string {
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	if log == nil {
		return ""
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	return log.w.String()
}

// Kill stops the server at once with SIGKILL, as a crash would, and waits
// for the process to be gone. Its data is lost (persistence is off).
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

// Stop stops the server. It is idempotent and is registered with t.Cleanup
// by Start.
func (s *Server) Stop() { s.Kill() }

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

// Cluster is a three-master Redis Cluster started by this package.
type Cluster struct {
	// Nodes are the masters, in the order they were given to
	// redis-cli --cluster create.
	Nodes []*Server
}

// URL returns a URL naming every node: redis://first?addr=second&addr=third.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr()
	for i, n := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.Addr()
	}
	return u
}

// StartCluster starts three cluster-enabled servers, joins them with
// redis-cli --cluster create (no replicas), waits for cluster_state:ok on
// every node and registers their stop with t.Cleanup. Extra arguments go to
// every server (e.g. --cluster-require-full-coverage no).
func StartCluster(t testing.TB, extra ...string) *Cluster {
	t.Helper()
	Available(t)
	c := &Cluster{}
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		s := &Server{dir: filepath.Join(dir, strconv.Itoa(i)), cluster: true}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s.startFresh(t, extra)
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := c.Nodes[0].CLI(args...); err != nil {
		t.Fatalf("redistest: cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			out, err := n.CLI("cluster", "info")
			if err == nil && strings.Contains(out, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: node %s never reached cluster_state:ok: %v\n%s", n.Addr(), err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// freePort asks the OS for a free port on 127.0.0.1. Another process may take
// it before redis-server binds it; the callers retry on that.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
