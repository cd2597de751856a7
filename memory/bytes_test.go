package memory_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
)

// TestMaxBucketBytesBindsLongIDs: with 1,000-byte ids the byte budget,
// spread over the shards, holds the records where MaxBuckets would let
// 1,000,000 of them in.
func TestMaxBucketBytesBindsLongIDs(t *testing.T) {
	const budget = 400_000
	l := memory.New(memory.Config{Shards: 2, MaxBuckets: 1_000_000, MaxBucketBytes: budget, SweepInterval: -1})
	defer l.Close()
	pad := strings.Repeat("k", 996)
	ctx := context.Background()
	for i := range 3000 {
		_, err := l.CheckRate(ctx, rl.Request{ID: pad + strconv.Itoa(i), Scale: time.Hour, Limit: 10, Hits: 1, Algo: rl.Slices, Slices: 600})
		require.NoError(t, err)
	}
	_, err := l.Sweep(ctx) // the shards publish their gauges before they answer it
	require.NoError(t, err)
	st := l.Stats()
	perRecord := 48 + 1000
	assert.LessOrEqual(t, st.Live, budget/perRecord+2, "records past the byte budget")
	assert.Greater(t, st.Live, budget/perRecord/2, "the budget is used")
	assert.Positive(t, st.Evicted)
}
