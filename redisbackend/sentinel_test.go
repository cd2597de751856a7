package redisbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestSentinelFailover runs a backend named by its Sentinel
// (redis://SENTINEL?master_set=NAME): it decides on the master the Sentinel
// names; when that master dies and the Sentinel promotes the replica, checks
// follow the fail mode meanwhile, then go to the new master by themselves,
// which holds the counts replicated before the failover.
func TestSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	b, err := redisbackend.NewWithProbe(redisbackend.Config{URL: st.URL()}, 50*time.Millisecond)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	rs := clusterRequests("sentinel-", 20)
	check := func(n int) {
		t.Helper()
		for range n {
			for _, r := range rs {
				_, err := b.CheckRate(ctx, r)
				require.NoError(t, err)
			}
		}
	}
	check(5)
	// Redis replicates asynchronously: wait until the replica has them.
	st.WaitReplicated(t, 10*time.Second)
	st.Master.Kill()
	var failed int
	for range 20 {
		_, err := b.CheckRate(ctx, rs[0])
		if err != nil {
			assert.ErrorIs(t, err, rl.ErrUnavailable, "the fail mode's error")
			failed++
		}
	}
	assert.Positive(t, failed, "checks fail closed while the master is gone")
	took := st.WaitFailover(t, 30*time.Second)
	t.Logf("the Sentinel promoted the replica %v after the kill", took)
	peek := rs[1]
	peek.Hits, peek.Peek = 0, true
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := b.CheckRate(ctx, peek); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the backend follows the Sentinel by itself")
		time.Sleep(20 * time.Millisecond)
	}
	check(5)
	// The checks that failed counted nothing (the master was gone, the
	// replica read-only), so every id counts exactly ten.
	for _, r := range rs {
		assert.Equal(t, int64(10), count(t, b, r), r.ID)
	}
}
