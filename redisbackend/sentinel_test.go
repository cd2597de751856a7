package redisbackend_test

import (
	"context"
	"strconv"
	"strings"
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
	st := startSentinel(t)
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
	waitReplicated(t, st, 10*time.Second)
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
	took := waitSentinelFailover(t, st, 30*time.Second)
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

// waitReplicated waits, up to timeout, until s's replica has acknowledged
// every write the master had taken when it was called. (WAIT would not do:
// it waits for the writes of its own connection only, and a fresh
// connection has none. Nor is a replica whose link is up sure to have
// them: after a diskless sync the master streams its writes only once the
// replica's first acknowledgement arrives, up to a second later.)
func waitReplicated(t testing.TB, s *sentinel, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var want int64 = -1
	for {
		info, err := s.Master.CLI("info", "replication")
		if err == nil {
			master, acked := replOffsets(info)
			if want < 0 {
				want = master
			}
			if want >= 0 && acked >= want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not acknowledge the master's writes within %v: %v\n%s", timeout, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replOffsets reads a master's INFO replication: its replication offset and
// the offset its first replica acknowledged (-1 when absent).
func replOffsets(info string) (master, acked int64) {
	master, acked = -1, -1
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
			master, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "slave0:"); ok {
			for _, kv := range strings.Split(v, ",") {
				if o, ok := strings.CutPrefix(kv, "offset="); ok {
					acked, _ = strconv.ParseInt(o, 10, 64)
				}
			}
		}
	}
	return master, acked
}

// TestReplOffsets reads a master's INFO replication: its offset and its
// replica's acknowledged one, -1 when absent.
func TestReplOffsets(t *testing.T) {
	for _, tc := range []struct {
		name          string
		info          string
		master, acked int64
	}{
		{"a replica behind", "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=39701,state=online,offset=0,lag=0\r\nmaster_repl_offset:17444\r\n", 17444, 0},
		{"caught up", "slave0:ip=127.0.0.1,port=1,state=online,offset=99,lag=0\nmaster_repl_offset:99\n", 99, 99},
		{"no replica", "role:master\r\nconnected_slaves:0\r\nmaster_repl_offset:5\r\n", 5, -1},
		{"nothing", "", -1, -1},
	} {
		master, acked := replOffsets(tc.info)
		assert.Equal(t, tc.master, master, tc.name)
		assert.Equal(t, tc.acked, acked, tc.name)
	}
}

// waitSentinelFailover waits, up to timeout, until s's Sentinel names the
// replica as the master, and returns how long that took.
func waitSentinelFailover(t testing.TB, s *sentinel, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		out, err := s.Sentinel.CLI("sentinel", "get-master-addr-by-name", s.Name)
		if err == nil && strings.Contains(out, strconv.Itoa(s.Replica.Port)) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("the Sentinel did not fail over within %v: %v %s", timeout, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sentinel is a master, its replica and a Redis Sentinel watching them.
type sentinel struct {
	Master, Replica, Sentinel *redistest.Server
	// Name is the master set's name, as clients ask the Sentinel for it.
	Name string
}

// URL names the Sentinel and the master set, as redisbackend.Config.URL
// (the client asks the Sentinel where the master is, and follows it).
func (s *sentinel) URL() string { return "redis://" + s.Sentinel.Addr() + "?master_set=" + s.Name }

// startSentinel starts a master, a replica synced with it and a Sentinel
// that declares the master down after one second without an answer and
// fails over to the replica (quorum 1), and registers their stop with
// t.Cleanup.
func startSentinel(t testing.TB) *sentinel {
	t.Helper()
	st := &sentinel{Name: "rlmaster"}
	st.Master = redistest.Start(t, "--repl-diskless-sync-delay", "0")
	st.Replica = redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(st.Master.Port), "--repl-diskless-sync-delay", "0")
	st.Sentinel = redistest.StartSentinel(t, "sentinel monitor "+st.Name+" 127.0.0.1 "+strconv.Itoa(st.Master.Port)+" 1\n"+
		"sentinel down-after-milliseconds "+st.Name+" 1000\n"+
		"sentinel failover-timeout "+st.Name+" 10000\n")
	deadline := time.Now().Add(30 * time.Second)
	for {
		repl, err := st.Replica.CLI("info", "replication")
		known, err2 := st.Sentinel.CLI("sentinel", "replicas", st.Name)
		if err == nil && err2 == nil && strings.Contains(repl, "master_link_status:up") && strings.Contains(known, strconv.Itoa(st.Replica.Port)) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica never synced, or the Sentinel never saw it: %v %v\n%s\n%s", err, err2, repl, known)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
