package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateConfigDoc = flag.Bool("update-config-doc", false, "rewrite docs/configuration.md's flag tables from the flag table")

const (
	configDocPath = "../../docs/configuration.md"
	// The flag tables of docs/configuration.md lie between these lines.
	configDocStart = "<!-- flags: made from cmd/raterlimiter/flags.go; go test ./cmd/raterlimiter -run ConfigDoc -update-config-doc rewrites them -->\n"
	configDocEnd   = "<!-- end of flags -->\n"
)

// configDoc is docs/configuration.md's flag tables, made from the table -h
// is made from: one per group.
func configDoc() string {
	var c config
	table := c.flagTable()
	var b strings.Builder
	for _, g := range flagGroups(table) {
		fmt.Fprintf(&b, "\n### %s\n\n", g.title)
		if g.note != "" {
			b.WriteString(g.note + "\n\n")
		}
		b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
		for _, d := range table {
			if d.group != g {
				continue
			}
			_, def, use := d.shown()
			env := "command line only"
			if d.env() != "" {
				env = "`" + d.env() + "`"
			}
			fmt.Fprintf(&b, "| `-%s` | %s | `%s` | %s |\n", d.name, env, def, strings.ReplaceAll(use, "|", `\|`))
		}
	}
	return b.String() + "\n"
}

// TestConfigDocMatchesHelp keeps docs/configuration.md's flag tables equal
// to the flag table. Run with -update-config-doc to rewrite them after
// changing a flag.
func TestConfigDocMatchesHelp(t *testing.T) {
	raw, err := os.ReadFile(configDocPath)
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, configDocStart)
	require.GreaterOrEqual(t, start, 0, "docs/configuration.md has no line %q", configDocStart)
	start += len(configDocStart)
	end := strings.Index(doc[start:], configDocEnd)
	require.GreaterOrEqual(t, end, 0, "docs/configuration.md has no line %q", configDocEnd)
	end += start
	got, want := doc[start:end], configDoc()
	if *updateConfigDoc && got != want {
		require.NoError(t, os.WriteFile(configDocPath, []byte(doc[:start]+want+doc[end:]), 0o644))
		return
	}
	assert.Equal(t, want, got, "docs/configuration.md's flag tables differ from the flag table; run: go test ./cmd/raterlimiter -run ConfigDoc -update-config-doc")
}
