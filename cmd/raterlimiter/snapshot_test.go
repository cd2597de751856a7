package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// The snapshot file's own behaviour: atomic writes, links, the probe, a
// corrupt file moved aside, the periodic saver. What the bytes hold is
// package memory's (Save, Load); the built binary's use of both is in
// snapshot_e2e_test.go.

func snapLimiter(t *testing.T) *memory.Limiter {
	t.Helper()
	l := memory.New(memory.Config{Shards: 2, Clock: limitertest.NewClock(limitertest.T0).Now, SweepInterval: -1})
	t.Cleanup(func() { l.Close() })
	return l
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// snapHit counts hits on id's minute.
func snapHit(t *testing.T, l *memory.Limiter, id string, hits int64) {
	t.Helper()
	_, err := l.CheckRate(context.Background(), rl.Request{ID: id, Scale: time.Minute, Limit: 1000, Hits: hits})
	require.NoError(t, err)
}

// countIn returns id's count in the snapshot at path, loaded into a new
// limiter.
func countIn(t *testing.T, path, id string) int64 {
	t.Helper()
	l := snapLimiter(t)
	require.NoError(t, loadSnapshot(context.Background(), path, l, false, quiet))
	d, err := l.CheckRate(context.Background(), rl.Request{ID: id, Scale: time.Minute, Limit: 1000, Peek: true})
	require.NoError(t, err)
	return d.Count
}

func TestSnapshotFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.snap")
	l := snapLimiter(t)
	snapHit(t, l, "u", 7)
	require.NoError(t, writeSnapshot(context.Background(), path, l))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "ids may be user data")

	var logs bytes.Buffer
	dst := snapLimiter(t)
	require.NoError(t, loadSnapshot(context.Background(), path, dst, false, slog.New(slog.NewTextHandler(&logs, nil))))
	assert.Contains(t, logs.String(), `msg="snapshot loaded" snapshot=`+path+" records=1 bytes=")
	d, err := dst.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Minute, Limit: 1000, Peek: true})
	require.NoError(t, err)
	assert.Equal(t, int64(7), d.Count)
}

func TestCorruptSnapshotFilesAreRefusedNamingTheFile(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.snap")
	l := snapLimiter(t)
	snapHit(t, l, "u", 3)
	require.NoError(t, writeSnapshot(context.Background(), good, l))
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	flipped := slices.Clone(data)
	flipped[len(flipped)/2] ^= 0x10
	for _, tc := range []struct {
		name, msg string
		data      []byte
	}{
		{"empty", "empty", []byte{}},
		{"foreign", "bad magic", []byte("{\"buckets\": []}\n")},
		{"flipped byte", "checksum mismatch", flipped},
		{"truncated", "checksum mismatch", data[:len(data)-3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "limits.snap")
			require.NoError(t, os.WriteFile(path, tc.data, 0o600))
			l := snapLimiter(t)
			err := loadSnapshot(context.Background(), path, l, false, quiet)
			require.ErrorIs(t, err, memory.ErrCorruptSnapshot)
			assert.Contains(t, err.Error(), "snapshot: "+path+": ")
			assert.Contains(t, err.Error(), tc.msg)
			assert.FileExists(t, path, "refused, not moved")

			var logs bytes.Buffer
			require.NoError(t, loadSnapshot(context.Background(), path, l, true, slog.New(slog.NewTextHandler(&logs, nil))))
			assert.Contains(t, logs.String(), "level=WARN")
			assert.Contains(t, logs.String(), "starting empty")
			assert.Contains(t, logs.String(), path)
			assert.Contains(t, logs.String(), tc.msg)
			// The bad file is kept aside, so the next write cannot destroy it.
			kept, err := os.ReadFile(path + ".corrupt")
			require.NoError(t, err)
			assert.Equal(t, tc.data, kept)
			assert.NoFileExists(t, path)
			d, err := l.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Minute, Limit: 1000, Peek: true})
			require.NoError(t, err)
			assert.Zero(t, d.Count, "nothing restored")
		})
	}
}

func TestMissingSnapshotIsAFreshStart(t *testing.T) {
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "none")
	require.NoError(t, loadSnapshot(context.Background(), path, snapLimiter(t), false, slog.New(slog.NewTextHandler(&logs, nil))))
	assert.Contains(t, logs.String(), `msg="no snapshot yet: starting empty" snapshot=`+path)
}

func TestUnreadableSnapshotIsAnErrorEvenWhenIgnoringCorruption(t *testing.T) {
	dir := t.TempDir() // a directory is not a snapshot, and is not moved aside
	err := loadSnapshot(context.Background(), dir, snapLimiter(t), true, quiet)
	require.Error(t, err)
	assert.NotErrorIs(t, err, memory.ErrCorruptSnapshot)
	assert.Equal(t, "snapshot: "+dir+" is a directory, not a regular file", err.Error())
	assert.DirExists(t, dir)
}

func TestLoadSnapshotIntoAClosedLimiter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.snap")
	l := snapLimiter(t)
	snapHit(t, l, "u", 1)
	require.NoError(t, writeSnapshot(context.Background(), path, l))
	dst := memory.New(memory.Config{})
	dst.Close()
	err := loadSnapshot(context.Background(), path, dst, true, quiet)
	require.ErrorIs(t, err, rl.ErrClosed)
	assert.Contains(t, err.Error(), path)
	assert.FileExists(t, path, "a good file is never moved aside")
}

func TestFailedWriteKeepsThePreviousSnapshot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snap")
	ctx := context.Background()
	l := snapLimiter(t)
	snapHit(t, l, "a", 2)
	require.NoError(t, writeSnapshot(ctx, path, l))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	closed := memory.New(memory.Config{})
	snapHit(t, closed, "x", 1)
	closed.Close()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name  string
		write func() error
		is    error
	}{
		{"the limiter closed", func() error { return writeSnapshot(ctx, path, closed) }, rl.ErrClosed},
		{"context canceled", func() error { return writeSnapshot(canceled, path, l) }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), "snapshot: writing "+path+": ")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the previous snapshot is intact")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file is left behind")
			assert.Equal(t, "snap", entries[0].Name())
		})
	}

	t.Run("directory not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into read-only directories")
		}
		require.NoError(t, os.Chmod(dir, 0o500))
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		snapHit(t, l, "a", 1)
		err := writeSnapshot(ctx, path, l)
		require.ErrorIs(t, err, os.ErrPermission)
		assert.Contains(t, err.Error(), path)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after)
	})
}

func TestProbeSnapshot(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, probeSnapshot(filepath.Join(dir, "snap")))
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
			err := probeSnapshot(tc.path)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.NotContains(t, err.Error(), "probe")
		})
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o500))
		err := probeSnapshot(filepath.Join(ro, "snap"))
		require.Error(t, err)
		assert.Equal(t, "snapshot: "+filepath.Join(ro, "snap")+" cannot be written: no file can be created in "+ro+": permission denied", err.Error())
	}
}

// TestWriteSnapshotThroughASymlink: a snapshot path that is a symbolic
// link (to a persistent volume) stays a link through every write; the
// writes go to its target, also when the target does not exist yet,
// through a relative link and a chain of links.
func TestWriteSnapshotThroughASymlink(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(t *testing.T, dir, vol string) (path, target string)
	}{
		{"absolute link to an existing file", func(t *testing.T, dir, vol string) (string, string) {
			target := filepath.Join(vol, "limits.snap")
			require.NoError(t, os.WriteFile(target, nil, 0o600))
			require.NoError(t, os.Symlink(target, filepath.Join(dir, "limits.snap")))
			return filepath.Join(dir, "limits.snap"), target
		}},
		{"relative link to a missing file", func(t *testing.T, dir, vol string) (string, string) {
			require.NoError(t, os.Symlink(filepath.Join("..", "vol", "limits.snap"), filepath.Join(dir, "limits.snap")))
			return filepath.Join(dir, "limits.snap"), filepath.Join(vol, "limits.snap")
		}},
		{"chain of links", func(t *testing.T, dir, vol string) (string, string) {
			require.NoError(t, os.Symlink(filepath.Join(vol, "limits.snap"), filepath.Join(vol, "current")))
			require.NoError(t, os.Symlink(filepath.Join(vol, "current"), filepath.Join(dir, "limits.snap")))
			return filepath.Join(dir, "limits.snap"), filepath.Join(vol, "limits.snap")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir, vol := filepath.Join(root, "app"), filepath.Join(root, "vol")
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.Mkdir(vol, 0o700))
			path, target := tc.link(t, dir, vol)

			l := snapLimiter(t)
			require.NoError(t, probeSnapshot(path))
			for round := range 3 {
				snapHit(t, l, "u", 1)
				require.NoError(t, writeSnapshot(context.Background(), path, l), "round %d", round)
				fi, err := os.Lstat(path)
				require.NoError(t, err)
				assert.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "round %d: the path is still a link", round)
				assert.Equal(t, int64(round+1), countIn(t, target, "u"), "round %d: the target holds the latest counts", round)
			}
			for _, d := range []string{dir, vol} {
				entries, err := os.ReadDir(d)
				require.NoError(t, err)
				for _, e := range entries {
					assert.NotContains(t, e.Name(), ".tmp-", "no temporary file left in %s", d)
				}
			}
		})
	}
}

// TestWriteSnapshotFollowsARepointedLink: the link is resolved at each
// write.
func TestWriteSnapshotFollowsARepointedLink(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "limits.snap")
	a, b := filepath.Join(root, "a.snap"), filepath.Join(root, "b.snap")
	require.NoError(t, os.Symlink(a, path))
	l := snapLimiter(t)
	require.NoError(t, writeSnapshot(context.Background(), path, l))
	require.FileExists(t, a)
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Symlink(b, path))
	require.NoError(t, writeSnapshot(context.Background(), path, l))
	require.FileExists(t, b)
}

// TestSnapshotSymlinkErrors: a loop of links, and a link into a directory
// that cannot take the file, are refused naming the path.
func TestSnapshotSymlinkErrors(t *testing.T) {
	root := t.TempDir()
	loop := filepath.Join(root, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	_, err := resolveSnapshot(loop)
	require.ErrorContains(t, err, "snapshot: "+loop+": more than 40 symbolic links")
	require.ErrorContains(t, probeSnapshot(loop), loop)
	require.ErrorContains(t, writeSnapshot(context.Background(), loop, snapLimiter(t)), "more than 40 symbolic links")

	dangling := filepath.Join(root, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(root, "no", "such", "snap"), dangling))
	err = probeSnapshot(dangling)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "its directory "+filepath.Join(root, "no", "such")+" does not exist")
	assert.Contains(t, err.Error(), dangling+" is a symbolic link to it")
}

// TestIgnoredCorruptSnapshotThroughALink: a corrupt target is moved aside
// beside itself, and the link keeps naming the file the next write makes.
func TestIgnoredCorruptSnapshotThroughALink(t *testing.T) {
	root := t.TempDir()
	path, target := filepath.Join(root, "limits.snap"), filepath.Join(root, "vol.snap")
	require.NoError(t, os.WriteFile(target, []byte("not a snapshot"), 0o600))
	require.NoError(t, os.Symlink(target, path))
	l := snapLimiter(t)
	require.NoError(t, loadSnapshot(context.Background(), path, l, true, quiet))
	require.FileExists(t, target+".corrupt")
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink)
	require.NoError(t, writeSnapshot(context.Background(), path, l))
	require.FileExists(t, target)
}

func TestSaverWritesPeriodicallyAndOnClose(t *testing.T) {
	l := snapLimiter(t)
	path := filepath.Join(t.TempDir(), "snap")
	writes := make(chan error, 16)
	s := startSaver(5*time.Millisecond, func(ctx context.Context) error {
		err := writeSnapshot(ctx, path, l)
		writes <- err
		return err
	})
	// A periodic write that starts after a hit holds it; one in progress
	// during the hit may not, so wait for writes until one does.
	for want := int64(1); want <= 3; want++ {
		snapHit(t, l, "u", 1)
		for {
			require.NoError(t, <-writes)
			if countIn(t, path, "u") == want {
				break
			}
		}
	}
	snapHit(t, l, "u", 2)
	require.NoError(t, s.close(context.Background()))
	assert.Equal(t, int64(5), countIn(t, path, "u"), "the final write holds every hit")
	// Nothing is written after close: drain, then check no new write comes.
	for len(writes) > 0 {
		<-writes
	}
	snapHit(t, l, "u", 1)
	require.NoError(t, s.close(context.Background()), "close is idempotent")
	assert.Empty(t, writes)
	assert.Equal(t, int64(5), countIn(t, path, "u"))
}

func TestSaverWithoutIntervalWritesOnlyOnClose(t *testing.T) {
	l := snapLimiter(t)
	path := filepath.Join(t.TempDir(), "snap")
	snapHit(t, l, "u", 2)
	writes := 0
	s := startSaver(0, func(ctx context.Context) error { writes++; return writeSnapshot(ctx, path, l) })
	require.NoError(t, s.close(context.Background()))
	assert.Equal(t, 1, writes)
	assert.Equal(t, int64(2), countIn(t, path, "u"))
}

func TestSaverFinalWriteErrorIsReturned(t *testing.T) {
	l := snapLimiter(t)
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "snap")
	s := startSaver(time.Hour, func(ctx context.Context) error { return writeSnapshot(ctx, path, l) })
	err := s.close(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	assert.Contains(t, err.Error(), path)
	assert.Equal(t, err, s.close(context.Background()), "later calls return the first one's result")
}
