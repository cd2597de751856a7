package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's configuration table from the flags")

const readmePath = "../../README.md"

// configTable is README.md's configuration table, made from the same rows
// as -h.
func configTable() string {
	var cfg config
	fs := flag.NewFlagSet("raterlimiter", flag.ContinueOnError)
	cfg.flags(fs)
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, r := range flagRows(fs) {
		env := "`" + r.env + "`"
		if r.env == "" {
			env = "command line only"
		}
		b.WriteString("| `-" + r.name + "` | " + env + " | `" + r.def + "` | " + strings.ReplaceAll(r.usage, "|", `\|`) + " |\n")
	}
	return b.String()
}

// TestReadmeConfigTableMatchesHelp keeps README.md's table equal to -h. Run
// with -update-readme to rewrite it after changing a flag.
func TestReadmeConfigTableMatchesHelp(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	readme := string(raw)
	const marker = "<!-- section: config -->"
	i := strings.Index(readme, marker)
	require.GreaterOrEqual(t, i, 0, "README.md has no config section")
	section := readme[i:]
	if j := strings.Index(section[len(marker):], "\n## "); j >= 0 {
		section = section[:len(marker)+j]
	}
	const head = "| flag | environment | default | meaning |\n"
	start := strings.Index(section, head)
	require.GreaterOrEqual(t, start, 0, "the config section has no flag table")
	end := start
	for end < len(section) && strings.HasPrefix(section[end:], "|") {
		nl := strings.IndexByte(section[end:], '\n')
		if nl < 0 {
			end = len(section)
			break
		}
		end += nl + 1
	}
	got, want := section[start:end], configTable()
	if *updateReadme && got != want {
		readme = readme[:i+start] + want + readme[i+end:]
		require.NoError(t, os.WriteFile(readmePath, []byte(readme), 0o644))
		return
	}
	assert.Equal(t, want, got, "README.md's configuration table differs from -h; run: go test ./cmd/raterlimiter -run Readme -update-readme")
}
