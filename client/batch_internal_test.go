package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// TestFlushLeavesOutEndedContexts: a caller whose context ended while its
// check waited in a batch gets its context's error, is not sent, and the
// others of the batch are decided in order.
func TestFlushLeavesOutEndedContexts(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c, err := New(Config{URL: tooltest.Serve(t, api.Config{Limiter: lim}), Timeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	r := rl.Request{ID: "u", Scale: time.Minute, Limit: 10, Hits: 1}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	batch := []*waiting{
		&waiting{ctx: context.Background(), r: r, reply: make(chan answerOf, 1)},
		&waiting{ctx: gone, r: r, reply: make(chan answerOf, 1)},
		&waiting{ctx: context.Background(), r: r, reply: make(chan answerOf, 1)},
	}
	b := newBatcher(c, 0, 0)
	t.Cleanup(func() { close(b.closed) })
	b.flush(&flight{batch: batch})
	first, left, last := <-batch[0].reply, <-batch[1].reply, <-batch[2].reply
	require.NoError(t, first.err)
	require.NoError(t, last.err)
	assert.Equal(t, int64(1), first.d.Count)
	assert.Equal(t, int64(2), last.d.Count)
	assert.ErrorIs(t, left.err, context.Canceled)
	d, err := lim.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Minute, Limit: 10, Peek: true})
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Count, "the ended caller was not counted")
}

// TestConnectionSettingsReachTheTransportAndTheBatcher: Config's
// connection cap is used, zero keeps the default, and a batch size turns
// batching on.
func TestConnectionSettingsReachTheTransportAndTheBatcher(t *testing.T) {
	c, err := New(Config{URL: "http://127.0.0.1:1", BatchMaxSize: 10, MaxConns: 3})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	assert.Equal(t, 3, c.hc.MaxConns)

	d, err := New(Config{URL: "http://127.0.0.1:1", BatchMaxSize: 10})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	assert.Equal(t, 256, d.hc.MaxConns)
	require.NotNil(t, d.batch)
}
