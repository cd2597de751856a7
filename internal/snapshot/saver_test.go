package snapshot_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/snapshot"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

type written struct {
	st  snapshot.WriteStats
	err error
}

// countIn returns the fixed-window count of id in the snapshot at path.
func countIn(t *testing.T, path, id string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	var n int64
	_, err = snapshot.Read(f, fi.Size(), func(r snapshot.Record) error {
		if r.ID == id {
			n = r.State.Count
		}
		return nil
	})
	require.NoError(t, err)
	return n
}

func TestSaverWritesPeriodicallyAndOnClose(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 2)
	path := filepath.Join(t.TempDir(), "snap")
	ctx := context.Background()
	hit := func() {
		t.Helper()
		_, err := l.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Minute, Limit: 100, Hits: 1})
		require.NoError(t, err)
	}
	writes := make(chan written, 16)
	s := snapshot.StartSaver(l, snapshot.SaverConfig{
		Path: path, Interval: 5 * time.Millisecond, Final: true,
		Write:   snapshot.WriteOptions{Clock: clock.Now},
		OnWrite: func(st snapshot.WriteStats, err error) { writes <- written{st, err} },
	})
	// A periodic write that starts after a hit holds it; one in progress
	// during the hit may not, so wait for writes until one does.
	for want := int64(1); want <= 3; want++ {
		hit()
		for {
			w := <-writes
			require.NoError(t, w.err)
			if countIn(t, path, "u") == want {
				break
			}
		}
	}
	hit()
	hit()
	require.NoError(t, s.Close(ctx))
	assert.Equal(t, int64(5), countIn(t, path, "u"), "the final write holds every hit")
	// Nothing is written after Close: drain, then check no new write comes.
	for len(writes) > 0 {
		<-writes
	}
	hit()
	require.NoError(t, s.Close(ctx), "Close is idempotent")
	assert.Empty(t, writes)
	assert.Equal(t, int64(5), countIn(t, path, "u"))
}

func TestSaverWithoutIntervalWritesOnlyOnClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		final bool
	}{
		{name: "final", final: true},
		{name: "no final", final: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.UnixMilli(t0))
			l := newLimiter(t, clock, 1)
			path := filepath.Join(t.TempDir(), "snap")
			_, err := l.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Minute, Limit: 100, Hits: 2})
			require.NoError(t, err)
			s := snapshot.StartSaver(l, snapshot.SaverConfig{Path: path, Final: tc.final, Write: snapshot.WriteOptions{Clock: clock.Now}})
			require.NoError(t, s.Close(context.Background()))
			_, err = os.Stat(path)
			if tc.final {
				require.NoError(t, err)
				assert.Equal(t, int64(2), countIn(t, path, "u"))
			} else {
				assert.ErrorIs(t, err, os.ErrNotExist)
			}
		})
	}
}

func TestSaverFinalWriteErrorIsReturned(t *testing.T) {
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 1)
	s := snapshot.StartSaver(l, snapshot.SaverConfig{
		Path: filepath.Join(t.TempDir(), "no", "such", "dir", "snap"), Final: true,
	})
	err := s.Close(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no/such/dir/snap")
}
