package raterlimiter_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocLinks: every relative link of the repository's Markdown resolves
// to a file or directory that exists, and a #fragment of a Markdown file to
// one of its headings, as GitHub names them. So does every repository path
// that a Go comment or a file of deploy/ (the Helm chart, the manifests)
// names, and a quoted name right after a Markdown file's path is a section
// of it: the file has a heading that begins so.
func TestDocLinks(t *testing.T) {
	problems, checked := checkLinks(t, ".")
	require.Greater(t, checked, 200, "the links of the repository were read")
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDocLinksCatchesBrokenOnes runs the check on a small tree with one of
// each kind of broken reference, and with the good ones beside them.
func TestDocLinksCatchesBrokenOnes(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	write("README.md", "# Top\n\n"+
		"[ok](docs/a.md), [ok](docs/a.md#waiting-delay_ms-wait1-and--max-wait), [ok](#top), [ok](docs/),\n"+
		"[gone](docs/gone.md), [bad anchor](docs/a.md#nowhere), [bad self](#bottom),\n"+
		"![gone image](docs/gone.svg), [web](https://example.com/x.md), `[code](docs/gone2.md)`,\n"+
		"[ok section](docs/a.md), \"Waiting\", [bad section](docs/a.md), \"Sleeping\"\n"+
		"```\n[fenced](docs/gone3.md)\n```\n"+
		"[ref]: docs/gone4.md\n")
	write("docs/a.md", "# A\n\n## Waiting: `delay_ms`, `wait=1` and `-max-wait`\n\n## A\n\n"+
		"[ok](../README.md#top), [ok](#a-1), [bad](#a-2)\n")
	write("pkg/p.go", "// Package p is told in docs/a.md, \"Waiting\", and in docs/gone.md.\n"+
		"package p\n\n// F: see README.md and RELIABILITY.md; /api/x and pkg/x.go are\n"+
		"// a URL path and a file that does not exist.\nfunc F() {}\n")
	write("deploy/helm/c/values.yaml", "# docs/a.md; docs/gateway.md\nx: 1\n")
	write("deploy/k/x.yaml", "# docs/a.md, \"Nothing like it\"\nkind: X\n")

	problems, checked := checkLinks(t, root)
	assert.Equal(t, 22, checked)
	assert.ElementsMatch(t, []string{
		`README.md:4: docs/gone.md: no such file or directory`,
		`README.md:4: docs/a.md#nowhere: no heading has the anchor "nowhere"`,
		`README.md:4: #bottom: no heading has the anchor "bottom"`,
		`README.md:5: docs/gone.svg: no such file or directory`,
		`README.md:6: docs/a.md, "Sleeping": no heading begins so`,
		`README.md:10: docs/gone4.md: no such file or directory`,
		`docs/a.md:7: #a-2: no heading has the anchor "a-2"`,
		`pkg/p.go:1: docs/gone.md: no such file or directory`,
		`pkg/p.go:4: RELIABILITY.md: no such file or directory`,
		`pkg/p.go:4: pkg/x.go: no such file or directory`,
		`deploy/helm/c/values.yaml:1: docs/gateway.md: no such file or directory`,
		`deploy/k/x.yaml:1: docs/a.md, "Nothing like it": no heading begins so`,
	}, problems)
}

// TestContributingNamesTestPrerequisites: every program .ci/run installs
// for the tests, and traefik and helm, which it builds, are named in
// CONTRIBUTING.md's "Test prerequisites", so a new contributor knows
// before a test skips.
func TestContributingNamesTestPrerequisites(t *testing.T) {
	doc, err := os.ReadFile("CONTRIBUTING.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "### Test prerequisites\n")
	require.True(t, ok, "CONTRIBUTING.md has a Test prerequisites part")
	section, _, _ = strings.Cut(section, "\n#")
	ci, err := os.ReadFile(".ci/run")
	require.NoError(t, err)
	programs := []string{"traefik", "helm"}
	for _, line := range strings.Split(string(ci), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "need" {
			programs = append(programs, f[1])
		}
	}
	require.Greater(t, len(programs), 5, ".ci/run's need lines were read")
	for _, p := range programs {
		if p == "redis-cli" {
			continue // comes with redis-server
		}
		assert.Contains(t, section, "`"+p+"`", "CONTRIBUTING.md names %s as a test prerequisite", p)
	}
}

// TestReadmeTestCommandIsCIs: the README's test command, CONTRIBUTING's
// and the one .ci/run runs are the same line.
func TestReadmeTestCommandIsCIs(t *testing.T) {
	ci, err := os.ReadFile(".ci/run")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	cmd := lines[len(lines)-1]
	require.Equal(t, "bash scripts/test.sh", cmd, "the last line of .ci/run is the test command")
	for _, f := range []string{"README.md", "CONTRIBUTING.md"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Contains(t, string(b), "\n"+cmd, "%s shows .ci/run's test command", f)
	}
}

// TestTestCommandRunsEveryPart: scripts/test.sh runs each part whatever the
// others did, and fails when any failed. Its go and gofmt are stand-ins
// that write down where and how they were run, and whose go test fails in
// the directory the case names.
func TestTestCommandRunsEveryPart(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	repo, err := filepath.EvalSymlinks(must(filepath.Abs(".")))
	require.NoError(t, err)
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\n"+
		`echo "$(pwd -P) go $1" >>"$TEST_SH_LOG"`+"\n"+
		`if [ "$1" = test ] && [ "$(pwd -P)" = "$TEST_SH_FAIL" ]; then exit 1; fi`+"\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "gofmt"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	for _, tc := range []struct {
		name, failIn, says string
		code               int
	}{
		{"every part passes", "", "all passed", 0},
		{"the product module fails", ".", "FAILED: main module", 1},
		{"the Kubernetes check fails", "deploy/kubernetes/check", "FAILED: deploy/kubernetes/check", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			cmd := exec.Command(bash, "scripts/test.sh")
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TEST_SH_LOG="+log, "TEST_SH_FAIL=")
			if tc.failIn != "" {
				cmd.Env[len(cmd.Env)-1] = "TEST_SH_FAIL=" + filepath.Join(repo, tc.failIn)
			}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, code, "%s", out)
			assert.Contains(t, string(out), tc.says)
			ran, err := os.ReadFile(log)
			require.NoError(t, err)
			for _, want := range []string{repo + " go test", filepath.Join(repo, "deploy/kubernetes/check") + " go test", filepath.Join(repo, "lab") + " go build"} {
				assert.Contains(t, string(ran), want+"\n", "every part ran")
			}
		})
	}
}

// TestDocsSpeakOfTheProject: the documents speak of the project, its users
// and its measures, not of where a change came from: no issue by its
// number, no "the issue".
func TestDocsSpeakOfTheProject(t *testing.T) {
	var files []string
	for _, glob := range []string{"*.md", "docs/*.md", "lab/*.md", "lab/notes/*.md", "examples/*/*.md"} {
		m, err := filepath.Glob(glob)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.Greater(t, len(files), 15)
	issue := regexp.MustCompile(`(?i)\bthe issue\b|\bissues?\s+#?\d+`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Empty(t, issue.FindAllString(string(b), -1), f)
	}
}

// checkLinks returns what does not resolve under root, each as
// "file:line: reference: why", and how many references it checked.
func checkLinks(t *testing.T, root string) (problems []string, checked int) {
	t.Helper()
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		top[e.Name()] = true
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
		return err == nil
	}
	headings := map[string][]heading{} // by slash path from root, read once
	headingsOf := func(name string) []heading {
		if h, ok := headings[name]; ok {
			return h
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		require.NoError(t, err)
		headings[name] = markdownHeadings(string(b))
		return headings[name]
	}
	// check resolves ref (a path from root, slash-separated, with an
	// optional #fragment and section name) and says what is wrong.
	check := func(from string, line int, shown string, ref reference) {
		checked++
		bad := func(why string) { problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", from, line, shown, why)) }
		if strings.HasPrefix(ref.path, "../") || ref.path == ".." {
			bad("leaves the repository")
			return
		}
		if strings.Contains(ref.path, "*") {
			m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(ref.path)))
			if err != nil || len(m) == 0 {
				bad("matches no file")
			}
			return
		}
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(ref.path)))
		if err != nil {
			bad("no such file or directory")
			return
		}
		isMarkdown := !fi.IsDir() && strings.HasSuffix(ref.path, ".md")
		if ref.fragment != "" {
			switch {
			case isMarkdown:
				if !slices.ContainsFunc(headingsOf(ref.path), func(h heading) bool { return h.anchor == ref.fragment }) {
					bad(fmt.Sprintf("no heading has the anchor %q", ref.fragment))
				}
			case !regexp.MustCompile(`^L\d+(-L\d+)?$`).MatchString(ref.fragment):
				bad("a fragment of a file that is not Markdown")
			}
		}
		if ref.section != "" && isMarkdown {
			want := strings.ToLower(strings.Join(strings.Fields(ref.section), " "))
			if !slices.ContainsFunc(headingsOf(ref.path), func(h heading) bool { return strings.HasPrefix(strings.ToLower(h.text), want) }) {
				bad("no heading begins so")
			}
		}
	}

	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := filepath.ToSlash(must(filepath.Rel(root, p)))
		if d.IsDir() {
			if n := d.Name(); name != "." && (n == "testdata" || n == "node_modules" || (strings.HasPrefix(n, ".") && n != ".ci")) {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(name))
		switch {
		case strings.HasSuffix(name, ".md"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, l := range markdownLinks(string(b)) {
				ref, local := linkTarget(dir, name, l.target)
				if local {
					ref.section = l.section
					shown := l.target
					if l.section != "" {
						shown += fmt.Sprintf(", %q", l.section)
					}
					check(name, l.line, shown, ref)
				}
			}
		case strings.HasSuffix(name, ".go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				start := fset.Position(g.Pos()).Line
				for _, m := range pathMentions(g.Text(), dir, top, exists) {
					check(name, start+m.line, m.shown, m.ref)
				}
			}
		case strings.HasPrefix(name, "deploy/"): // manifests, the chart, the Dockerfile
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range pathMentions(string(b), dir, top, exists) {
				check(name, 1+m.line, m.shown, m.ref)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return problems, checked
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A reference is a path from the repository's root, slash-separated, with
// the #fragment of a link and the section name that followed it.
type reference struct{ path, fragment, section string }

// linkTarget reads a Markdown link's target, written in the file name of
// directory dir, and says whether it points into the repository (not a
// URL with a scheme, nor mail).
func linkTarget(dir, name, target string) (reference, bool) {
	target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
	if regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:|^//`).MatchString(target) {
		return reference{}, false
	}
	path, fragment, _ := strings.Cut(target, "#")
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	switch {
	case path == "":
		path = name
	case strings.HasPrefix(path, "/"):
		path = strings.TrimPrefix(path, "/")
	default:
		path = filepath.ToSlash(filepath.Join(dir, path))
	}
	return reference{path: filepath.ToSlash(filepath.Clean(path)), fragment: fragment}, true
}

type mdLink struct {
	line            int
	target, section string
}

var (
	mdInline   = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+"[^"]*")?\s*\)(,\s*"([^"]+)")?`)
	mdRefDef   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	mdHTMLLink = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	mdFence    = regexp.MustCompile("^\\s{0,3}(```+|~~~+)")
	mdCodeSpan = regexp.MustCompile("(`+)")
)

// markdownLinks returns the links of a Markdown text outside code: inline
// links and images, reference definitions and HTML href and src
// attributes; an inline link followed by `, "Name"` names a section.
func markdownLinks(src string) []mdLink {
	var links []mdLink
	forProse(src, func(n int, line string) {
		for _, m := range mdInline.FindAllStringSubmatch(line, -1) {
			links = append(links, mdLink{line: n, target: m[1], section: m[3]})
		}
		if m := mdRefDef.FindStringSubmatch(line); m != nil {
			links = append(links, mdLink{line: n, target: m[1]})
		}
		for _, m := range mdHTMLLink.FindAllStringSubmatch(line, -1) {
			links = append(links, mdLink{line: n, target: m[1]})
		}
	})
	return links
}

// forProse calls f with each line of a Markdown text (numbered from 1)
// that is outside a fenced code block, its code spans removed.
func forProse(src string, f func(n int, line string)) {
	fence := ""
	for i, line := range strings.Split(src, "\n") {
		if m := mdFence.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(line) == m[1]:
				fence = ""
				continue
			}
		}
		if fence == "" {
			f(i+1, withoutCodeSpans(line))
		}
	}
}

// withoutCodeSpans removes each code span of a line (a run of backticks,
// what it holds, and the same run closing it); a run never closed stays.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for {
		loc := mdCodeSpan.FindStringIndex(line)
		if loc == nil {
			return b.String() + line
		}
		run := line[loc[0]:loc[1]]
		rest := line[loc[1]:]
		end := -1
		for off := 0; ; {
			j := strings.Index(rest[off:], run)
			if j < 0 {
				break
			}
			j += off
			if j+len(run) == len(rest) || rest[j+len(run)] != '`' {
				end = j
				break
			}
			off = j + len(run)
			for off < len(rest) && rest[off] == '`' {
				off++
			}
		}
		if end < 0 {
			b.WriteString(line[:loc[1]])
			line = rest
			continue
		}
		b.WriteString(line[:loc[0]])
		line = rest[end+len(run):]
	}
}

// A heading of a Markdown file: its text as rendered, and its anchor.
type heading struct{ text, anchor string }

var (
	mdATX      = regexp.MustCompile(`^\s{0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	mdHTMLName = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	mdTag      = regexp.MustCompile(`<[^>]*>`)
	mdEmphasis = regexp.MustCompile(`(^|\W)(\*{1,3}|_{1,3})(\S(?:.*?\S)?)(\*{1,3}|_{1,3})(\W|$)`)
)

// markdownHeadings returns the ATX headings of a Markdown text with the
// anchors GitHub gives them (a second "Setup" is setup-1), and the anchors
// of <a id="..."> and <a name="..."> elements.
func markdownHeadings(src string) []heading {
	var hs []heading
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(src, "\n") {
		if m := mdFence.FindStringSubmatch(line); m != nil {
			if fence == "" {
				fence = m[1]
			} else if m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(line) == m[1] {
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range mdHTMLName.FindAllStringSubmatch(line, -1) {
			hs = append(hs, heading{text: m[1], anchor: m[1]})
		}
		m := mdATX.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := headingText(m[1])
		anchor := githubSlug(text)
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		hs = append(hs, heading{text: text, anchor: anchor})
	}
	return hs
}

// headingText is a heading's Markdown as rendered text: code spans keep
// their contents, links their text, emphasis and HTML tags go.
func headingText(md string) string {
	var b strings.Builder
	for md != "" {
		i := strings.IndexByte(md, '`')
		if i < 0 {
			b.WriteString(proseText(md))
			break
		}
		j := i
		for j < len(md) && md[j] == '`' {
			j++
		}
		run := md[i:j]
		k := strings.Index(md[j:], run)
		if k < 0 {
			b.WriteString(proseText(md))
			break
		}
		b.WriteString(proseText(md[:i]))
		b.WriteString(strings.TrimSpace(md[j : j+k]))
		md = md[j+k+len(run):]
	}
	return strings.TrimSpace(b.String())
}

func proseText(s string) string {
	s = mdLinkText.ReplaceAllString(s, "$1")
	s = mdTag.ReplaceAllString(s, "")
	for {
		t := mdEmphasis.ReplaceAllString(s, "$1$3$5")
		if t == s {
			return s
		}
		s = t
	}
}

// githubSlug is the anchor GitHub gives a heading's text: lower case,
// letters, marks, numbers, connector punctuation (_) and hyphens kept,
// each space a hyphen, everything else dropped.
func githubSlug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// A mention is a repository path named in plain text (a comment, a
// chart's file): at the text's line (from 0), as shown.
type mention struct {
	line  int
	shown string
	ref   reference
}

var (
	textPath    = regexp.MustCompile(`(?:^|[\s("'\x60\[,;:=])((?:\./)?[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)*/?)`)
	textSection = regexp.MustCompile(`^,?\s*(?:section\s+)?"([^"]+)"`)
)

// pathMentions finds the repository paths a text names: a path of two
// segments or more whose first is an entry of the repository's root (top),
// or a file name ending in .md; each is looked for beside the text (in dir)
// and then from the root. A quoted name right after a Markdown file's path is
// a section of it. Paths with . or .. segments are examples, not mentions.
func pathMentions(text, dir string, top map[string]bool, exists func(string) bool) []mention {
	var ms []mention
	for _, loc := range textPath.FindAllStringSubmatchIndex(text, -1) {
		raw := text[loc[2]:loc[3]]
		p := strings.TrimRight(strings.TrimPrefix(raw, "./"), ".,:;")
		segs := strings.Split(strings.TrimSuffix(p, "/"), "/")
		if slices.Contains(segs, "..") || slices.Contains(segs, ".") || slices.Contains(segs, "") {
			continue
		}
		if !(len(segs) >= 2 && top[segs[0]]) && !(len(segs) == 1 && strings.HasSuffix(p, ".md") && !strings.HasPrefix(p, ".")) {
			continue
		}
		ref := reference{path: strings.TrimSuffix(p, "/")}
		if beside := filepath.ToSlash(filepath.Join(dir, ref.path)); dir != "." && exists(beside) {
			ref.path = beside
		}
		after := text[loc[2]+len(strings.TrimRight(raw, ".,:;")):]
		if m := textSection.FindStringSubmatch(after); m != nil && strings.HasSuffix(p, ".md") {
			ref.section = strings.Join(strings.Fields(m[1]), " ")
		}
		shown := p
		if ref.section != "" {
			shown += fmt.Sprintf(", %q", ref.section)
		}
		ms = append(ms, mention{line: strings.Count(text[:loc[2]], "\n"), shown: shown, ref: ref})
	}
	return ms
}

// FuzzMarkdownLinks: the Markdown readers take any text; every link target
// they return is in the text, every anchor is a slug, and a slug is its own
// slug.
func FuzzMarkdownLinks(f *testing.F) {
	f.Add("# A `b` [c](d)\n\n[x](y.md#z), \"S\" `[q](r)`\n```go\n[f](g)\n```\n[r]: s\n<a href=\"t\">")
	f.Add("## Waiting: `delay_ms`, `wait=1` and `-max-wait`\n## **Bold** _it_ and snake_case\n")
	f.Add("``` a ``\n`` b ` c ``\n~~~\n# not\n~~~~\n# yes #\n")
	f.Fuzz(func(t *testing.T, src string) {
		for _, l := range markdownLinks(src) {
			if !strings.Contains(src, strings.TrimSuffix(strings.TrimPrefix(l.target, "<"), ">")) {
				t.Fatalf("link %q is not in the text", l.target)
			}
		}
		for _, h := range markdownHeadings(src) {
			if h.anchor != h.text && githubSlug(h.anchor) != h.anchor { // an <a id> is as written
				t.Fatalf("anchor %q of %q is not a slug", h.anchor, h.text)
			}
			if s := githubSlug(h.text); githubSlug(s) != s {
				t.Fatalf("the slug %q of %q is not its own slug", s, h.text)
			}
		}
		top := map[string]bool{"docs": true}
		for _, m := range pathMentions(src, "docs", top, func(string) bool { return false }) {
			if !strings.Contains(src, m.ref.path) {
				t.Fatalf("mention %q is not in the text", m.ref.path)
			}
		}
	})
}
