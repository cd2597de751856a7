package redisbackend_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// tally is what the checks of one id saw.
type tally struct {
	ok, failed atomic.Int64 // answered by Redis; failed (the fail mode)
}

// clusterLoad runs single checks from workers over rs until the returned
// stop is called, each worker pausing pace between checks, tallying each
// request's answers; every error must be the fail mode's
// (raterlimiter.ErrUnavailable), which it reports to t otherwise. stop
// waits for the workers, and runs at the test's end in any case, before the
// servers stop (even when a require ends the test early).
func clusterLoad(t *testing.T, b *redisbackend.Backend, rs []rl.Request, tallies []*tally, workers int, pace time.Duration) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(done) }); wg.Wait() }
	t.Cleanup(stop)
	for w := range workers {
		wg.Go(func() {
			for i := w; ; i += workers {
				select {
				case <-done:
					return
				default:
				}
				j := i % len(rs)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := b.CheckRate(ctx, rs[j])
				cancel()
				if err == nil {
					tallies[j].ok.Add(1)
					time.Sleep(pace)
					continue
				}
				tallies[j].failed.Add(1)
				assert.ErrorIs(t, err, rl.ErrUnavailable, "the fail mode's error, nothing else")
				time.Sleep(time.Millisecond) // the circuit answers at once: no busy loop
			}
		})
	}
	return stop
}

// count reads r's count on Redis (a peek), retrying while the cluster is
// settling.
func count(t *testing.T, b *redisbackend.Backend, r rl.Request) int64 {
	t.Helper()
	peek := r
	peek.Hits, peek.Peek = 0, true
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := b.CheckRate(context.Background(), peek)
		if err == nil {
			return d.Count
		}
		if time.Now().After(deadline) {
			t.Fatalf("peek of %s: %v", r.ID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterRequests are n requests over ids spread on every slot, the
// algorithms in turn, under a ten-year window with a limit no test reaches:
// each allowed hit adds exactly one to its count (a token bucket of a
// million refills one hit every five minutes, and a leaky bucket's queue
// holds more than the test sends).
func clusterRequests(prefix string, n int) []rl.Request {
	rs := make([]rl.Request, n)
	for i := range rs {
		a := check.Algos[i%len(check.Algos)]
		limit := int64(1_000_000)
		if a == rl.Log {
			limit = check.MaxLogLimit
		}
		rs[i] = rl.Request{ID: prefix + strconv.Itoa(i), Scale: check.MaxScale, Limit: limit, Hits: 1, Algo: a}
		if a == rl.Leaky {
			rs[i].Queue = check.MaxQueue // every hit waits its turn: none refused
		}
	}
	return rs
}

// TestClusterFailover kills a master of a Redis Cluster with replicas under
// load from single checks of every algorithm. While its replica is promoted,
// checks follow the fail mode (closed: an error matching
// raterlimiter.ErrUnavailable, no other error); once the cluster has settled
// every check is answered by Redis again, by itself; and nothing is counted
// twice: no id counts more hits than its checks, and after the failover
// each check counts exactly one. The surviving masters' ids lose nothing;
// the dead master's may lose the writes it acknowledged and had not yet
// replicated (Redis's replication is asynchronous: docs/redis.md).
func TestClusterFailover(t *testing.T) {
	c := startReplicatedCluster(t)
	b, err := redisbackend.NewWithProbe(redisbackend.Config{URL: c.URL()}, 50*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() }) // after the load stops: cleanups run last first
	rs := clusterRequests("failover-", 120)
	tallies := make([]*tally, len(rs))
	for i := range tallies {
		tallies[i] = &tally{}
	}
	dead := c.Nodes[0]
	owners, err := slotOwners(c)
	require.NoError(t, err)
	onDead := make([]bool, len(rs))
	for i, r := range rs {
		m, err := owners(tagOf(r.ID))
		require.NoError(t, err)
		onDead[i] = m == dead
	}

	stop := clusterLoad(t, b, rs, tallies, 8, 0)
	time.Sleep(300 * time.Millisecond)
	dead.Kill()
	promoted, took := waitClusterFailover(t, c, dead, 30*time.Second)
	t.Logf("%s promoted %v after the kill", promoted.Addr(), took)
	// Every check answered by Redis again, without help.
	recovered := time.Now()
	for {
		ok := true
		for _, r := range rs {
			peek := r
			peek.Hits, peek.Peek = 0, true
			if _, err := b.CheckRate(context.Background(), peek); err != nil {
				ok = false
			}
		}
		if ok {
			break
		}
		require.Less(t, time.Since(recovered), 15*time.Second, "the backend follows the failover by itself")
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("answering again %v after the promotion", time.Since(recovered))
	time.Sleep(200 * time.Millisecond)
	stop()

	var failed int64
	before := make([]int64, len(rs))
	for i, r := range rs {
		before[i] = count(t, b, r)
		ok, f := tallies[i].ok.Load(), tallies[i].failed.Load()
		failed += f
		assert.LessOrEqual(t, before[i], ok+f, "%s: counted more hits than it had checks", r.ID)
		if !onDead[i] {
			assert.GreaterOrEqual(t, before[i], ok, "%s, on a surviving master: lost a counted hit", r.ID)
		}
	}
	assert.Positive(t, failed, "the failover was seen")

	// After the failover, each check counts exactly one.
	const after = 5
	for range after {
		for _, r := range rs {
			_, err := b.CheckRate(context.Background(), r)
			require.NoError(t, err)
		}
	}
	for i, r := range rs {
		assert.Equal(t, before[i]+after, count(t, b, r), r.ID)
	}
}

// TestClusterReshard moves 600 slots from one master to another with
// redis-cli --cluster reshard while single checks and batches of every
// algorithm run: keys move under the load (the client follows ASK and MOVED
// redirections), no check fails, and every id counts exactly its checks.
func TestClusterReshard(t *testing.T) {
	c := startCluster(t)
	b, err := redisbackend.New(redisbackend.Config{URL: c.URL()})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() }) // after the load stops: cleanups run last first
	rs := clusterRequests("reshard-", 800)
	owners, err := slotOwners(c)
	require.NoError(t, err)
	was := make([]*redistest.Server, len(rs))
	for i, r := range rs {
		was[i], err = owners(tagOf(r.ID))
		require.NoError(t, err)
	}
	tallies := make([]*tally, len(rs))
	for i := range tallies {
		tallies[i] = &tally{}
	}
	// A steady load, which leaves redis-cli room to move the slots.
	stop := clusterLoad(t, b, rs, tallies, 6, 2*time.Millisecond)
	// Batches too: every item counts once, in order.
	var batches atomic.Int64
	var bwg sync.WaitGroup
	batching := make(chan struct{})
	var once sync.Once
	stopBatches := func() { once.Do(func() { close(batching) }); bwg.Wait() }
	t.Cleanup(stopBatches)
	bwg.Go(func() {
		for i := 0; ; i += 10 {
			select {
			case <-batching:
				return
			default:
			}
			idx := make([]int, 10)
			batch := make([]rl.Request, 10)
			for j := range batch {
				idx[j] = (i*7 + j*37) % len(rs)
				batch[j] = rs[idx[j]]
			}
			ds, err := b.CheckRates(context.Background(), batch)
			if !assert.NoError(t, err, "a batch during the reshard") {
				continue
			}
			for j := range ds {
				tallies[idx[j]].ok.Add(1)
			}
			batches.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	})
	time.Sleep(200 * time.Millisecond)
	out, err := reshard(c.Nodes[0], c.Nodes[1], 600)
	require.NoError(t, err, out)
	time.Sleep(200 * time.Millisecond)
	stop()
	stopBatches()

	moved := 0
	owners, err = slotOwners(c)
	require.NoError(t, err)
	for i, r := range rs {
		ok, f := tallies[i].ok.Load(), tallies[i].failed.Load()
		assert.Zero(t, f, "%s: no check fails during a reshard", r.ID)
		assert.Equal(t, ok, count(t, b, r), "%s: exactly its checks", r.ID)
		m, err := owners(tagOf(r.ID))
		require.NoError(t, err)
		if m != was[i] {
			assert.Equal(t, c.Nodes[1], m, "%s moved to the receiving master", r.ID)
			moved++
		}
	}
	t.Logf("%d batches; %d of %d ids moved", batches.Load(), moved, len(rs))
	assert.Positive(t, moved, "keys moved under the load")
}

// tagOf is a key in id's hash slot: its keys' hash tag.
func tagOf(id string) string { return "{" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "}" }

// slotOwners reads the slots' masters once, as the first live node of c
// answers, and returns a function that finds the master of a key's slot in
// that reading.
func slotOwners(c *cluster) (func(key string) (*redistest.Server, error), error) {
	for _, n := range c.All() {
		nodes, err := n.CLI("cluster", "nodes")
		if err != nil || !strings.Contains(nodes, "myself") {
			continue
		}
		return func(key string) (*redistest.Server, error) {
			slot := keySlot(key)
			addr, ok := slotOwner(nodes, slot)
			if !ok {
				return nil, fmt.Errorf("no master serves slot %d", slot)
			}
			for _, m := range c.All() {
				if m.Addr() == addr {
					return m, nil
				}
			}
			return nil, fmt.Errorf("slot %d served by %s, not ours", slot, addr)
		}, nil
	}
	return nil, errors.New("no node answers")
}

// keySlot is the Cluster hash slot of key: CRC16 (XMODEM) of its hash tag
// (the bytes between the first { and the next }, when not empty) or of the
// whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// slotOwner finds, in CLUSTER NODES output, the address of the master that
// serves slot.
func slotOwner(nodes string, slot int) (string, bool) {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				addr, _, _ := strings.Cut(f[1], "@")
				return addr, true
			}
		}
	}
	return "", false
}

// TestSlotOwner reads CLUSTER NODES as Redis 7 prints it: ranges and
// single slots, a migrating slot in brackets, replicas and failed masters
// skipped.
func TestSlotOwner(t *testing.T) {
	const nodes = `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383 [10924->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master,fail - 0 1426238316232 5 connected 100
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460
`
	for _, tc := range []struct {
		slot int
		addr string
		ok   bool
	}{
		{0, "127.0.0.1:30001", true},
		{5460, "127.0.0.1:30001", true},
		{5461, "127.0.0.1:30002", true},
		{10924, "127.0.0.1:30003", true},
		{16383, "127.0.0.1:30003", true},
		{16384, "", false},
	} {
		addr, ok := slotOwner(nodes, tc.slot)
		assert.Equal(t, tc.ok, ok, "slot %d", tc.slot)
		assert.Equal(t, tc.addr, addr, "slot %d", tc.slot)
	}
}

// TestKeySlot: the slots Redis's CLUSTER KEYSLOT gives (values from the
// Cluster specification and a live server).
func TestKeySlot(t *testing.T) {
	assert.Equal(t, 12739, keySlot("123456789"), "CRC16/XMODEM's check value 0x31C3")
	assert.Equal(t, keySlot("user1000"), keySlot("{user1000}.following"), "hash tags")
	assert.Equal(t, keySlot("{}x"), keySlot("{}x"), "an empty tag hashes the whole key")
	s := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	for _, k := range []string{"a", "foo", "{user1000}.following", "rl:{YWxpY2U}:w:60000", "{}x", "x{}{y}"} {
		out, err := s.CLI("cluster", "keyslot", k)
		require.NoError(t, err)
		assert.Equal(t, strings.TrimSpace(out), strconv.Itoa(keySlot(k)), k)
	}
}

// waitClusterFailover waits, up to timeout, until every live node of c
// reports cluster_state:ok and a replica has taken the slots of dead, a
// master killed before; it returns the promoted replica and how long it
// took from the call.
func waitClusterFailover(t testing.TB, c *cluster, dead *redistest.Server, timeout time.Duration) (*redistest.Server, time.Duration) {
	t.Helper()
	start := time.Now()
	var promoted *redistest.Server
	for i, m := range c.Nodes {
		if m == dead {
			promoted = c.Replicas[i]
		}
	}
	if promoted == nil {
		t.Fatalf("%s is not a master of this cluster", dead.Addr())
	}
	for {
		ok := true
		repl, err := promoted.CLI("info", "replication")
		if err != nil || !strings.Contains(repl, "role:master") {
			ok = false
		}
		for _, n := range c.All() {
			if n == dead || !ok {
				continue
			}
			info, err := n.CLI("cluster", "info")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return promoted, time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("no failover of %s within %v", dead.Addr(), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reshard moves slots slots from master from to master to with
// redis-cli --cluster reshard (which migrates their keys), and returns
// its output.
func reshard(from, to *redistest.Server, slots int) (string, error) {
	fromID, err := from.CLI("cluster", "myid")
	if err != nil {
		return "", err
	}
	toID, err := to.CLI("cluster", "myid")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "reshard", from.Addr(),
		"--cluster-from", strings.TrimSpace(fromID), "--cluster-to", strings.TrimSpace(toID),
		"--cluster-slots", strconv.Itoa(slots), "--cluster-yes").CombinedOutput()
	return string(out), err
}

// cluster is a Redis Cluster of three masters, each on a redis-server of
// its own (redistest.StartClusterNode).
type cluster struct {
	// Nodes are the masters, in the order they were given to
	// redis-cli --cluster create.
	Nodes []*redistest.Server
	// Replicas are the replicas (startReplicatedCluster), one per master.
	Replicas []*redistest.Server
}

// URL returns a URL naming every master: redis://first?addr=second&addr=third.
func (c *cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr()
	for i, n := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.Addr()
	}
	return u
}

// All returns every node, masters first.
func (c *cluster) All() []*redistest.Server {
	return append(append([]*redistest.Server(nil), c.Nodes...), c.Replicas...)
}

// startCluster starts three cluster-enabled servers, joins them with
// redis-cli --cluster create (no replicas), waits for cluster_state:ok on
// every node and registers their stop with t.Cleanup. Extra arguments go to
// every server (e.g. --cluster-require-full-coverage no).
func startCluster(t testing.TB, extra ...string) *cluster {
	t.Helper()
	return startNodes(t, 0, extra)
}

// startReplicatedCluster starts three masters, each with one replica, as
// startCluster does, and waits until every replica has synced with its
// master, so that a replica can take over when its master dies
// (waitClusterFailover). Nodes are marked failing after one second without
// an answer (cluster-node-timeout), so a failover takes two or three.
func startReplicatedCluster(t testing.TB, extra ...string) *cluster {
	t.Helper()
	return startNodes(t, 1, append([]string{"--cluster-node-timeout", "1000"}, extra...))
}

func startNodes(t testing.TB, replicas int, extra []string) *cluster {
	t.Helper()
	redistest.Available(t)
	dir := t.TempDir()
	n := 3 * (1 + replicas)
	nodes := make([]*redistest.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i], errs[i] = redistest.StartClusterNode(t, filepath.Join(dir, strconv.Itoa(i)), extra...)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("could not start redis-server: %v", err)
		}
	}
	// redis-cli takes the first three as masters and gives each a replica
	// from the rest.
	c := &cluster{Nodes: nodes[:3], Replicas: nodes[3:]}
	args := []string{"--cluster", "create"}
	for _, n := range nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := c.Nodes[0].CLI(args...); err != nil {
		t.Fatalf("cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for {
			info, err := n.CLI("cluster", "info")
			repl, err2 := n.CLI("info", "replication")
			synced := replicas == 0 || strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up")
			if err == nil && err2 == nil && strings.Contains(info, "cluster_state:ok") && synced {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s never reached cluster_state:ok and sync: %v\n%s\n%s", n.Addr(), err, info, repl)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Each master's replica, as the cluster paired them.
	if replicas > 0 {
		byID := map[string]*redistest.Server{}
		for _, n := range nodes {
			id, err := n.CLI("cluster", "myid")
			if err != nil {
				t.Fatalf("cluster myid: %v", err)
			}
			byID[strings.TrimSpace(id)] = n
		}
		// A master learns of its replica by gossip, which may come after
		// the replica's own link is up: ask until the deadline.
		var paired []*redistest.Server
		for _, m := range c.Nodes {
			id, _ := m.CLI("cluster", "myid")
			for {
				out, err := m.CLI("cluster", "replicas", strings.TrimSpace(id))
				if fields := strings.Fields(out); err == nil && len(fields) > 0 && byID[fields[0]] != nil {
					paired = append(paired, byID[fields[0]])
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("master %s has no replica: %v\n%s", m.Addr(), err, out)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		c.Replicas = paired
	}
	return c
}

func TestStartCluster(t *testing.T) {
	c := startCluster(t)
	require.Len(t, c.Nodes, 3)
	for _, n := range c.Nodes {
		out, err := n.CLI("cluster", "info")
		require.NoError(t, err)
		assert.Contains(t, out, "cluster_state:ok")
		assert.Contains(t, out, "cluster_known_nodes:3")
	}
	assert.Contains(t, c.URL(), "?addr=")
}
