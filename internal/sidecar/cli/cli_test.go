package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("max-id-bytes", 1, "")
	return fs
}

func TestParseErrors(t *testing.T) {
	assert.ErrorIs(t, cli.Parse(flags(), []string{"-h"}), flag.ErrHelp)
	var ue *cli.UsageError
	assert.ErrorAs(t, cli.Parse(flags(), []string{"-nope"}), &ue)
	assert.NoError(t, cli.Parse(flags(), []string{"-max-id-bytes", "3"}))
	err := cli.Parse(flags(), []string{"extra"})
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
