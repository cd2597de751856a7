package snapshot_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/snapshot"
)

func logCheck(id string, limit, hits int64) rl.Request {
	return rl.Request{ID: id, Scale: 10_000, Limit: limit, Hits: hits, Algo: rl.Log}
}

// TestLogRecordsRoundTrip saves logs with many entries and wants the loaded
// limiter to decide every later check exactly as the one that saved them.
func TestLogRecordsRoundTrip(t *testing.T) {
	ctx := context.Background()
	clock := limitertest.NewClock(t0)
	src := newLimiter(t, clock, 2)
	for i := range 40 {
		clock.Advance(int64(37 * (i % 5)))
		for _, id := range []string{"a", "b", "c\xff"} {
			_, err := src.CheckRate(ctx, logCheck(id, 25, int64(1+i%3)))
			require.NoError(t, err)
		}
	}
	path := filepath.Join(t.TempDir(), "snap")
	ws, err := snapshot.Write(ctx, path, src, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	assert.Equal(t, 3, ws.Records)

	dst := newLimiter(t, clock, 3) // another shard count: ids move
	st, err := snapshot.Load(ctx, path, dst, snapshot.LoadOptions{Clock: clock.Now})
	require.NoError(t, err)
	assert.Equal(t, 3, st.Loaded)
	for i := range 200 {
		clock.Advance(int64(13 + i%50))
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

func TestVersion1FilesStillLoad(t *testing.T) {
	old := goodSnapshot(t) // fixed, sliding and token records only
	old[7] = 1
	path := filepath.Join(t.TempDir(), "v1.snap")
	require.NoError(t, os.WriteFile(path, withCRC(old), 0o600))
	clock := limitertest.NewClock(t0)
	st, err := snapshot.Load(context.Background(), path, newLimiter(t, clock, 2), snapshot.LoadOptions{Clock: clock.Now})
	require.NoError(t, err)
	assert.Equal(t, 4, st.Loaded)
}

func TestLogRecordsRefusedWhereTheyCannotBe(t *testing.T) {
	ctx := context.Background()
	clock := limitertest.NewClock(t0)
	src := newLimiter(t, clock, 1)
	_, err := src.CheckRate(ctx, logCheck("a", 5, 2))
	require.NoError(t, err)
	clock.Advance(10)
	_, err = src.CheckRate(ctx, logCheck("a", 5, 1))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "snap")
	_, err = snapshot.Write(ctx, path, src, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	good, err := os.ReadFile(path)
	require.NoError(t, err)

	// The file ends with the log's entries, the end marker (0, 0), the
	// record count (1) and the checksum (4): b[len-8] is the last entry byte.
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"a log record in a version 1 file", func() []byte { b := clone(good); b[7] = 1; return withCRC(b) }(), "a log record in a version 1 file"},
		{"log entries that do not decode", func() []byte { b := clone(good); b[len(b)-4-4] ^= 0x80; return withCRC(b) }(), "log entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.snap")
			require.NoError(t, os.WriteFile(p, tc.data, 0o600))
			_, err := snapshot.Load(ctx, p, newLimiter(t, clock, 1), snapshot.LoadOptions{Clock: clock.Now})
			require.ErrorIs(t, err, snapshot.ErrCorrupt)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
