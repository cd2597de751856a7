package snapshot_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/snapshot"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

const t0 = 1_700_000_040_000 // limitertest.T0 in Unix ms

func newLimiter(t *testing.T, clock *limitertest.Clock, shards int) *memory.Limiter {
	t.Helper()
	l := memory.New(memory.Config{Shards: shards, Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 200_000})
	t.Cleanup(func() { l.Close() })
	return l
}

// dump returns every record of l, sorted.
func dump(t *testing.T, l *memory.Limiter) []snapshot.Record {
	t.Helper()
	var out []snapshot.Record
	require.NoError(t, memstore.MustOf(l).Scan(context.Background(), func(r memstore.Record) bool {
		r.ID = strings.Clone(r.ID)
		out = append(out, r)
		return true
	}))
	slices.SortFunc(out, func(a, b snapshot.Record) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		if a.Scale != b.Scale {
			return int(a.Scale - b.Scale)
		}
		if a.Algo != b.Algo {
			return int(a.Algo) - int(b.Algo)
		}
		if a.State.Created != b.State.Created {
			return int(a.State.Created - b.State.Created)
		}
		return cmp.Compare(a.State.Count, b.State.Count) // two slice counts of one scale
	})
	return out
}

// oddIDs are ids with bytes a text format would trip on, and ids that are
// prefixes of one another (the format shares prefixes).
var oddIDs = []string{
	"\x00", "\x00\x00", "\xff\xfe\xfd", "a\nb\r\n", "é日本", "user", "user:1", "user:10", "user:1\x00",
	" ", "%2F/../", strings.Repeat("x", 1024), strings.Repeat("\x80", 150_000),
}

// populate makes records of every algorithm with states worth keeping: a
// sliding window with its previous window, a fixed window counted past its
// limit (fixed counts denied hits too), token buckets with fractional
// theoretical arrival times. It leaves the clock at t0+60s, where each id has
// 9 records of which 7 are live (the first minute's fixed windows ended).
func populate(t *testing.T, l rl.Limiter, clock *limitertest.Clock, ids []string) {
	t.Helper()
	ctx := context.Background()
	check := func(id string, scale, limit, hits int64, a rl.Algo) {
		_, err := l.CheckRate(ctx, rl.Request{ID: id, Scale: time.Duration(scale) * time.Millisecond, Limit: limit, Hits: hits, Algo: a})
		require.NoError(t, err)
	}
	for i, id := range ids {
		clock.Set(time.UnixMilli(t0 + int64(i)))
		check(id, 60_000, 100, 3, rl.Sliding) // the previous window of the one below
		check(id, 1000, 5, 7, rl.Fixed)       // expired by the end
		check(id, 60_000, 10, 2, rl.Fixed)    // expired by the end
		check(id, 1000, 3, 1, rl.Token)
		check(id, 86_400_000, 7, 2, rl.Token)
	}
	clock.Set(time.UnixMilli(t0 + 60_000))
	for _, id := range ids {
		check(id, 60_000, 100, 4, rl.Sliding)
		check(id, 60_000, 10, 1, rl.Fixed)
		check(id, 1000, 5, 7, rl.Fixed)
		check(id, 1000, 3, 1, rl.Token) // TAT 333.33.. ms ahead
		check(id, 7, 3, 1, rl.Token)    // TAT 2.33.. ms ahead
	}
}

// live returns the records of rs not expired at now.
func live(rs []snapshot.Record, now int64) []snapshot.Record {
	return slices.DeleteFunc(slices.Clone(rs), func(r snapshot.Record) bool {
		return algo.Expired(r.Algo, r.Scale, r.State, now)
	})
}

func TestRoundTripKeepsEveryAlgorithmsState(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shardsFrom     int
		shardsTo       int
		chunk, workers int
	}{
		{name: "one shard, default chunks", shardsFrom: 1, shardsTo: 1},
		{name: "three shards to two, chunks of one", shardsFrom: 3, shardsTo: 2, chunk: 1, workers: 1},
		{name: "two shards to five, chunks of seven", shardsFrom: 2, shardsTo: 5, chunk: 7, workers: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.UnixMilli(t0))
			src := newLimiter(t, clock, tc.shardsFrom)
			populate(t, src, clock, oddIDs)
			all := dump(t, src)
			require.Len(t, all, 9*len(oddIDs))
			want := live(all, clock.Now().UnixMilli())
			require.Len(t, want, 7*len(oddIDs))

			path := filepath.Join(t.TempDir(), "snap")
			ctx := context.Background()
			ws, err := snapshot.Write(ctx, path, src, snapshot.WriteOptions{ChunkRecords: tc.chunk, Clock: clock.Now})
			require.NoError(t, err)
			assert.Equal(t, len(want), ws.Records)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, fi.Size(), ws.Bytes)

			dst := newLimiter(t, clock, tc.shardsTo)
			ls, err := snapshot.Load(ctx, path, dst, snapshot.LoadOptions{Clock: clock.Now, Workers: tc.workers})
			require.NoError(t, err)
			assert.Equal(t, len(want), ls.Loaded)
			assert.Zero(t, ls.Expired)
			assert.Equal(t, want, dump(t, dst))

			// The same checks now get the same answers from both.
			clock.Advance(123 * time.Millisecond)
			for _, id := range oddIDs {
				for _, r := range []rl.Request{
					{ID: id, Scale: time.Minute, Limit: 100, Hits: 1, Algo: rl.Sliding},
					{ID: id, Scale: time.Minute, Limit: 10, Hits: 1, Algo: rl.Fixed},
					{ID: id, Scale: time.Second, Limit: 3, Hits: 1, Algo: rl.Token},
					{ID: id, Scale: 24 * time.Hour, Limit: 7, Hits: 3, Algo: rl.Token},
					{ID: id, Scale: 7 * time.Millisecond, Limit: 3, Peek: true, Algo: rl.Token},
				} {
					a, err := src.CheckRate(ctx, r)
					require.NoError(t, err)
					b, err := dst.CheckRate(ctx, r)
					require.NoError(t, err)
					assert.Equal(t, a, b, "%q %v", id, r.Algo)
				}
			}
		})
	}
}

func TestLoadDropsWhatExpiredMeanwhile(t *testing.T) {
	// Written at t0+500 with the windows aligned to t0 (a multiple of 1000):
	// fixed lives to the end of its window, sliding one window more, token
	// until its theoretical arrival time (t0+500 + 1000/10 = t0+600).
	const base = t0
	for _, tc := range []struct {
		name string
		at   int64
		want []rl.Algo
	}{
		{name: "at once", at: base + 500, want: []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log}},
		{name: "just before the token bucket is full", at: base + 599, want: []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log}},
		{name: "token bucket full again", at: base + 600, want: []rl.Algo{rl.Fixed, rl.Sliding, rl.Log}},
		{name: "last ms of the fixed window", at: base + 999, want: []rl.Algo{rl.Fixed, rl.Sliding, rl.Log}},
		{name: "next window", at: base + 1000, want: []rl.Algo{rl.Sliding, rl.Log}},
		{name: "last ms the log holds its hit", at: base + 1499, want: []rl.Algo{rl.Sliding, rl.Log}},
		{name: "the log's hit has left", at: base + 1500, want: []rl.Algo{rl.Sliding}},
		{name: "last ms the sliding window weighs it", at: base + 1999, want: []rl.Algo{rl.Sliding}},
		{name: "two windows later", at: base + 2000, want: nil},
		{name: "a year later", at: base + 365*86_400_000, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.UnixMilli(base + 500))
			src := newLimiter(t, clock, 2)
			ctx := context.Background()
			for _, a := range check.Algos {
				_, err := src.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Second, Limit: 10, Hits: 1, Algo: a})
				require.NoError(t, err)
			}
			path := filepath.Join(t.TempDir(), "snap")
			_, err := snapshot.Write(ctx, path, src, snapshot.WriteOptions{Clock: clock.Now})
			require.NoError(t, err)

			clock.Set(time.UnixMilli(tc.at))
			dst := newLimiter(t, clock, 2)
			st, err := snapshot.Load(ctx, path, dst, snapshot.LoadOptions{Clock: clock.Now})
			require.NoError(t, err)
			var got []rl.Algo
			for _, r := range dump(t, dst) {
				got = append(got, r.Algo)
			}
			// slices: 60 slices of 17 ms, the one holding the hit leaves
			// 60 slices after its start; leaky: drained, as token.
			want := slices.Clone(tc.want)
			if tc.at < (algo.Bucket(base+500, 17)+60)*17 {
				want = append(want, rl.Slices)
			}
			if tc.at < base+600 {
				want = append(want, rl.Leaky)
			}
			if len(want) == 0 {
				want = nil
			}
			assert.Equal(t, want, got)
			assert.Equal(t, len(want), st.Loaded)
			assert.Equal(t, len(check.Algos)-len(want), st.Expired)
		})
	}
}

func TestWriteLeavesOutExpiredRecords(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 1)
	ctx := context.Background()
	_, err := l.CheckRate(ctx, rl.Request{ID: "old", Scale: time.Second, Limit: 1, Hits: 1})
	require.NoError(t, err)
	clock.Advance(time.Second)
	_, err = l.CheckRate(ctx, rl.Request{ID: "new", Scale: time.Second, Limit: 1, Hits: 1})
	require.NoError(t, err)
	// Live is published by the actor after it answers a check
	// (memstore.Stats), so it may lag the answers by an instant: wait for it.
	// Write itself does not depend on the gauge.
	require.Eventually(t, func() bool { return memstore.MustOf(l).Stats().Live == 2 }, 10*time.Second, time.Millisecond,
		"the sweeper is off: both records are in the store")
	ws, err := snapshot.Write(ctx, filepath.Join(t.TempDir(), "snap"), l, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	assert.Equal(t, 1, ws.Records)
}

// goodSnapshot returns the bytes of a valid snapshot of a few records.
func goodSnapshot(t testing.TB) []byte {
	t.Helper()
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := memory.New(memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
	defer l.Close()
	ctx := context.Background()
	for i, id := range []string{"a", "ab", "b\x00", "user:1"} {
		_, err := l.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 10, Hits: int64(i + 1), Algo: check.Algos[i%3]})
		require.NoError(t, err)
	}
	path := filepath.Join(t.TempDir(), "snap")
	_, err := snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// withCRC replaces the last four bytes of b by the checksum of the rest, as
// a foreign writer that knows the format would.
func withCRC(b []byte) []byte {
	b = slices.Clone(b)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestCorruptFilesAreRefusedNamingTheFile(t *testing.T) {
	good := goodSnapshot(t)
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{name: "empty file", data: []byte{}, msg: "empty file"},
		{name: "wrong magic", data: mutate(func(b []byte) []byte { b[0] = 'X'; return b }), msg: "bad magic"},
		{name: "foreign file", data: []byte("{\"buckets\": []}\n"), msg: "bad magic"},
		{name: "wrong version", data: withCRC(mutate(func(b []byte) []byte { b[7] = 4; return b })), msg: "unsupported format version 4"},
		{name: "version 0", data: withCRC(mutate(func(b []byte) []byte { b[7] = 0; return b })), msg: "unsupported format version 0"},
		{name: "flipped byte in a record", data: mutate(func(b []byte) []byte { b[20] ^= 0x10; return b }), msg: "checksum mismatch"},
		{name: "flipped byte in the checksum", data: mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), msg: "checksum mismatch"},
		{name: "truncated in the records", data: good[:len(good)/2], msg: "checksum mismatch"},
		{name: "truncated header", data: good[:10], msg: "truncated"},
		{name: "only the magic", data: good[:6], msg: "truncated header"},
		{name: "one byte short", data: good[:len(good)-1], msg: "checksum mismatch"},
		{name: "trailing garbage", data: append(slices.Clone(good), 0), msg: "checksum mismatch"},
		{name: "trailing garbage under a valid checksum", data: withCRC(append(slices.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0)), msg: "bytes after the trailer"},
		{name: "wrong record count under a valid checksum", data: withCRC(mutate(func(b []byte) []byte { b[len(b)-5]++; return b })), msg: "the trailer counts 5 records, the file holds 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "limits.snap")
			require.NoError(t, os.WriteFile(path, tc.data, 0o600))
			clock := limitertest.NewClock(time.UnixMilli(t0))
			l := newLimiter(t, clock, 2)
			_, err := snapshot.Load(context.Background(), path, l, snapshot.LoadOptions{Clock: clock.Now})
			require.Error(t, err)
			assert.ErrorIs(t, err, snapshot.ErrCorrupt)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Zero(t, memstore.MustOf(l).Stats().Live, "nothing is restored from a refused file")

			var logs bytes.Buffer
			st, err := snapshot.Load(context.Background(), path, l, snapshot.LoadOptions{
				Clock: clock.Now, IgnoreCorrupt: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			require.NoError(t, err)
			assert.True(t, st.Ignored)
			assert.ErrorIs(t, st.Err, snapshot.ErrCorrupt)
			assert.Zero(t, memstore.MustOf(l).Stats().Live)
			assert.Contains(t, logs.String(), "starting empty")
			assert.Contains(t, logs.String(), path)
			// The bad file is kept aside, so the next write cannot destroy it.
			assert.Equal(t, path+".corrupt", st.MovedTo)
			kept, err := os.ReadFile(path + ".corrupt")
			require.NoError(t, err)
			assert.Equal(t, tc.data, kept)
			_, err = os.Stat(path)
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func TestMissingFileIsAFreshStart(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 1)
	st, err := snapshot.Load(context.Background(), filepath.Join(t.TempDir(), "none"), l, snapshot.LoadOptions{})
	require.NoError(t, err)
	assert.True(t, st.Missing)
	assert.Zero(t, st.Loaded)
}

func TestUnreadableFileIsAnErrorEvenWhenIgnoringCorruption(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 1)
	dir := t.TempDir() // a directory is not a snapshot, and reading it fails
	_, err := snapshot.Load(context.Background(), dir, l, snapshot.LoadOptions{IgnoreCorrupt: true})
	require.Error(t, err)
	assert.NotErrorIs(t, err, snapshot.ErrCorrupt)
	assert.Contains(t, err.Error(), dir)
}

func TestFailedWriteKeepsThePreviousSnapshot(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	dir := t.TempDir()
	path := filepath.Join(dir, "snap")
	ctx := context.Background()

	l := memory.New(memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
	populate(t, l, clock, []string{"a", "b", "c"})
	_, err := snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		write func() error
		is    error
	}{
		{name: "the limiter closed mid-write", write: func() error {
			l2 := memory.New(memory.Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
			populate(t, l2, clock, []string{"x", "y"})
			l2.Close()
			_, err := snapshot.Write(ctx, path, l2, snapshot.WriteOptions{Clock: clock.Now})
			return err
		}, is: rl.ErrClosed},
		{name: "context canceled", write: func() error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := snapshot.Write(cctx, path, l, snapshot.WriteOptions{Clock: clock.Now, ChunkRecords: 1})
			return err
		}, is: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), path)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the previous snapshot is intact")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file is left behind")
			assert.Equal(t, "snap", entries[0].Name())
		})
	}
	l.Close()

	t.Run("directory not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into read-only directories")
		}
		require.NoError(t, os.Chmod(dir, 0o500))
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		l := newLimiter(t, clock, 1)
		_, err := snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now})
		require.Error(t, err)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after)
	})
}

func TestLoadCountsIDsTheLimiterRefuses(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := newLimiter(t, clock, 1)
	populate(t, src, clock, []string{"short", strings.Repeat("l", 2000)})
	path := filepath.Join(t.TempDir(), "snap")
	_, err := snapshot.Write(context.Background(), path, src, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)

	dst := memory.New(memory.Config{Shards: 1, Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 1024})
	defer dst.Close()
	st, err := snapshot.Load(context.Background(), path, dst, snapshot.LoadOptions{Clock: clock.Now})
	require.NoError(t, err)
	assert.Equal(t, 7, st.Loaded)
	assert.Equal(t, 7, st.Refused)
	assert.Equal(t, 7, memstore.MustOf(dst).Stats().Live)
}

func TestLoadStopsWhenTheTargetFails(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := newLimiter(t, clock, 1)
	populate(t, src, clock, []string{"a", "b"})
	path := filepath.Join(t.TempDir(), "snap")
	_, err := snapshot.Write(context.Background(), path, src, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	dst := memory.New(memory.Config{Shards: 1, Clock: clock.Now, SweepInterval: -1})
	dst.Close()
	_, err = snapshot.Load(context.Background(), path, dst, snapshot.LoadOptions{Clock: clock.Now})
	assert.ErrorIs(t, err, rl.ErrClosed)
	assert.Contains(t, err.Error(), path)
}

// A length field claiming a huge id in a tiny file allocates about what the
// file holds, not what it claims.
func TestHostileLengthAllocatesLittle(t *testing.T) {
	b := []byte("RLSNAP\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, memstore.MaxIDBytes) // 4 MiB, and a few bytes follow
	b = append(b, "abc"...)
	b = withCRC(append(b, 0, 0, 0, 0))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := snapshot.Read(bytes.NewReader(b), int64(len(b)), func(snapshot.Record) error { return nil })
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, snapshot.ErrCorrupt)
	assert.Contains(t, err.Error(), "truncated id")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
}

// Checks between the visits of a chunked write change the store under it:
// every record that stays is written once, with the state it had at its
// chunk's visit or later.
func TestChunkedWriteUnderConcurrentChecks(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 2)
	ctx := context.Background()
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = "id" + strconv.Itoa(rnd.IntN(100_000))
		_, err := l.CheckRate(ctx, rl.Request{ID: ids[i], Scale: time.Minute, Limit: 1000, Hits: 1})
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(seed, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := ids[r.IntN(len(ids))]
			if r.IntN(4) == 0 {
				id = "new" + strconv.Itoa(r.IntN(1_000_000)) // inserts between the visits
			}
			_, err := l.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 1000, Hits: 1})
			if !assert.NoError(t, err) {
				return
			}
		}
	}()
	path := filepath.Join(t.TempDir(), "snap")
	ws, err := snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now, ChunkRecords: 3})
	close(stop)
	<-done
	require.NoError(t, err)
	t.Logf("%d records in %d visits", ws.Records, ws.Visits)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	final := map[string]int64{}
	for _, r := range dump(t, l) {
		final[r.ID] = r.State.Count
	}
	seen := map[string]bool{}
	_, err = snapshot.Read(f, fi.Size(), func(r snapshot.Record) error {
		assert.False(t, seen[r.ID], "%q written twice", r.ID)
		seen[r.ID] = true
		assert.LessOrEqual(t, r.State.Count, final[r.ID], "%q", r.ID)
		return nil
	})
	require.NoError(t, err)
	for _, id := range ids {
		assert.True(t, seen[id], "%q, in the store before the write began, is missing", id)
	}
}

func TestReadOfAGoodSnapshot(t *testing.T) {
	good := goodSnapshot(t)
	var ids []string
	info, err := snapshot.Read(bytes.NewReader(good), int64(len(good)), func(r snapshot.Record) error {
		ids = append(ids, r.ID)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(t0), info.Written)
	assert.Equal(t, 4, info.Records)
	assert.ElementsMatch(t, []string{"a", "ab", "b\x00", "user:1"}, ids)

	// An error from fn stops the reading and comes back as it is.
	_, err = snapshot.Read(bytes.NewReader(good), int64(len(good)), func(snapshot.Record) error { return io.ErrShortBuffer })
	assert.ErrorIs(t, err, io.ErrShortBuffer)
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, snapshot.Probe(filepath.Join(dir, "snap")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe leaves nothing behind")

	// Each error names the path and what is wrong with its directory, not
	// the probe's temporary file, which the user never named.
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tc := range []struct{ name, path, want string }{
		{"directory missing", filepath.Join(dir, "no", "such", "snap"),
			"snapshot: " + filepath.Join(dir, "no", "such", "snap") + " cannot be written: its directory " + filepath.Join(dir, "no", "such") + " does not exist"},
		{"directory is a file", filepath.Join(file, "snap"),
			"snapshot: " + filepath.Join(file, "snap") + " cannot be written: " + file + " is not a directory"},
		{"path is a directory", dir, "snapshot: " + dir + " cannot be written: it is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := snapshot.Probe(tc.path)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.NotContains(t, err.Error(), "probe")
		})
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o500))
		err := snapshot.Probe(filepath.Join(ro, "snap"))
		require.Error(t, err)
		assert.Equal(t, "snapshot: "+filepath.Join(ro, "snap")+" cannot be written: no file can be created in "+ro+": permission denied", err.Error())
	}
}
