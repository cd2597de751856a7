package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerStartKillRestart(t *testing.T) {
	s := Start(t)
	reply, err := s.Do("SET", "k", "v")
	require.NoError(t, err)
	assert.Equal(t, "+OK", reply)
	s.Kill()
	_, err = s.Do("PING")
	require.Error(t, err, "a killed server must not answer")
	s.Restart(t)
	reply, err = s.Do("EXISTS", "k")
	require.NoError(t, err)
	assert.Equal(t, ":0", reply, "a restarted server starts empty")
}

func TestCluster(t *testing.T) {
	c := StartCluster(t)
	require.Len(t, c.Nodes, 3)
	for _, n := range c.Nodes {
		out, err := n.CLI("cluster", "info")
		require.NoError(t, err)
		assert.Contains(t, out, "cluster_state:ok")
		assert.Contains(t, out, "cluster_known_nodes:3")
	}
	assert.Contains(t, c.URL(), "?addr=")
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	s.Pause()
	_, err := s.command(100*time.Millisecond, "PING")
	require.Error(t, err, "a paused server must not answer")
	s.Resume()
	reply, err := s.Do("PING")
	require.NoError(t, err)
	assert.Equal(t, "+PONG", reply)
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
	assert.Equal(t, 12739, KeySlot("123456789"), "CRC16/XMODEM's check value 0x31C3")
	assert.Equal(t, KeySlot("user1000"), KeySlot("{user1000}.following"), "hash tags")
	assert.Equal(t, KeySlot("{}x"), KeySlot("{}x"), "an empty tag hashes the whole key")
	s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	for _, k := range []string{"a", "foo", "{user1000}.following", "rl:{YWxpY2U}:w:60000", "{}x", "x{}{y}"} {
		out, err := s.CLI("cluster", "keyslot", k)
		require.NoError(t, err)
		assert.Equal(t, strings.TrimSpace(out), strconv.Itoa(KeySlot(k)), k)
	}
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
