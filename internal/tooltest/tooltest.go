// Package tooltest finds the real programs tests drive (curl, promtool,
// chromium, systemd-analyze): a test skips with a message when one is
// missing locally, and fails when CI=true, where .ci/run installs them. It
// also builds and runs the project's own commands, for tests of their exit
// status.
package tooltest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

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

// Run runs bin with args and returns its exit status and what it wrote to
// stdout and stderr.
func Run(t testing.TB, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), o.String(), e.String()
	case err != nil:
		t.Fatalf("tooltest: %s: %v", bin, err)
	}
	return 0, o.String(), e.String()
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
