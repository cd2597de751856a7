package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

func TestBuildVersion(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tt := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"nothing recorded", debug.BuildInfo{}, "(devel)"},
		{"go run, no vcs", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "(devel) (go1.26.0)"},
		{"go install of a tag", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (go1.26.0)"},
		{"git checkout, clean", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20200102030405-0123456789ab"},
			Settings: vcs("vcs", "git", "vcs.revision", "0123456789abcdef", "vcs.time", "2020-01-02T03:04:05Z", "vcs.modified", "false")},
			"v0.0.0-20200102030405-0123456789ab (revision 0123456789abcdef, 2020-01-02T03:04:05Z, go1.26.0)"},
		{"git checkout, modified, no module version", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef", "vcs.time", "2020-01-02T03:04:05Z", "vcs.modified", "true")},
			"(devel) (revision 0123456789abcdef+modified, 2020-01-02T03:04:05Z)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, buildVersion(&tt.bi))
		})
	}
}

// TestVersionFromGitCheckout builds the binary from a git checkout of the
// module's files, committed at a known time, and reads -version: it names
// the commit and its time, not "(devel)" alone.
func TestVersionFromGitCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	git := tooltest.Need(t, "git", "git")
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	files, err := exec.Command(git, "-C", root, "ls-files", "-co", "--exclude-standard", "-z").Output()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in the index
		}
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	const when = "2020-01-02T03:04:05Z"
	env := append(os.Environ(), "GIT_AUTHOR_DATE="+when, "GIT_COMMITTER_DATE="+when,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "version test"}} {
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	cmd := exec.Command(git, "rev-parse", "HEAD")
	cmd.Dir, cmd.Env = dir, env
	rev, err := cmd.Output()
	require.NoError(t, err)

	bin := filepath.Join(t.TempDir(), "raterlimiter")
	build := exec.Command("go", "build", "-o", bin, "./cmd/raterlimiter")
	// -buildvcs=true: record the checkout even where GOFLAGS turns it off.
	build.Dir, build.Env = dir, append(env, "GOFLAGS=-buildvcs=true")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	code, stdout, stderr := tooltest.Run(t, bin, "-version")
	require.Equal(t, 0, code, stderr)
	t.Log(strings.TrimSpace(stdout))
	assert.Contains(t, stdout, "revision "+strings.TrimSpace(string(rev))+",")
	assert.Contains(t, stdout, when)
	assert.Contains(t, stdout, "raterlimiter v0.0.0-20200102030405-"+strings.TrimSpace(string(rev))[:12])
}
