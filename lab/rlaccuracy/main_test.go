package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// row returns the cells of the named algorithm's row in the named trace's
// table.
func row(t *testing.T, out, traceName, algo string) []string {
	t.Helper()
	_, sec, ok := strings.Cut(out, "## "+traceName)
	require.True(t, ok, "trace %q in output", traceName)
	sec, _, _ = strings.Cut(sec, "\n## ")
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) > 1 && strings.TrimPrefix(cells[0], "| ") == algo {
			return cells
		}
	}
	t.Fatalf("no row %q in trace %q:\n%s", algo, traceName, sec)
	return nil
}

// times parses a multiple of the limit such as "1.25x".
func times(t *testing.T, cell string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(cell, "x"), 64)
	require.NoError(t, err, cell)
	return v
}

func TestRunSmall(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "boundary.svg")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-seed", "7", "-size", "0.05", "-sources", "2000", "-svg", svg}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	assert.Contains(t, s, "seed 7")
	assert.Empty(t, errOut.String(), "no progress bar unless asked or on a terminal")

	// Columns: name, allowed, wrong, false allows, false denies, wrong within,
	// wrong over, most in a window, GCRA bound, differs from exact GCRA.
	fixed := row(t, s, "boundary attack", "fixed")
	assert.Equal(t, "2.00x", fixed[7], "fixed lets twice the limit through at the boundary")
	assert.Equal(t, "50.0000 %", fixed[2], "every request of the second burst is a false allow")
	for _, name := range []string{"steady Poisson under", "steady Poisson over", "on/off bursts", "boundary attack", "many sources"} {
		token := row(t, s, name, "token")
		assert.Equal(t, "0", token[9], "%s: GCRA agrees with exact rationals", name)
		bound, err := strconv.ParseFloat(token[8], 64)
		require.NoError(t, err)
		assert.LessOrEqual(t, bound, 1.0, "%s: GCRA never passes its bound", name)
		ref := row(t, s, name, logName)
		assert.Equal(t, "0.0000 %", ref[2], "%s: the reference agrees with itself", name)
		assert.LessOrEqual(t, times(t, ref[7]), 1.0, "%s: the exact log never passes the limit", name)
		for _, variant := range []string{"sliding", belowName, spreadName} {
			sl := row(t, s, name, variant)
			assert.Less(t, times(t, sl[7]), 2.0, "%s: %s stays below twice the limit", name, variant)
		}
	}
	assert.Equal(t, "1.0000", row(t, s, "steady Poisson over", "token")[8], "GCRA reaches its bound under load")

	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("<svg")), "an SVG")
	assert.Equal(t, len(variants), bytes.Count(b, []byte("<polyline")), "one line per limiter")
}

func TestRunProgress(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-size", "0.02", "-sources", "1000", "-progress"}, &out, &errOut)
	require.NoError(t, err)
	assert.Contains(t, errOut.String(), "100%")
}

func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"-size", "0.05", "-sources", "1000"}, io.Discard, io.Discard)
	require.ErrorIs(t, err, context.Canceled)
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"defaults", nil, true},
		{"all flags", []string{"-seed", "3", "-sources", "10", "-limit", "5", "-size", "0.5", "-svg", "x.svg", "-progress"}, true},
		{"unknown flag", []string{"-nope"}, false},
		{"argument", []string{"extra"}, false},
		{"no sources", []string{"-sources", "0"}, false},
		{"no limit", []string{"-limit", "0"}, false},
		{"size 0", []string{"-size", "0"}, false},
		{"size NaN", []string{"-size", "NaN"}, false},
		{"size too big", []string{"-size", "1000"}, false},
		{"seed not a number", []string{"-seed", "x"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.args, io.Discard)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				var ue *cli.UsageError
				assert.ErrorAs(t, err, &ue, "a bad flag is a usage error (exit status 2)")
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("-seed 3 -sources 10 -size 0.5")
	f.Add("-limit -1")
	f.Add("-size 1e309 -svg")
	f.Fuzz(func(t *testing.T, line string) {
		o, err := parse(strings.Fields(line), io.Discard)
		if err == nil && (o.sources < 1 || o.limit < 1 || !(o.size > 0 && o.size <= 100)) {
			t.Fatalf("accepted %q as %+v", line, o)
		}
	})
}

// TestJudge replays a hand-made boundary burst: limit 2 per 1000 ms, two
// requests just before a window boundary and two just after.
func TestJudge(t *testing.T) {
	tr := finish(trace{name: "hand", scale: 1000, limit: 2, ids: 1, start: epoch, end: epoch + 2000,
		events: []event{{epoch + 990, 0}, {epoch + 995, 0}, {epoch + 1000, 0}, {epoch + 1005, 0}}})
	res := replay(&tr, true, func() {})
	byName := map[string]result{}
	for _, r := range res {
		byName[r.name] = r
	}
	fixed := byName["fixed"]
	assert.Equal(t, int64(4), fixed.allowed)
	assert.Equal(t, int64(2), fixed.falseAllw, "the exact log is full at 1000 and 1005")
	assert.Equal(t, int64(4), fixed.maxWindow)
	assert.Equal(t, []int64{epoch + 990, epoch + 995, epoch + 1000, epoch + 1005}, fixed.times)

	sliding := byName["sliding"]
	assert.Equal(t, int64(2), sliding.allowed, "2*(1000-0)/1000 + 1 > 2, and 2*0.995 + 1 > 2")
	assert.Zero(t, sliding.wrong())

	token := byName["token"]
	assert.Equal(t, int64(2), token.allowed, "a burst of 2, then one per 500 ms")
	assert.Zero(t, token.mismatches)
	assert.InDelta(t, 0.995, token.bound, 1e-9, "(2 - 5/1000*2) / 2: two requests 5 ms apart")

	assert.True(t, tr.over[0])
}

func TestLimitsPlot(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "limits.svg")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-seed", "3", "-size", "0.3", "-sources", "3000", "-limits", "20,200", "-limits-svg", svg}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	for _, limit := range []string{"20", "200"} {
		var cells []string
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "| "+limit+" |") {
				cells = strings.Split(strings.Trim(line, "| "), " | ")
			}
		}
		require.Len(t, cells, 1+len(variants), "a row for limit %s:\n%s", limit, s)
		assert.Equal(t, "0.0000 %", cells[1+slices.IndexFunc(variants, func(v variant) bool { return v.name == logName })], "limit %s: the log agrees with the exact reference", limit)
	}
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.Equal(t, len(variants), bytes.Count(b, []byte("<polyline")), "one line per algorithm")
}

// TestExitStatus runs the built binary: -h prints the usage and exits 0, a
// bad flag exits 2 with the flag named.
func TestExitStatus(t *testing.T) {
	bin := tooltest.Build(t, ".")
	code, _, stderr := tooltest.Run(t, bin, "-h")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "-limits-svg")
	code, _, stderr = tooltest.Run(t, bin, "-size", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "rlaccuracy: -size must be above 0")
	code, _, stderr = tooltest.Run(t, bin, "-nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "flag provided but not defined: -nope")
}
