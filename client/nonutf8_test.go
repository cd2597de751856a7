package client_test

import (
	"context"
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

// TestIDsThatAreNotUTF8RoundTrip: the client sends any bytes as an id and
// the sidecar counts "\xff" and "\xfe" apart (its answers carry them as
// id_b64).
func TestIDsThatAreNotUTF8RoundTrip(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c, err := client.New(client.Config{URL: sidecartest.Serve(t, api.Config{Limiter: lim}), Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for _, id := range []string{"\xff", "\xfe"} {
		d, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: 60_000, Limit: 1, Hits: 1})
		require.NoError(t, err)
		assert.True(t, d.Allowed, "%q: its own counter", id)
	}
	d, err := c.CheckRate(ctx, rl.Request{ID: "\xff", Scale: 60_000, Limit: 1, Hits: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	bs, err := c.Buckets(ctx, "\xfe")
	require.NoError(t, err)
	require.Len(t, bs, 1)
	assert.EqualValues(t, 1, bs[0].Count)
}
