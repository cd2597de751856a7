package main

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longScale is ten years: no window of it ends, and no token of it refills
// noticeably, while a test runs, so counts stay put between two processes
// and over a load of seconds. (A window of an hour ends at every full hour
// of the wall clock, which a test running across it sees as a reset.)
const longScale = "315360000000"

// snapCheck is a check_rate whose state a snapshot must carry.
type snapCheck struct {
	id, scale, limit, algo string
}

func (c snapCheck) path(hits int) string {
	v := url.Values{"id": {c.id}, "scale": {c.scale}, "limit": {c.limit}, "algo": {c.algo}, "hits": {strconv.Itoa(hits)}}
	return "/check_rate?" + v.Encode()
}

// state is what the sidecar shows of c's id: a peek's answer and the raw
// records of /buckets.
func (s *sidecar) state(t *testing.T, c snapCheck) (peek body, buckets string) {
	t.Helper()
	r := s.get(t, c.path(0))
	require.Contains(t, []int{200, 429}, r.status, r.body)
	b := s.get(t, "/buckets?"+url.Values{"id": {c.id}}.Encode())
	require.Equal(t, 200, b.status, b.body)
	return decode[body](t, r.body), b.body
}

// SIGTERM, then a restart with the same snapshot:
// every count identical, for every algorithm.
func TestE2ESnapshotSurvivesSIGTERM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.snap")
	checks := []snapCheck{
		{id: "fixed-user", scale: longScale, limit: "10", algo: "fixed"},
		{id: "fixed-over", scale: longScale, limit: "3", algo: "fixed"}, // denied hits are counted too
		{id: "sliding-user", scale: longScale, limit: "10", algo: "sliding"},
		{id: "token-user", scale: longScale, limit: "10", algo: "token"},
		{id: "token-frac", scale: "86400000", limit: "7", algo: "token"}, // fractional arrival time
		{id: "log-user", scale: longScale, limit: "10", algo: "log"},
		{id: "slices-user", scale: longScale, limit: "10", algo: "slices"},
		{id: "leaky-user", scale: longScale, limit: "10", algo: "leaky"},
		{id: "odd \x00\xff\xfe\n bytes", scale: longScale, limit: "100", algo: "fixed"},
		{id: "é/日本?&=", scale: longScale, limit: "100", algo: "token"},
	}
	a := start(t, nil, "-snapshot", path)
	for i, c := range checks {
		r := a.get(t, c.path(i%3+2))
		require.Contains(t, []int{200, 429}, r.status, r.body)
		r = a.get(t, c.path(1))
		require.Contains(t, []int{200, 429}, r.status, r.body)
	}
	peeks := make([]body, len(checks))
	raw := make([]string, len(checks))
	for i, c := range checks {
		peeks[i], raw[i] = a.state(t, c)
		require.NotZero(t, peeks[i].Count, "%q", c.id)
	}
	require.NoError(t, a.stop(t))
	assert.Contains(t, a.logs(), `msg="snapshot written"`)

	b := start(t, nil, "-snapshot", path)
	assert.Contains(t, b.logs(), `msg="snapshot loaded"`)
	assert.Contains(t, b.logs(), "records="+strconv.Itoa(len(checks)))
	for i, c := range checks {
		p, bk := b.state(t, c)
		assert.Equal(t, peeks[i].Count, p.Count, "%q (%s): count", c.id, c.algo)
		assert.Equal(t, peeks[i].Remaining, p.Remaining, "%q (%s): remaining", c.id, c.algo)
		assert.Equal(t, peeks[i].Allowed, p.Allowed, "%q (%s): allowed", c.id, c.algo)
		assert.JSONEq(t, raw[i], bk, "%q (%s): records", c.id, c.algo)
	}
	require.NoError(t, b.stop(t))
}

// kill -9 with periodic snapshots loses at most one interval of counts:
// what a restart restores is never more than was counted, and once a
// snapshot has been written after the last count (the next tick's), it is
// everything. How long that took is logged; only a saver that stopped
// writing crosses the test's bound (100 intervals).
func TestE2ESnapshotKill9LosesAtMostOneInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	path := filepath.Join(t.TempDir(), "limits.snap")
	checks := []snapCheck{
		{id: "k-fixed", scale: longScale, limit: "1000000000", algo: "fixed"},
		{id: "k-sliding", scale: longScale, limit: "1000000000", algo: "sliding"},
		{id: "k-token", scale: longScale, limit: "1000000", algo: "token"},
	}
	s := start(t, nil, "-snapshot", path, "-snapshot-interval", interval.String())

	// Hit the three ids in turn, across several ticks.
	last := make([]int64, len(checks))
	deadline := time.Now().Add(5 * interval)
	for i := 0; time.Now().Before(deadline); i++ {
		k := i % len(checks)
		r := s.get(t, checks[k].path(1))
		require.Equal(t, 200, r.status, r.body)
		last[k] = decode[body](t, r.body).Count
	}
	// Two snapshots renamed into place after the last count: the second
	// was taken after the first was written, so after every count.
	lastCount := time.Now()
	mtime := func() time.Time {
		fi, err := os.Stat(path)
		if err != nil {
			return time.Time{}
		}
		return fi.ModTime()
	}
	var seen []time.Time
	for end := lastCount.Add(100 * interval); len(seen) < 2; {
		require.True(t, time.Now().Before(end), "no two snapshots written in %v after the last count", 100*interval)
		if m := mtime(); m.After(lastCount) && (len(seen) == 0 || m.After(seen[len(seen)-1])) {
			seen = append(seen, m)
		}
		time.Sleep(5 * time.Millisecond) // polling a file's time: nothing to wait on
	}
	t.Logf("snapshots written %v and %v after the last count (interval %v)",
		seen[0].Sub(lastCount).Round(time.Millisecond), seen[1].Sub(lastCount).Round(time.Millisecond), interval)
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGKILL))
	<-s.Exited()
	assert.NotContains(t, s.logs(), "snapshot written", "no final snapshot after kill -9")

	r := start(t, nil, "-snapshot", path)
	for k, c := range checks {
		p, _ := r.state(t, c)
		assert.Equal(t, last[k], p.Count, "%s: restored from the last snapshot, written after the last count", c.id)
	}
	require.NoError(t, r.stop(t))
}

// A corrupt snapshot is refused with a message that
// names it, unless -snapshot-ignore-corrupt.
func TestE2ECorruptSnapshotIsRefused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.snap")
	s := start(t, nil, "-snapshot", good)
	require.Equal(t, 200, s.get(t, snapCheck{id: "u", scale: longScale, limit: "9", algo: "fixed"}.path(1)).status)
	require.NoError(t, s.stop(t))
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0x40
	for _, tc := range []struct {
		name, msg string
		data      []byte
	}{
		{name: "flipped byte", data: flipped, msg: "checksum mismatch"},
		{name: "truncated", data: data[:len(data)-3], msg: "checksum mismatch"},
		{name: "foreign", data: []byte("PK\x03\x04 not a snapshot"), msg: "bad magic"},
		{name: "empty", data: []byte{}, msg: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "limits.snap")
			require.NoError(t, os.WriteFile(path, tc.data, 0o600))
			code, _, stderr := runBinary(t, nil, "-listen", "127.0.0.1:0", "-snapshot", path)
			assert.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, path)
			assert.Contains(t, stderr, tc.msg)
			assert.Contains(t, stderr, "-snapshot-ignore-corrupt")
			assert.NotContains(t, stderr, "listening")

			s := start(t, nil, "-snapshot", path, "-snapshot-ignore-corrupt")
			assert.Contains(t, s.logs(), "level=WARN")
			assert.Contains(t, s.logs(), path)
			p, _ := s.state(t, snapCheck{id: "u", scale: longScale, limit: "9", algo: "fixed"})
			assert.Zero(t, p.Count, "started empty")
			require.NoError(t, s.stop(t))
			kept, err := os.ReadFile(path + ".corrupt")
			require.NoError(t, err, "the refused file is kept aside")
			assert.Equal(t, tc.data, kept)
		})
	}
}

func TestE2ESnapshotFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "limits.snap")
	for _, tc := range []struct {
		name string
		args []string
		msg  string
		code int // the exit status; 0 means 2, a usage error
	}{
		{name: "interval without a file", args: []string{"-snapshot-interval", "1s"}, msg: "-snapshot-interval needs -snapshot"},
		{name: "negative interval", args: []string{"-snapshot", "x", "-snapshot-interval", "-1s"}, msg: "must not be negative"},
		{name: "redis backend", args: []string{"-snapshot", "x", "-backend", "redis"}, msg: "-snapshot applies only to -backend memory; with -backend redis it would do nothing"},
		{name: "directory missing", args: []string{"-snapshot", missing}, msg: missing + " cannot be written: its directory " + filepath.Dir(missing) + " does not exist", code: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, nil, append([]string{"-listen", "127.0.0.1:0"}, tc.args...)...)
			want := tc.code
			if want == 0 {
				want = 2
			}
			assert.Equal(t, want, code, stderr)
			assert.Contains(t, stderr, tc.msg)
		})
	}
}

// TestE2ESnapshotFailuresAreSeen: temporary files a crash left are removed
// at start; when writes start failing, /metrics counts them and /healthz
// reports the snapshot stale; and a final snapshot that fails on SIGTERM
// makes the exit status 1, with "stopped" logged last.
func TestE2ESnapshotFailuresAreSeen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "limits.snap")
	leftover := filepath.Join(dir, ".limits.snap.tmp-123456")
	require.NoError(t, os.WriteFile(leftover, []byte("half a snapshot"), 0o600))

	s := start(t, nil, "-snapshot", path, "-snapshot-interval", "200ms")
	_, err := os.Stat(leftover)
	assert.True(t, os.IsNotExist(err), "the crash's temporary file was removed at start")
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 10*time.Second, 20*time.Millisecond, "a periodic snapshot")
	assert.Equal(t, "ok", s.get(t, "/healthz").body)

	require.NoError(t, os.RemoveAll(dir)) // every write fails from now on
	require.Eventually(t, func() bool {
		r := s.get(t, "/healthz")
		return r.status == 200 && strings.Contains(r.body, "snapshot stale") && r.header.Get("X-RateLimiter-Stale") != ""
	}, 10*time.Second, 50*time.Millisecond, "/healthz reports the stale snapshot")
	m := s.get(t, "/metrics").body
	assert.Regexp(t, `raterlimiter_snapshot_failures_total [1-9]`, m)
	assert.Regexp(t, `raterlimiter_snapshot_last_success_timestamp_seconds 1\.\d+e\+09`, m)

	err = s.stop(t)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "a failed final snapshot fails the run")
	assert.Equal(t, 1, ee.ExitCode())
	logs := strings.TrimSpace(s.logs())
	last := logs[strings.LastIndexByte(logs, '\n')+1:]
	assert.True(t, strings.HasPrefix(last, "raterlimiter: ") && strings.Contains(last, "the final snapshot was not written"),
		"the last line says why the run failed: %s", last)
	assert.Contains(t, logs, `msg="raterlimiter stopped with an error"`)
	assert.NotContains(t, logs, `msg="raterlimiter stopped"`, "never \"stopped\" as if all went well")
}
