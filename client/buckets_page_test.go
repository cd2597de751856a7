package client_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/sidecartest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// TestBucketsFollowsPages: the sidecar answers /buckets two records a page;
// the client gathers them all, in order.
func TestBucketsFollowsPages(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c, err := client.New(client.Config{URL: sidecartest.Serve(t, api.Config{Limiter: lim, BucketsPage: 2}), Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for scale := int64(1000); scale <= 5000; scale += 1000 {
		_, err := c.CheckRate(ctx, rl.Request{ID: "p", Scale: scale, Limit: 5, Hits: 1})
		require.NoError(t, err)
	}
	bs, err := c.Buckets(ctx, "p")
	require.NoError(t, err)
	require.Len(t, bs, 5)
	for i, b := range bs {
		assert.Equal(t, int64(1000*(i+1)), b.Scale, strconv.Itoa(i))
	}
}
