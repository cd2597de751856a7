package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
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
