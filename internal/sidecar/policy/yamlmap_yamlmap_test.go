package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

func root(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(src), &doc))
	return doc.Content[0]
}

func TestFieldsFollowsAliases(t *testing.T) {
	n := root(t, "base: &b {limit: 3}\nx: *b\n")
	fs, err := policy.Fields(n, "the file", "base", "x")
	require.Nil(t, err)
	inner, err := policy.Fields(fs["x"], "x", "limit")
	require.Nil(t, err)
	assert.Equal(t, "3", inner["limit"].Value)
}

func TestFieldsRefuses(t *testing.T) {
	for _, c := range []struct {
		src, msg, unknown string
		line              int
	}{
		{"- a\n", "m must be a mapping", "", 1},
		{"a: 1\nb: 2\n", `m: unknown field "b" (known: a)`, "b", 2},
		{"a: 1\na: 2\n", `m: field "a" given twice`, "", 2},
		{"[x]: 1\n", "m: keys must be names", "", 1},
	} {
		_, err := policy.Fields(root(t, c.src), "m", "a")
		require.NotNil(t, err, c.src)
		assert.Equal(t, c.msg, err.Msg)
		assert.Equal(t, c.unknown, err.Unknown)
		assert.Equal(t, c.line, err.Node.Line, "the node at fault")
	}
	_, err := policy.Fields(nil, "m", "a")
	require.NotNil(t, err)
	assert.Nil(t, err.Node)
}
