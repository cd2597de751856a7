package raterlimiter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	rl "github.com/raterlimiter/raterlimiter"
)

func TestAlgoString(t *testing.T) {
	var names []string
	for _, a := range []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log, rl.Slices, rl.Leaky} {
		names = append(names, a.String())
	}
	assert.Equal(t, []string{"fixed", "sliding", "token", "log", "slices", "leaky"}, names,
		"every algorithm, in the order of their values, as the HTTP API spells it")
	assert.Equal(t, "algo(9)", rl.Algo(9).String())
}

func TestErrorsAreDistinct(t *testing.T) {
	assert.False(t, errors.Is(rl.ErrClosed, rl.ErrUnavailable))
	assert.False(t, errors.Is(&rl.FieldError{Field: "id", Rule: "x"}, rl.ErrUnavailable))
	assert.True(t, errors.Is(&rl.FieldError{Field: "id", Rule: "x"}, rl.ErrInvalid))
}
