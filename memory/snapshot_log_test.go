package memory

import (
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

func logCheck(id string, limit, hits int64) rl.Request {
	return rl.Request{ID: id, Scale: 10 * time.Second, Limit: limit, Hits: hits, Algo: rl.Log}
}

// TestLogRecordsRoundTrip saves logs with many entries and wants the loaded
// limiter to decide every later check exactly as the one that saved them.
func TestLogRecordsRoundTrip(t *testing.T) {
	ctx := context.Background()
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := snapLimiter(t, clock, 2)
	for i := range 40 {
		clock.Advance(time.Duration(37*(i%5)) * time.Millisecond)
		for _, id := range []string{"a", "b", "c\xff"} {
			_, err := src.CheckRate(ctx, logCheck(id, 25, int64(1+i%3)))
			require.NoError(t, err)
		}
	}
	b, st := saved(t, src, 0)
	assert.Equal(t, 3, st.records)

	dst := snapLimiter(t, clock, 3) // another shard count: ids move
	n, err := load(dst, b)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	for i := range 200 {
		clock.Advance(time.Duration(13+i%50) * time.Millisecond)
		for _, id := range []string{"a", "b", "c\xff"} {
			r := logCheck(id, 25, int64(1+i%4))
			want, err := src.CheckRate(ctx, r)
			require.NoError(t, err)
			got, err := dst.CheckRate(ctx, r)
			require.NoError(t, err)
			require.Equal(t, want, got, "check %d of %q", i, id)
		}
	}
}

// encodeOld writes records in the format of version 1 or 2, whose scale
// field holds the algorithm in two bits, as the builds before version 3
// wrote them (no id prefixes shared, which the format allows).
func encodeOld(version uint16, base int64, recs []record) []byte {
	b := []byte("RLSNAP")
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	for _, r := range recs {
		b = binary.AppendUvarint(b, 0)
		b = binary.AppendUvarint(b, uint64(len(r.ID)))
		b = append(b, r.ID...)
		b = binary.AppendUvarint(b, uint64(r.Scale)<<2|uint64(r.Algo))
		b = binary.AppendVarint(b, r.State.Count)
		b = binary.AppendVarint(b, r.State.Created-base)
		b = binary.AppendVarint(b, r.State.Modified-r.State.Created)
		if r.Algo == rl.Log {
			b = binary.AppendUvarint(b, uint64(len(r.Log)))
			b = append(b, r.Log...)
		}
	}
	b = append(b, 0, 0)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	return withCRC(append(b, 0, 0, 0, 0))
}

// TestOlderVersionsStillLoad: snapshots of versions 1 and 2, written before
// the algorithm took three bits, load into the records they held.
func TestOlderVersionsStillLoad(t *testing.T) {
	ctx := context.Background()
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := snapLimiter(t, clock, 1)
	for i, a := range []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log} {
		_, err := src.CheckRate(ctx, rl.Request{ID: "id" + strconv.Itoa(i), Scale: time.Minute, Limit: 10, Hits: 3, Algo: a})
		require.NoError(t, err)
	}
	clock.Advance(7 * time.Millisecond)
	want := dump(t, src)
	for i := range want {
		if want[i].Algo == rl.Log {
			want[i].Log = logOf(t, src, want[i])
		}
	}
	for _, version := range []uint16{1, 2} {
		t.Run("version "+strconv.Itoa(int(version)), func(t *testing.T) {
			recs := want
			if version == 1 {
				recs = slices.DeleteFunc(slices.Clone(want), func(r record) bool { return r.Algo == rl.Log })
			}
			dst := snapLimiter(t, clock, 2)
			n, err := load(dst, encodeOld(version, t0, recs))
			require.NoError(t, err)
			assert.Equal(t, len(recs), n)
			plain := slices.Clone(recs)
			for i := range plain {
				plain[i].Log = nil
			}
			assert.Equal(t, plain, dump(t, dst))
		})
	}
}

// logOf returns the marshalled entries of a Log record of l, as a snapshot
// holds them.
func logOf(t *testing.T, l *Limiter, r record) []byte {
	t.Helper()
	var out []byte
	require.NoError(t, l.copyRecords(context.Background(), 100, func(c record) error {
		if c.ID == r.ID && c.Scale == r.Scale && c.Algo == rl.Log {
			out = slices.Clone(c.Log)
		}
		return nil
	}, func(time.Duration) error { return nil }))
	return out
}

func TestLogRecordsRefusedWhereTheyCannotBe(t *testing.T) {
	ctx := context.Background()
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := snapLimiter(t, clock, 1)
	_, err := src.CheckRate(ctx, logCheck("a", 5, 2))
	require.NoError(t, err)
	clock.Advance(10 * time.Millisecond)
	_, err = src.CheckRate(ctx, logCheck("a", 5, 1))
	require.NoError(t, err)
	good, _ := saved(t, src, 0)

	// The snapshot ends with the log's entries, the end marker (0, 0), the
	// record count (1) and the checksum (4): b[len-8] is the last entry byte.
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"a log record in a version 1 snapshot", func() []byte { b := slices.Clone(good); b[7] = 1; return withCRC(b) }(), "a log record in a version 1 snapshot"},
		{"log entries that do not decode", func() []byte { b := slices.Clone(good); b[len(b)-4-4] ^= 0x80; return withCRC(b) }(), "log entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := snapLimiter(t, clock, 1)
			_, err := load(l, tc.data)
			require.ErrorIs(t, err, ErrCorruptSnapshot)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Empty(t, dump(t, l))
		})
	}
}

// TestSlicesAndLeakyRoundTrip: a limiter loaded from a snapshot of slices
// (several slice counts, many slices each) and leaky queues decides every
// later check exactly as the one that saved them, on another number of
// shards.
func TestSlicesAndLeakyRoundTrip(t *testing.T) {
	ctx := context.Background()
	clock := limitertest.NewClock(time.UnixMilli(t0))
	src := snapLimiter(t, clock, 1)
	checks := func(id string, i int) []rl.Request {
		return []rl.Request{
			{ID: id, Scale: time.Minute, Limit: 40, Hits: int64(1 + i%3), Algo: rl.Slices, Slices: 6},
			{ID: id, Scale: time.Minute, Limit: 40, Hits: 1, Algo: rl.Slices},
			{ID: id, Scale: time.Hour, Limit: 25, Hits: 1, Algo: rl.Slices, Slices: 600},
			{ID: id, Scale: time.Second, Limit: 3, Hits: 1, Algo: rl.Leaky, Queue: 4},
		}
	}
	ids := []string{"a", "b\x00", "c\xff"}
	for i := range 120 {
		clock.Advance(time.Duration(500+37*(i%5)) * time.Millisecond)
		for _, id := range ids {
			for _, r := range checks(id, i) {
				_, err := src.CheckRate(ctx, r)
				require.NoError(t, err)
			}
		}
	}
	b, st := saved(t, src, 0)
	assert.Greater(t, st.records, 3*20, "many slices of each limit")
	dst := snapLimiter(t, clock, 3)
	_, err := load(dst, b)
	require.NoError(t, err)
	assert.Equal(t, dump(t, src), dump(t, dst))
	for i := range 200 {
		clock.Advance(time.Duration(300+11*(i%7)) * time.Millisecond)
		for _, id := range ids {
			for _, r := range checks(id, i) {
				want, err := src.CheckRate(ctx, r)
				require.NoError(t, err)
				got, err := dst.CheckRate(ctx, r)
				require.NoError(t, err)
				require.Equal(t, want, got, "check %d of %q: %+v", i, id, r)
			}
		}
	}
}
