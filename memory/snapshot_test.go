package memory

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

const t0 = 1_700_000_040_000 // limitertest.T0 in Unix ms

func snapLimiter(t testing.TB, clock *limitertest.Clock, shards int) *Limiter {
	t.Helper()
	l := New(Config{Shards: shards, Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 200_000})
	t.Cleanup(func() { l.Close() })
	return l
}

// dump returns every record of l, expired or not, sorted; a Log record's
// entries are left out.
func dump(t *testing.T, l *Limiter) []record {
	t.Helper()
	var out []record
	for _, a := range l.actors {
		require.NoError(t, a.Do(context.Background(), func(s *buckets.Store, _ int64) {
			s.Scan(func(id string, scale int64, al rl.Algo, r algo.Record) bool {
				out = append(out, record{ID: strings.Clone(id), Scale: scale, Algo: al, State: r})
				return true
			})
		}))
	}
	slices.SortFunc(out, func(a, b record) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), cmp.Compare(a.Scale, b.Scale), cmp.Compare(a.Algo, b.Algo),
			cmp.Compare(a.State.Created, b.State.Created), cmp.Compare(a.State.Count, b.State.Count))
	})
	return out
}

// saved returns l's snapshot, copied chunk records per visit (0: Save's).
func saved(t testing.TB, l *Limiter, chunk int) ([]byte, saveStats) {
	t.Helper()
	if chunk == 0 {
		chunk = saveChunk
	}
	var b bytes.Buffer
	st, err := l.save(context.Background(), &b, chunk)
	require.NoError(t, err)
	return b.Bytes(), st
}

func load(l *Limiter, b []byte) (int, error) {
	return l.Load(context.Background(), bytes.NewReader(b), int64(len(b)))
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
func live(rs []record, now int64) []record {
	return slices.DeleteFunc(slices.Clone(rs), func(r record) bool {
		return algo.Expired(r.Algo, r.Scale, r.State, now)
	})
}

func TestSnapshotRoundTripKeepsEveryAlgorithmsState(t *testing.T) {
	for _, tc := range []struct {
		name       string
		shardsFrom int
		shardsTo   int
		chunk      int
	}{
		{name: "one shard, Save's chunks", shardsFrom: 1, shardsTo: 1},
		{name: "three shards to two, chunks of one", shardsFrom: 3, shardsTo: 2, chunk: 1},
		{name: "two shards to five, chunks of seven", shardsFrom: 2, shardsTo: 5, chunk: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.UnixMilli(t0))
			src := snapLimiter(t, clock, tc.shardsFrom)
			populate(t, src, clock, oddIDs)
			all := dump(t, src)
			require.Len(t, all, 9*len(oddIDs))
			want := live(all, clock.Now().UnixMilli())
			require.Len(t, want, 7*len(oddIDs))

			b, st := saved(t, src, tc.chunk)
			assert.Equal(t, len(want), st.records)

			dst := snapLimiter(t, clock, tc.shardsTo)
			n, err := load(dst, b)
			require.NoError(t, err)
			assert.Equal(t, len(want), n)
			assert.Equal(t, want, dump(t, dst))

			// The same checks now get the same answers from both.
			clock.Advance(123 * time.Millisecond)
			ctx := context.Background()
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

// TestLoadOfASnapshotOfTheFormerFileCode: testdata/v3.snap was written by
// the snapshot package this one replaced (every algorithm; three ids, one
// of them with NUL and 0xFF bytes), at 1_700_000_045_370. It loads into
// the records it held, and a Save at the same time gives it back byte for
// byte.
func TestLoadOfASnapshotOfTheFormerFileCode(t *testing.T) {
	fixture, err := os.ReadFile("testdata/v3.snap")
	require.NoError(t, err)
	clock := limitertest.NewClock(time.UnixMilli(1_700_000_045_370))
	l := snapLimiter(t, clock, 1)
	n, err := load(l, fixture)
	require.NoError(t, err)
	assert.Equal(t, 18, n)
	again, _ := saved(t, l, 0)
	assert.Equal(t, fixture, again, "the bytes on disk are unchanged")

	ctx := context.Background()
	for _, id := range []string{"user:1", "user:10", "b\x00\xff"} {
		bs, err := l.Buckets(ctx, id)
		require.NoError(t, err)
		require.Len(t, bs, 6, "%q: a record of each algorithm", id)
		for _, tc := range []struct {
			r    rl.Request
			want int64
		}{
			{rl.Request{ID: id, Scale: time.Hour, Limit: 100, Algo: rl.Fixed, Peek: true}, 10}, // 5 checks of 2 hits
			{rl.Request{ID: id, Scale: time.Hour, Limit: 100, Algo: rl.Sliding, Peek: true}, 5},
			{rl.Request{ID: id, Scale: time.Hour, Limit: 50, Algo: rl.Log, Peek: true}, 5},
			{rl.Request{ID: id, Scale: time.Hour, Limit: 50, Algo: rl.Slices, Slices: 6, Peek: true}, 5},
		} {
			d, err := l.CheckRate(ctx, tc.r)
			require.NoError(t, err)
			assert.Equal(t, tc.want, d.Count, "%q %v", id, tc.r.Algo)
		}
		d, err := l.CheckRate(ctx, rl.Request{ID: id, Scale: time.Hour, Limit: 7, Algo: rl.Token, Peek: true})
		require.NoError(t, err)
		assert.Equal(t, int64(2), d.Remaining, "%q: 5 of the token bucket's 7 taken", id)
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
			src := snapLimiter(t, clock, 2)
			ctx := context.Background()
			for _, a := range check.Algos {
				_, err := src.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Second, Limit: 10, Hits: 1, Algo: a})
				require.NoError(t, err)
			}
			b, _ := saved(t, src, 0)

			clock.Set(time.UnixMilli(tc.at))
			dst := snapLimiter(t, clock, 2)
			n, err := load(dst, b)
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
			assert.Equal(t, len(want), n)
		})
	}
}

func TestSaveLeavesOutExpiredRecords(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := snapLimiter(t, clock, 1)
	ctx := context.Background()
	_, err := l.CheckRate(ctx, rl.Request{ID: "old", Scale: time.Second, Limit: 1, Hits: 1})
	require.NoError(t, err)
	clock.Advance(time.Second)
	_, err = l.CheckRate(ctx, rl.Request{ID: "new", Scale: time.Second, Limit: 1, Hits: 1})
	require.NoError(t, err)
	require.Len(t, dump(t, l), 2, "the sweeper is off: both records are in the store")
	b, st := saved(t, l, 0)
	assert.Equal(t, 1, st.records)
	var ids []string
	_, err = readSnapshot(bytes.NewReader(b), int64(len(b)), func(r record) error { ids = append(ids, r.ID); return nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, ids)
}

// TestLoadKeepsOtherRecords: a restored record replaces the limiter's
// record of its key; the limiter's other records stay.
func TestLoadKeepsOtherRecords(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	ctx := context.Background()
	src := snapLimiter(t, clock, 1)
	_, err := src.CheckRate(ctx, rl.Request{ID: "both", Scale: time.Minute, Limit: 10, Hits: 3})
	require.NoError(t, err)
	b, _ := saved(t, src, 0)

	dst := snapLimiter(t, clock, 2)
	for _, id := range []string{"both", "mine"} {
		_, err := dst.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 10, Hits: 5})
		require.NoError(t, err)
	}
	n, err := load(dst, b)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	for id, want := range map[string]int64{"both": 3, "mine": 5} {
		d, err := dst.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 10, Peek: true})
		require.NoError(t, err)
		assert.Equal(t, want, d.Count, id)
	}
}

// goodSnapshot returns a valid snapshot of a few records.
func goodSnapshot(t testing.TB) []byte {
	t.Helper()
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := New(Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
	defer l.Close()
	ctx := context.Background()
	for i, id := range []string{"a", "ab", "b\x00", "user:1"} {
		_, err := l.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 10, Hits: int64(i + 1), Algo: check.Algos[i%3]})
		require.NoError(t, err)
	}
	b, _ := saved(t, l, 0)
	return b
}

// withCRC replaces the last four bytes of b by the checksum of the rest, as
// a foreign writer that knows the format would.
func withCRC(b []byte) []byte {
	b = slices.Clone(b)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestCorruptSnapshotsAreRefused(t *testing.T) {
	good := goodSnapshot(t)
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{name: "empty", data: []byte{}, msg: "empty"},
		{name: "wrong magic", data: mutate(func(b []byte) []byte { b[0] = 'X'; return b }), msg: "bad magic"},
		{name: "foreign bytes", data: []byte("{\"buckets\": []}\n"), msg: "bad magic"},
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
		{name: "wrong record count under a valid checksum", data: withCRC(mutate(func(b []byte) []byte { b[len(b)-5]++; return b })), msg: "the trailer counts 5 records, the snapshot holds 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.UnixMilli(t0))
			l := snapLimiter(t, clock, 2)
			n, err := load(l, tc.data)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrCorruptSnapshot)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Zero(t, n)
			assert.Empty(t, dump(t, l), "nothing is restored from a refused snapshot")
		})
	}
}

// TestLoadVerifiesBeforeRestoring: a record the checksum cannot fault (a
// foreign writer's) near the end refuses the whole snapshot, and the
// records before it are not restored.
func TestLoadVerifiesBeforeRestoring(t *testing.T) {
	ok := func(id string) record {
		return record{ID: id, Scale: 60_000, Algo: rl.Fixed, State: algo.Record{Count: 5, Created: written - 1000, Modified: written - 10}}
	}
	var recs []record
	for i := range 2 * restoreBatch {
		recs = append(recs, ok("id"+strconv.Itoa(1000+i)))
	}
	last := ok("zz")
	last.State.Count = -1
	data := craft(append(recs, last)...)
	l := snapLimiter(t, limitertest.NewClock(time.UnixMilli(written-5)), 1) // the minute ends at written
	_, err := load(l, data)
	require.ErrorIs(t, err, ErrCorruptSnapshot)
	assert.Contains(t, err.Error(), "record 512: a negative count")
	assert.Empty(t, dump(t, l))
	n, err := load(l, craft(recs...))
	require.NoError(t, err)
	assert.Equal(t, 2*restoreBatch, n, "the same records without the bad one")
}

func TestLoadLeavesOutIDsTheLimiterRefuses(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := snapLimiter(t, clock, 1)
	populate(t, src, clock, []string{"short", strings.Repeat("l", 2000)})
	b, _ := saved(t, src, 0)

	var logs bytes.Buffer
	dst := New(Config{Shards: 1, Clock: clock.Now, SweepInterval: -1, MaxIDBytes: 1024, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer dst.Close()
	n, err := load(dst, b)
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	assert.Len(t, dump(t, dst), 7)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "longer than MaxIDBytes")
	assert.Contains(t, logs.String(), "records=7 max_id_bytes=1024")
}

func TestLoadStopsWhenTheLimiterIsClosed(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := snapLimiter(t, clock, 1)
	populate(t, src, clock, []string{"a", "b"})
	b, _ := saved(t, src, 0)
	dst := New(Config{Shards: 1, Clock: clock.Now, SweepInterval: -1})
	dst.Close()
	_, err := load(dst, b)
	assert.ErrorIs(t, err, rl.ErrClosed)
	assert.NotErrorIs(t, err, ErrCorruptSnapshot)
}

// failingWriter fails after n bytes.
type failingWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

func TestSaveErrors(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	ctx := context.Background()
	l := snapLimiter(t, clock, 2)
	populate(t, l, clock, oddIDs[:6])

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	closed := New(Config{Shards: 2, Clock: clock.Now, SweepInterval: -1})
	closed.Close()
	for _, tc := range []struct {
		name string
		save func(w io.Writer) error
		is   error
	}{
		{"context canceled", func(w io.Writer) error { return l.Save(canceled, w) }, context.Canceled},
		{"limiter closed", func(w io.Writer) error { return closed.Save(ctx, w) }, rl.ErrClosed},
		{"writer fails", func(io.Writer) error { return l.Save(ctx, &failingWriter{n: 100}) }, errDiskFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			err := tc.save(&b)
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), "memory: saving a snapshot")
		})
	}

	// A save stopped midway leaves bytes that Load refuses.
	full, _ := saved(t, l, 1)
	for cut := 1; cut < len(full); cut += 7 {
		_, err := load(snapLimiter(t, clock, 1), full[:cut])
		require.ErrorIs(t, err, ErrCorruptSnapshot, "cut at %d of %d", cut, len(full))
	}
}

// A length field claiming a huge id in a tiny snapshot allocates about what
// the snapshot holds, not what it claims.
func TestHostileLengthAllocatesLittle(t *testing.T) {
	b := []byte("RLSNAP\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, snapshotMaxID) // 1 MiB, and a few bytes follow
	b = append(b, "abc"...)
	b = withCRC(append(b, 0, 0, 0, 0))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readSnapshot(bytes.NewReader(b), int64(len(b)), func(record) error { return nil })
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrCorruptSnapshot)
	assert.Contains(t, err.Error(), "truncated id")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
}

// Checks between the visits of a chunked save change the store under it:
// every record that stays is written once, with the state it had at its
// chunk's visit or later.
func TestChunkedSaveUnderConcurrentChecks(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := snapLimiter(t, clock, 2)
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
	var b bytes.Buffer
	st, err := l.save(ctx, &b, 3)
	close(stop)
	<-done
	require.NoError(t, err)
	t.Logf("%d records in %d visits", st.records, st.visits)

	final := map[string]int64{}
	for _, r := range dump(t, l) {
		final[r.ID] = r.State.Count
	}
	seen := map[string]bool{}
	_, err = readSnapshot(bytes.NewReader(b.Bytes()), int64(b.Len()), func(r record) error {
		assert.False(t, seen[r.ID], "%q written twice", r.ID)
		seen[r.ID] = true
		assert.LessOrEqual(t, r.State.Count, final[r.ID], "%q", r.ID)
		return nil
	})
	require.NoError(t, err)
	for _, id := range ids {
		assert.True(t, seen[id], "%q, in the store before the save began, is missing", id)
	}
}

func TestReadOfAGoodSnapshot(t *testing.T) {
	good := goodSnapshot(t)
	var ids []string
	info, err := readSnapshot(bytes.NewReader(good), int64(len(good)), func(r record) error {
		ids = append(ids, r.ID)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(t0), info.written)
	assert.Equal(t, 4, info.records)
	assert.Equal(t, snapshotVersion, info.version)
	assert.ElementsMatch(t, []string{"a", "ab", "b\x00", "user:1"}, ids)

	// An error from fn stops the reading and comes back as it is.
	_, err = readSnapshot(bytes.NewReader(good), int64(len(good)), func(record) error { return io.ErrShortBuffer })
	assert.ErrorIs(t, err, io.ErrShortBuffer)

	// Bytes past size are not the snapshot's.
	_, err = readSnapshot(bytes.NewReader(append(slices.Clone(good), "more"...)), int64(len(good)), nil)
	assert.NoError(t, err)
}

const written = int64(t0)

// craft writes a snapshot of the given records as a foreign writer that
// knows the format would: every checksum right.
func craft(recs ...record) []byte {
	e := &encoder{base: written}
	b := appendHeader(nil, written)
	for _, r := range recs {
		e.add(r)
	}
	e.end()
	b = append(b, e.buf...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestRecordsValidatedByMeaning(t *testing.T) {
	ok := record{ID: "u", Scale: 60_000, Algo: rl.Fixed, State: algo.Record{Count: 5, Created: written - 1000, Modified: written - 10}}
	with := func(f func(r *record)) record { r := ok; f(&r); return r }
	for _, tc := range []struct {
		name string
		recs []record
		msg  string
	}{
		{"a plausible record", []record{ok}, ""},
		{"a count of -1,000,000", []record{with(func(r *record) { r.State.Count = -1_000_000 })}, "negative count"},
		{"a sliding count above any limit", []record{with(func(r *record) { r.Algo = rl.Sliding; r.State.Count = check.MaxLimit + 1 })}, "above any limit"},
		{"a record five windows in the future", []record{with(func(r *record) {
			r.Scale = 3_600_000
			r.State.Created, r.State.Modified = written+5*3_600_000, written+5*3_600_000
		})}, "after the snapshot was written"},
		{"changed before created", []record{with(func(r *record) { r.State.Modified = r.State.Created - 1 })}, "before it was created"},
		{"a token TAT ten years ahead", []record{with(func(r *record) {
			r.Algo = rl.Token
			r.State.Count = 0
			r.State.Modified = written + millis.MaxScale
		})}, "theoretical arrival time"},
		{"a plausible token bucket", []record{with(func(r *record) {
			r.Algo = rl.Token
			r.State.Count = int64(uint64(10)<<32 | 3)
			r.State.Modified = written + 30_000
		})}, ""},
		{"a token fraction at its denominator", []record{with(func(r *record) {
			r.Algo = rl.Token
			r.State.Count = int64(uint64(10)<<32 | 10)
		})}, "token fraction"},
		{"the same key twice", []record{ok, ok}, "the same key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := craft(tc.recs...)
			_, err := readSnapshot(bytes.NewReader(data), int64(len(data)), nil)
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrCorruptSnapshot)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// TestImplausibleSliceCounts: a slices record whose slice count no check
// could make is refused.
func TestImplausibleSliceCounts(t *testing.T) {
	for _, n := range []int64{0, 1, 601, 1 << 20} {
		data := craft(record{ID: "u", Scale: 60_000, Algo: rl.Slices, State: algo.SlicesRecord(n, 3, t0, t0)})
		_, err := readSnapshot(bytes.NewReader(data), int64(len(data)), nil)
		require.ErrorIs(t, err, ErrCorruptSnapshot, "slice count %d", n)
		assert.Contains(t, err.Error(), "slice count")
	}
}
