package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateConfigDoc = flag.Bool("update-config-doc", false, "rewrite docs/configuration.md's flag table from the flags")

const configDocPath = "../../docs/configuration.md"

// configTable is docs/configuration.md's flag table, made from the same rows
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

// TestConfigDocMatchesHelp keeps docs/configuration.md's flag table equal
// to -h. Run with -update-config-doc to rewrite it after changing a flag.
func TestConfigDocMatchesHelp(t *testing.T) {
	raw, err := os.ReadFile(configDocPath)
	require.NoError(t, err)
	doc := string(raw)
	const marker = "<!-- section: config -->"
	i := strings.Index(doc, marker)
	require.GreaterOrEqual(t, i, 0, "docs/configuration.md has no config section")
	section := doc[i:]
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
	if *updateConfigDoc && got != want {
		doc = doc[:i+start] + want + doc[i+end:]
		require.NoError(t, os.WriteFile(configDocPath, []byte(doc), 0o644))
		return
	}
	assert.Equal(t, want, got, "docs/configuration.md's flag table differs from -h; run: go test ./cmd/raterlimiter -run ConfigDoc -update-config-doc")
}
