package redisbackend_test

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestTTL: with Redis's own clock, every key expires at the end of the last
// window that can read it, the id's index no earlier than its records.
func TestTTL(t *testing.T) {
	srv := redistest.Start(t)
	b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Timeout: 2 * time.Second})
	require.NoError(t, err)
	defer b.Close()
	pttl := func(key string) int64 {
		reply, err := srv.Do("PTTL", key)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(reply, ":"), reply)
		n, err := strconv.ParseInt(reply[1:], 10, 64)
		require.NoError(t, err)
		return n
	}
	const scale = 60_000
	const slackMS = 1000 // time between the check and reading the TTL, on a busy machine
	tests := []struct {
		name string
		algo rl.Algo
		code string
		hits int64
		// the TTL must lie in [lo, hi] ms, given reset (the decision's
		// ResetMS) and d (the decision)
		bounds func(d rl.Decision) (lo, hi int64)
	}{
		{"fixed: the window's end", rl.Fixed, "f", 1, func(d rl.Decision) (int64, int64) { return d.ResetMS - slackMS, d.ResetMS }},
		{"sliding: one window later", rl.Sliding, "s", 1, func(d rl.Decision) (int64, int64) { return d.ResetMS + scale - slackMS, d.ResetMS + scale }},
		{"token: when full again", rl.Token, "t", 3, func(d rl.Decision) (int64, int64) { return d.ResetMS - slackMS, d.ResetMS + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "ttl-" + tt.code
			d, err := b.CheckRate(context.Background(), rl.Request{ID: id, Scale: scale, Limit: 10, Hits: tt.hits, Algo: tt.algo})
			require.NoError(t, err)
			tag := "rl:{" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "}:"
			lo, hi := tt.bounds(d)
			// The index's TTL is read first: the record's, read later, can
			// only have shrunk since, so however slow the machine, an index
			// that lives as long as its record reads no less.
			index := pttl(tag + "i")
			got := pttl(tag + tt.code + ":" + strconv.Itoa(scale))
			assert.GreaterOrEqual(t, got, lo, "record TTL")
			assert.LessOrEqual(t, got, hi, "record TTL")
			assert.GreaterOrEqual(t, index, got, "the index lives as long as its records")
		})
	}
}
