package raterlimiter_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Go snippet of the documentation is a ```go block of README.md or of
// docs/*.md. Each one is a complete program (package main, imports, func
// main) that compiles as pasted, unless the line just before its fence is a
// marker:
//
//	<!-- snippet: norun -->       built and vetted, not run: it needs a
//	                              running sidecar or Redis, or serves forever
//	<!-- snippet: wrap=NAME -->   a fragment, built inside snippetWrappers[NAME]
//
// (the words after the directive, up to "-->", are free text saying why).
type snippet struct {
	file  string // relative to the repository, slash-separated
	line  int    // of the ```go fence
	code  string
	run   bool
	wrap  string
	pkg   string // the snippet's directory in the temporary module
	start int    // line of the code's first line in file
}

func (s snippet) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// snippetWrappers hold the fragments: %s is replaced by the fragment, whose
// lines keep their numbers in the Markdown file (a //line directive).
var snippetWrappers = map[string]string{
	// A fail-open decision, as the client builds it for r.
	"failopen-decision": `package main

import (
	"fmt"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

func main() {
	r := rl.Request{ID: "u1", Scale: time.Second, Limit: 10}
	clock := time.Now
%s
	fmt.Println(d.Allowed, d.Remaining)
}
`,
}

var snippetMarker = regexp.MustCompile(`^<!--\s*snippet:\s*(norun|wrap=[a-z0-9-]+)\b.*-->\s*$`)

// readSnippets returns the ```go blocks of the Markdown file path (named
// name in messages).
func readSnippets(t *testing.T, path, name string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var (
		out  []snippet
		cur  *snippet
		body strings.Builder
		prev string
		n    int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{file: name, line: n, start: n + 1, run: true}
			if m := snippetMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				if m[1] == "norun" {
					cur.run = false
				} else {
					cur.wrap = strings.TrimPrefix(m[1], "wrap=")
				}
			} else if strings.Contains(prev, "snippet:") {
				t.Errorf("%s:%d: a snippet marker this test does not know: %s", name, n-1, prev)
			}
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
		prev = line
	}
	require.NoError(t, sc.Err())
	if cur != nil {
		t.Errorf("%s: the ```go block is not closed", cur)
	}
	return out
}

// source returns the Go file of s, its lines pointing back to the Markdown.
func (s snippet) source() (string, error) {
	directive := fmt.Sprintf("//line %s:%d\n", s.file, s.start)
	if s.wrap == "" {
		return directive + s.code, nil
	}
	w, ok := snippetWrappers[s.wrap]
	if !ok {
		return "", fmt.Errorf("no wrapper named %q", s.wrap)
	}
	before, after, _ := strings.Cut(w, "%s")
	// The wrapper's own lines after the fragment keep their numbers in
	// snippets_test.go's wrapper, which is near enough for a message.
	return before + directive + s.code + "//line wrapper-" + s.wrap + ":1\n" + after, nil
}

// TestDocSnippets builds every Go snippet of README.md and docs/*.md (one
// package per snippet, in one temporary module that uses this repository
// through a go.work), vets them, and runs those not marked norun. A
// snippet that does not compile, vet or exit 0 fails the test with its
// file and line.
func TestDocSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the documentation's Go snippets")
	}
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build the snippets")
	repo, err := filepath.Abs(".")
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	require.NoError(t, err)
	files = append([]string{filepath.Join(repo, "README.md")}, files...)

	var all []snippet
	for _, f := range files {
		name, err := filepath.Rel(repo, f)
		require.NoError(t, err)
		all = append(all, readSnippets(t, f, filepath.ToSlash(name))...)
	}
	require.NotEmpty(t, all, "no ```go block found: the test reads the wrong files")

	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	require.NotNil(t, goVersion, "go.mod has no go line")
	write("go.mod", fmt.Sprintf("module snippets\n\ngo %s\n", goVersion[1]))
	write("go.work", fmt.Sprintf("go %s\n\nuse (\n\t.\n\t%q\n)\n", goVersion[1], repo))
	for i := range all {
		s := &all[i]
		s.pkg = fmt.Sprintf("s%02d", i)
		src, err := s.source()
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		write(s.pkg+"/main.go", src)
	}
	if t.Failed() {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gocmd := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir = dir
		// Offline, with this toolchain and this repository's go.sum: a
		// snippet that needs anything else fails rather than downloads it.
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=")
		return cmd.CombinedOutput()
	}
	// One build of every snippet; on failure, each "# snippets/sNN"
	// section of the output names its snippet.
	for _, step := range [][]string{{"build", "-o", filepath.Join(dir, "bin") + string(filepath.Separator), "./..."}, {"vet", "./..."}} {
		out, err := gocmd(step...)
		if err == nil {
			continue
		}
		bad := snippetsIn(string(out), all)
		if len(bad) == 0 {
			t.Fatalf("go %s of the snippets: %v\n%s", step[0], err, out)
		}
		for _, s := range bad {
			t.Errorf("%s: the ```go block does not pass go %s (marker: %s)", s, step[0], s.marker())
		}
		t.Fatalf("go %s output:\n%s", step[0], out)
	}

	for _, s := range all {
		if !s.run {
			continue
		}
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(rctx, filepath.Join(dir, "bin", s.pkg))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		rcancel()
		if err != nil {
			t.Errorf("%s: the ```go block built but its run failed (%v); mark it <!-- snippet: norun --> only if it needs a server:\n%s", s, err, out)
			continue
		}
		t.Logf("%s ran:\n%s", s, out)
	}
}

func (s snippet) marker() string {
	switch {
	case s.wrap != "":
		return "wrap=" + s.wrap
	case !s.run:
		return "norun"
	}
	return "none, a complete program"
}

// snippetsIn returns the snippets that the go command's output names, in
// the order of the output: by package ("# snippets/s01"), by file
// ("s01/main.go") or by a position in their Markdown ("README.md:64:3").
func snippetsIn(out string, all []snippet) []snippet {
	var bad []snippet
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		for _, s := range all {
			if seen[s.pkg] || !s.named(line) {
				continue
			}
			seen[s.pkg] = true
			bad = append(bad, s)
		}
	}
	return bad
}

var position = regexp.MustCompile(`([\w./-]+\.md):(\d+)`)

func (s snippet) named(line string) bool {
	if strings.HasPrefix(line, "# snippets/"+s.pkg) || strings.Contains(line, s.pkg+"/main.go") {
		return true
	}
	m := position.FindStringSubmatch(line)
	if m == nil || (m[1] != s.file && !strings.HasSuffix(m[1], "/"+s.file)) {
		return false
	}
	n, _ := strconv.Atoi(m[2])
	return n >= s.start && n < s.start+strings.Count(s.code, "\n")
}
