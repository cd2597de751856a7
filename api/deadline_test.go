package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeadlinesStayWithinTimeoutPlusSlack(t *testing.T) {
	const timeout = time.Second
	d := newDeadlines(timeout)
	require.Equal(t, 100*time.Millisecond, d.slack)
	now := time.Now()
	steps := []time.Duration{0, 1, 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}
	var prev any
	for _, step := range steps {
		at := now.Add(step)
		ctx := d.get(at)
		dl, ok := ctx.Deadline()
		require.True(t, ok)
		assert.GreaterOrEqual(t, dl.Sub(at), timeout, "at +%v", step)
		assert.LessOrEqual(t, dl.Sub(at), timeout+d.slack, "at +%v", step)
		if step == 100*time.Millisecond {
			assert.NotSame(t, prev, ctx, "renewed after one slack period")
		}
		if step == 99*time.Millisecond {
			assert.Same(t, prev, ctx, "shared within one slack period")
		}
		prev = ctx
	}
}
