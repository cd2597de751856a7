package raterlimiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

func TestParseFailMode(t *testing.T) {
	for _, m := range []rl.FailMode{rl.FailClosed, rl.FailOpen, rl.FailLocal} {
		got, err := check.ParseFailMode("fail", m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	got, err := check.ParseFailMode("fail", "")
	require.NoError(t, err)
	assert.Equal(t, rl.FailClosed, got)
	_, err = check.ParseFailMode("redis-fail", "half-open")
	var fe *rl.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "redis-fail", fe.Field)
	assert.ErrorIs(t, err, rl.ErrInvalid)
	assert.Equal(t, "failmode(7)", rl.FailMode(7).String())
}
