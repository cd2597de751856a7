package main

// What one client can make the memory backend hold, and where its
// snapshot goes, on the built binary: slice counts count toward
// -max-scales-per-id, -max-bucket-bytes bounds records of long ids, and a
// -snapshot path that is a symbolic link is written through.

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2ESliceCountsCountAsScales: one id cannot plant a Slices limit for
// every slice count from 2 to 600 under one scale (each up to 600 records,
// which every check naming a new scale used to read): each slice count is
// a scale for -max-scales-per-id (64 by default), and past it the check
// is a 400 naming the flag.
func TestE2ESliceCountsCountAsScales(t *testing.T) {
	s := start(t, nil, "-shards", "1")
	check := func(id string, scale, slices int, algo string) reply {
		v := url.Values{"id": {id}, "scale": {strconv.Itoa(scale)}, "limit": {"1000"}, "algo": {algo}}
		if slices > 0 {
			v.Set("slices", strconv.Itoa(slices))
		}
		return s.get(t, "/check_rate?"+v.Encode())
	}
	id := strings.Repeat("p", 1000) // a long id, as an attacker would choose
	require.Equal(t, 200, check(id, 600_000, 0, "fixed").status)
	require.Equal(t, 200, check(id, 600_000, 0, "token").status, "another algorithm of a scale it has")
	for n := 2; n <= 64; n++ { // 63 slice counts: 64 with the scale above
		r := check(id, 600_000, n, "slices")
		require.Equal(t, 200, r.status, "slices=%d: %s", n, r.body)
	}
	for _, c := range []struct {
		scale, slices int
		algo          string
	}{{600_000, 65, "slices"}, {600_000, 600, "slices"}, {1_200_000, 2, "slices"}, {1_200_000, 0, "fixed"}} {
		r := check(id, c.scale, c.slices, c.algo)
		if assert.Equal(t, 400, r.status, "scale %d slices %d", c.scale, c.slices) {
			assert.Contains(t, r.body, "-max-scales-per-id")
		}
	}
	assert.Equal(t, 200, check(id, 600_000, 64, "slices").status, "its limits go on counting")
	assert.Equal(t, 200, check(id, 600_000, 0, "leaky").status)
	assert.Equal(t, 200, check("someone-else", 600_000, 600, "slices").status, "other ids are not bound by it")
}

// TestE2EByteBudgetBoundsLongIDs: fresh ids of 1,000 bytes with algo
// slices, sent in batches, fill -max-bucket-bytes long before
// -max-buckets: the live records stay within the byte budget (48 bytes and
// the id a record), the rest is evicted, and the heap stays small. The
// default budget is 256 MiB.
func TestE2EByteBudgetBoundsLongIDs(t *testing.T) {
	code, stdout, stderr := runBinary(t, nil, "-h")
	require.Zero(t, code, stderr)
	assert.Contains(t, stdout, "\n  -max-bucket-bytes int  (RATERLIMITER_MAX_BUCKET_BYTES, default 268435456)\n", "safe by default")

	const budget = 4 << 20
	s := start(t, nil, "-shards", "1", "-max-bucket-bytes", strconv.Itoa(budget))
	pad := strings.Repeat("b", 990)
	var body strings.Builder
	sent := 0
	for batch := range 24 {
		body.Reset()
		body.WriteByte('[')
		for i := range 500 {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"id":"%s%05d-%03d","scale":%s,"limit":5,"algo":"slices","slices":600}`, pad, batch, i, longScale)
			sent++
		}
		body.WriteByte(']')
		r := s.do(t, "POST", "/check_rates", "application/json", body.String())
		require.Equal(t, 200, r.status, r.body)
	}
	st, err := sampleProc(http.DefaultClient, s.base, s.Cmd.Process.Pid)
	require.NoError(t, err)
	t.Logf("%d ids sent: %.0f live records, heap %s MiB, RSS %s MiB", sent, st.live, mib(st.heapAlloc), mib(float64(st.rss)))
	assert.LessOrEqual(t, st.live, float64(budget/(48+1000)), "live records past -max-bucket-bytes")
	assert.Greater(t, st.live, float64(budget/(48+1000))*0.9, "the budget is used")
	m := s.get(t, "/metrics")
	assert.Regexp(t, `raterlimiter_evicted_buckets_total [1-9]`, m.body, "the flood evicted records")
	assert.Less(t, st.heapAlloc, float64(64<<20), "the heap")
}

// TestE2ESnapshotThroughASymlink: -snapshot names a symbolic link to a
// file on another volume (missing at first): every write, periodic and
// final, goes to the link's target, the link stays a link, and a restart
// through the link finds the counts.
func TestE2ESnapshotThroughASymlink(t *testing.T) {
	root := t.TempDir()
	app, vol := filepath.Join(root, "app"), filepath.Join(root, "volume")
	require.NoError(t, os.Mkdir(app, 0o700))
	require.NoError(t, os.Mkdir(vol, 0o700))
	link, target := filepath.Join(app, "limits.snap"), filepath.Join(vol, "limits.snap")
	require.NoError(t, os.Symlink(target, link))
	isLink := func(what string) {
		t.Helper()
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "%s: -snapshot is still the link", what)
	}
	c := snapCheck{id: "volume-user", scale: longScale, limit: "100", algo: "fixed"}

	a := start(t, nil, "-snapshot", link, "-snapshot-interval", "200ms")
	require.Equal(t, 200, a.get(t, c.path(3)).status)
	a.WaitUntil(t, 10*time.Second, "a periodic snapshot on the volume", func() bool {
		_, err := os.Stat(target)
		return err == nil
	})
	isLink("after a periodic write")
	require.Equal(t, 200, a.get(t, c.path(4)).status)
	require.NoError(t, a.stop(t))
	isLink("after the final write")

	for round, want := range []int64{7, 9} {
		b := start(t, nil, "-snapshot", link)
		p, _ := b.state(t, c)
		assert.Equal(t, want, p.Count, "round %d: the count came back from the volume", round)
		require.Equal(t, 200, b.get(t, c.path(2)).status)
		require.NoError(t, b.stop(t))
		isLink("after a restart")
	}
	entries, err := os.ReadDir(app)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the link beside it")
}
