package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EAddressesThatCannotBeAreUsageErrors: what the command line alone
// shows to be wrong is exit status 2, as every other bad flag; 1 is for a
// start that fails on this machine (a port in use).
func TestE2EAddressesThatCannotBeAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-listen", "127.0.0.1:99999"}, `-listen "127.0.0.1:99999": the port must be from 0 to 65535`},
		{[]string{"-listen", "127.0.0.1:-1"}, `-listen "127.0.0.1:-1": the port must be from 0 to 65535`},
		{[]string{"-listen", "127.0.0.1"}, `-listen "127.0.0.1" must be host:port`},
		{[]string{"-listen", "127.0.0.1:nosuchservice"}, `"nosuchservice" is not a port`},
		{[]string{"-admin-listen", "127.0.0.1:65536"}, `-admin-listen "127.0.0.1:65536": the port must be from 0 to 65535`},
		{[]string{"-rls-listen", "127.0.0.1:100000", "-rls-config", compatConfig}, `-rls-listen "127.0.0.1:100000"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runBinary(t, nil, tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tc.msg)
			assert.Contains(t, stderr, "(see -h)")
		})
	}
	code, _, stderr := runBinary(t, []string{"RATERLIMITER_LISTEN=127.0.0.1:99999"})
	assert.Equal(t, 2, code, "the environment's address too: %s", stderr)
}

// TestE2EFileErrorsNameTheFileNotHelp: a file a flag names that does not
// load is exit status 2 with the file's own message; -h would not help, so
// the message does not send the reader there.
func TestE2EFileErrorsNameTheFileNotHelp(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("policies:\n  - {name: x, key: ip, limit: 3}\n"), 0o600))
	empty := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	badRLS := filepath.Join(dir, "rls")
	require.NoError(t, os.Mkdir(badRLS, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(badRLS, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"policies", []string{"-policies", bad}, bad + ":2: "},
		{"check-policies", []string{"-check-policies", bad}, bad + ":2: "},
		{"missing policies", []string{"-policies", filepath.Join(dir, "none.yaml")}, "none.yaml: cannot be read"},
		{"admin token file", []string{"-admin-token-file", filepath.Join(dir, "none")}, "-admin-token-file: "},
		{"empty admin token file", []string{"-admin-token-file", empty}, "is empty"},
		{"rls config", []string{"-rls-listen", "127.0.0.1:0", "-rls-config", badRLS}, "a.yaml:4: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, nil, append([]string{"-listen", "127.0.0.1:0"}, tc.args...)...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tc.msg)
			assert.NotContains(t, stderr, "see -h")
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		})
	}
}

// TestE2EUnknownVariablesWarnAtStart: a misspelt RATERLIMITER_ variable
// would leave the sidecar without what it was meant to set; it serves,
// and says so in its first lines, never repeating a value.
func TestE2EUnknownVariablesWarnAtStart(t *testing.T) {
	s := start(t, []string{"RATERLIMITER_POLICY=/etc/raterlimiter/policies.yaml", "RATERLIMITER_VERSION=true",
		"RATERLIMITER_ADMIN_TOKN=hunter2hunter2", "RATERLIMITER_MAX_BATCH=10"})
	logs := s.logs()
	assert.Contains(t, logs, `level=WARN msg="RATERLIMITER_POLICY is ignored: no flag reads it (did you mean RATERLIMITER_POLICIES?)"`)
	assert.Contains(t, logs, `level=WARN msg="RATERLIMITER_VERSION is ignored: -version is set on the command line only"`)
	assert.Contains(t, logs, `msg="RATERLIMITER_ADMIN_TOKN is ignored: no flag reads it (did you mean RATERLIMITER_ADMIN_TOKEN?)"`)
	assert.NotContains(t, logs, "hunter2", "a value may be a secret")
	assert.NotContains(t, logs, "RATERLIMITER_MAX_BATCH", "a flag's variable")
	assert.Equal(t, 200, s.get(t, "/healthz").status, "it serves")
}
