package check_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

func TestBatchNamesTheItem(t *testing.T) {
	rs := []rl.Request{{ID: "a", Scale: time.Millisecond}, {ID: "b", Scale: time.Millisecond}, {ID: "c", Scale: 0}, {ID: "", Scale: 0}}
	err := check.Batch(rs, 0)
	var ie *rl.ItemError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 2, ie.Index)
	assert.ErrorIs(t, err, rl.ErrInvalid)
	assert.Equal(t, "raterlimiter: item 2: invalid Scale: 0s is outside 1ms to ten years (87600h)", err.Error())
	assert.NoError(t, check.Batch(rs[:2], 0))
	err = check.BatchWire(rs, 0)
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 2, ie.Index)
	assert.Equal(t, "raterlimiter: item 2: invalid scale: must be an integer from 1 to 315360000000 (milliseconds)", err.Error())
}

// TestOutOfBoundsIsValidatesError: the errors a parser takes from
// OutOfBounds are the ones ValidateWire gives for each field.
func TestOutOfBoundsIsValidatesError(t *testing.T) {
	ok := rl.Request{ID: "u", Scale: time.Second, Limit: 5, Hits: 1}
	for _, tt := range []struct {
		field string
		bad   func(*rl.Request)
	}{
		{"id", func(r *rl.Request) { r.ID = "abcd" }},
		{"scale", func(r *rl.Request) { r.Scale = 0 }},
		{"limit", func(r *rl.Request) { r.Limit = -1 }},
		{"hits", func(r *rl.Request) { r.Hits = check.MaxHits + 1 }},
		{"algo", func(r *rl.Request) { r.Algo = 200 }},
		{"slices", func(r *rl.Request) { r.Algo, r.Slices = rl.Slices, 601 }},
		{"queue", func(r *rl.Request) { r.Algo, r.Queue = rl.Leaky, 1<<20 }},
		{"max_delay_ms", func(r *rl.Request) { r.MaxDelay = -5 * time.Millisecond }},
	} {
		t.Run(tt.field, func(t *testing.T) {
			r := ok
			tt.bad(&r)
			assert.Equal(t, check.ValidateWire(r, 3), error(check.OutOfBounds(tt.field, 3)))
		})
	}
	assert.Contains(t, check.OutOfBounds("id", 0).Rule, "1024", "the default id bound")
	assert.Nil(t, check.OutOfBounds("policy", 0), "an unknown field")
}

func TestCounted(t *testing.T) {
	assert.Equal(t, int64(1), check.Counted(rl.Request{}).Hits, "a zero Hits counts one")
	assert.Equal(t, int64(0), check.Counted(rl.Request{Peek: true}).Hits, "a peek counts nothing")
	assert.Equal(t, int64(7), check.Counted(rl.Request{Hits: 7}).Hits)
}

func TestReset(t *testing.T) {
	assert.NoError(t, check.Reset("u", 0, 0), "scale 0: every scale")
	assert.NoError(t, check.Reset("u", time.Minute, 0))
	assert.ErrorIs(t, check.Reset("u", -time.Millisecond, 0), rl.ErrInvalid)
	assert.ErrorIs(t, check.Reset("", time.Minute, 0), rl.ErrInvalid)
	assert.ErrorIs(t, check.Reset("abcd", time.Minute, 3), rl.ErrInvalid)
}
