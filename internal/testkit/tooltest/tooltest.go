// Package tooltest finds the real programs tests drive (curl, promtool,
// chromium, systemd-analyze): a test skips with a message when one is
// missing locally, and fails when CI=true, where .ci/run installs them. It
// also builds and runs the project's own commands, to their end (Run) or
// in the background while a test talks to them (Start), and serves the
// sidecar's HTTP API on a loopback port (Serve).
package tooltest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// RunTimeout bounds a program run by Run or RunEnv: one that hangs is
// killed, and the test fails with what it wrote, instead of waiting for go
// test's own timeout.
const RunTimeout = 30 * time.Second

// Build builds the main package in dir (relative to the test's directory,
// "." for its own) into a temporary directory and returns the binary's
// path. It skips t under -short.
func Build(t testing.TB, dir string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("tooltest: builds a binary")
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(dir)+".bin")
	out, err := exec.Command("go", "build", "-o", bin, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("tooltest: go build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// Run runs bin with args to its end and returns its exit status and what
// it wrote to stdout and stderr.
func Run(t testing.TB, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return RunEnv(t, nil, bin, args...)
}

// RunEnv is Run with env added to the test's environment (Environ).
func RunEnv(t testing.TB, env []string, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(Environ(), env...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tooltest: %s did not end within %v\n%s%s", bin, RunTimeout, o.String(), e.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), o.String(), e.String()
	case err != nil:
		t.Fatalf("tooltest: %s: %v", bin, err)
	}
	return 0, o.String(), e.String()
}

// Environ is the test's environment as a program it runs sees it: without
// the RATERLIMITER_ variables, which are the test suite's own
// (RATERLIMITER_REQUIRE_REDIS) or would set a flag the test did not ask
// for; a test passes the ones it means.
func Environ() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "RATERLIMITER_") })
}

// Proc is a program a test started with Start, running beside the test.
// What it writes to stdout and stderr is kept, in order (Output); the
// test's cleanup kills it if it still runs.
type Proc struct {
	// Cmd is the running command: its Process takes signals and has the
	// pid.
	Cmd *exec.Cmd

	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// Start starts bin with args, and env added to the test's environment
// (Environ).
func Start(t testing.TB, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.Cmd.Env = append(Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = (*procWriter)(p), (*procWriter)(p)
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("tooltest: start %s: %v", bin, err)
	}
	go func() {
		err := p.Cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// procWriter keeps a Proc's output under its lock.
type procWriter Proc

func (w *procWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(b)
}

// Output returns what the program has written so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Exited is closed once the program has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err returns the error of the program's exit (nil for status 0) once
// Exited is closed, nil before.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// WaitUntil calls ready every 10 ms until it returns true. It fails t,
// showing the program's output, when the program exits first or when
// timeout passes; what names what is awaited in that message.
func (p *Proc) WaitUntil(t testing.TB, timeout time.Duration, what string, ready func() bool) {
	t.Helper()
	end := time.Now().Add(timeout)
	for !ready() {
		select {
		case <-p.exited:
			t.Fatalf("tooltest: %s exited before %s: %v\n%s", p.Cmd.Path, what, p.Err(), p.Output())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("tooltest: %s: no %s within %v\n%s", p.Cmd.Path, what, timeout, p.Output())
		}
	}
}

// Wait waits up to timeout for the program to exit and returns the error
// of its exit (nil for status 0); it fails t if the program still runs.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.Err()
	case <-time.After(timeout):
		t.Fatalf("tooltest: %s did not exit within %v\n%s", p.Cmd.Path, timeout, p.Output())
		return nil
	}
}

// Stop sends sig to the program and waits up to 30 s for it to exit (see
// Wait).
func (p *Proc) Stop(t testing.TB, sig os.Signal) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("tooltest: signal %s: %v", p.Cmd.Path, err)
	}
	return p.Wait(t, 30*time.Second)
}

// Need returns the path of program bin, which Debian package pkg ships,
// looking on PATH and then in /usr/sbin (nginx lives there, outside a
// plain user's PATH). It skips t when bin is missing, or fails t under
// CI=true.
func Need(t testing.TB, bin, pkg string) string {
	t.Helper()
	for _, p := range []string{bin, "/usr/sbin/" + bin} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := bin + " not found on PATH or in /usr/sbin: apt-get install -y " + pkg
	if os.Getenv("CI") == "true" {
		t.Fatalf("tooltest: %s (CI=true: tests must not skip)", msg)
	}
	t.Skip("tooltest: " + msg)
	return ""
}
