// Package tooltest finds the real programs tests drive (curl, promtool,
// chromium, systemd-analyze): a test skips with a message when one is
// missing locally, and fails when CI=true, where .ci/run installs them.
package tooltest

import (
	"os"
	"os/exec"
	"testing"
)

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
