package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/cli"
)

func flags() (*flag.FlagSet, *int, *bool) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, fs.Int("max-id-bytes", 1, ""), fs.Bool("version", false, "")
}

func TestParseTakesTheEnvironmentForUnsetFlags(t *testing.T) {
	vars := map[string]string{"T_MAX_ID_BYTES": "7", "T_VERSION": "true"}
	env := &cli.Env{Prefix: "T_", Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		CommandLineOnly: map[string]bool{"version": true}}
	fs, n, v := flags()
	set, err := cli.Parse(fs, nil, env)
	require.NoError(t, err)
	assert.Equal(t, 7, *n)
	assert.False(t, *v, "the environment cannot set a command-line-only flag")
	assert.Equal(t, map[string]bool{"max-id-bytes": true}, set)
	assert.Equal(t, "", env.Name("version"))

	fs, n, _ = flags()
	_, err = cli.Parse(fs, []string{"-max-id-bytes", "3"}, env)
	require.NoError(t, err)
	assert.Equal(t, 3, *n, "the command line wins")

	vars["T_MAX_ID_BYTES"] = "seven"
	fs, _, _ = flags()
	_, err = cli.Parse(fs, nil, env)
	var ue *cli.UsageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "T_MAX_ID_BYTES", "the variable is named")
}

func TestParseErrors(t *testing.T) {
	fs, _, _ := flags()
	_, err := cli.Parse(fs, []string{"-h"}, nil)
	assert.ErrorIs(t, err, flag.ErrHelp)
	var ue *cli.UsageError
	fs, _, _ = flags()
	_, err = cli.Parse(fs, []string{"-nope"}, nil)
	assert.ErrorAs(t, err, &ue)
	fs, _, _ = flags()
	_, err = cli.Parse(fs, []string{"extra"}, nil)
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, `unexpected argument "extra" (see -h)`, err.Error())
}

func TestExitCode(t *testing.T) {
	var out bytes.Buffer
	assert.Equal(t, 0, cli.ExitCode("t", nil, &out))
	assert.Equal(t, 0, cli.ExitCode("t", flag.ErrHelp, &out))
	assert.Empty(t, out.String())
	assert.Equal(t, 2, cli.ExitCode("t", cli.Usagef("-x must be %d", 1), &out))
	assert.Equal(t, "t: -x must be 1 (see -h)\n", out.String())
	assert.Equal(t, 1, cli.ExitCode("t", errors.New("boom"), &out))
}

func TestLoggedErrorsAreNotWrittenAgain(t *testing.T) {
	var out bytes.Buffer
	assert.Equal(t, 2, cli.ExitCode("t", cli.Logged(cli.Usagef("-x")), &out), "the status stays a usage error's")
	assert.Equal(t, 1, cli.ExitCode("t", cli.Logged(errors.New("boom")), &out))
	assert.Empty(t, out.String(), "the command's log reported them")
}

func TestFileErrorsDoNotPointToHelp(t *testing.T) {
	var out bytes.Buffer
	err := cli.Filef("%s:3: policy %q: limit is required", "p.yaml", "api")
	var ue *cli.UsageError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 2, cli.ExitCode("t", err, &out), "a file that does not load is a usage error")
	assert.Equal(t, "t: p.yaml:3: policy \"api\": limit is required\n", out.String(), "-h would not help: not pointed to")
}

func TestUnknownVariables(t *testing.T) {
	environ := []string{
		"T_MAX_ID_BYTES=7",       // a flag's
		"T_MAX_ID_BYTE=7",        // a typo
		"T_VERSION=true",         // a command-line-only flag's
		"T_COLOUR=blue",          // nothing like any flag
		"T_TEST_KNOB=1",          // the test suite's
		"OTHER_MAX_ID_BYTES=1",   // another prefix
		"T_GONE=x",               // in environ but not seen by Lookup
		"T_SECRET_TOKN=hunter2x", // a value is never repeated
	}
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		seen[name] = name != "T_GONE"
	}
	env := &cli.Env{Prefix: "T_", Lookup: func(k string) (string, bool) { return "", seen[k] },
		CommandLineOnly: map[string]bool{"version": true}, NotFlags: []string{"T_TEST_"}}
	fs, _, _ := flags()
	got := env.Unknown(fs, environ)
	assert.Equal(t, []string{
		"T_COLOUR is ignored: no flag reads it",
		"T_MAX_ID_BYTE is ignored: no flag reads it (did you mean T_MAX_ID_BYTES?)",
		"T_SECRET_TOKN is ignored: no flag reads it",
		"T_VERSION is ignored: -version is set on the command line only",
	}, got)
	for _, w := range got {
		assert.NotContains(t, w, "hunter2x", "values may be secrets")
	}
}
