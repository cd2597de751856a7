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

// TestWriteThroughASymlink: a snapshot path that is a symbolic link (to a
// persistent volume) stays a link through every write; the writes go to
// its target, also when the target does not exist yet, through a relative
// link and a chain of links, and when the link is repointed between writes.
func TestWriteThroughASymlink(t *testing.T) {
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

			clock := limitertest.NewClock(time.UnixMilli(t0))
			l := newLimiter(t, clock, 1)
			ctx := context.Background()
			require.NoError(t, snapshot.Probe(path))
			for round := range 3 {
				_, err := l.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Hour, Limit: 100, Hits: 1})
				require.NoError(t, err)
				_, err = snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now})
				require.NoError(t, err, "round %d", round)

				fi, err := os.Lstat(path)
				require.NoError(t, err)
				assert.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "round %d: the path is still a link", round)
				r := newLimiter(t, clock, 1)
				_, err = snapshot.Load(ctx, target, r, snapshot.LoadOptions{Clock: clock.Now})
				require.NoError(t, err)
				d, err := r.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Hour, Limit: 100, Peek: true})
				require.NoError(t, err)
				assert.Equal(t, int64(round+1), d.Count, "round %d: the target holds the latest counts", round)
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

// TestWriteFollowsARepointedLink: the link is resolved at each write.
func TestWriteFollowsARepointedLink(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "limits.snap")
	a, b := filepath.Join(root, "a.snap"), filepath.Join(root, "b.snap")
	require.NoError(t, os.Symlink(a, path))
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 1)
	ctx := context.Background()
	_, err := snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	require.FileExists(t, a)
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Symlink(b, path))
	_, err = snapshot.Write(ctx, path, l, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	require.FileExists(t, b)
}

// TestSymlinkErrors: a loop of links, and a link into a directory that
// cannot take the file, are refused naming the path.
func TestSymlinkErrors(t *testing.T) {
	root := t.TempDir()
	loop := filepath.Join(root, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	_, err := snapshot.Resolve(loop)
	require.ErrorContains(t, err, "snapshot: "+loop+": more than 40 symbolic links")
	require.ErrorContains(t, snapshot.Probe(loop), loop)

	dangling := filepath.Join(root, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(root, "no", "such", "snap"), dangling))
	err = snapshot.Probe(dangling)
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
	clock := limitertest.NewClock(time.UnixMilli(t0))
	l := newLimiter(t, clock, 1)
	st, err := snapshot.Load(context.Background(), path, l, snapshot.LoadOptions{Clock: clock.Now, IgnoreCorrupt: true})
	require.NoError(t, err)
	assert.Equal(t, target+".corrupt", st.MovedTo)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink)
	_, err = snapshot.Write(context.Background(), path, l, snapshot.WriteOptions{Clock: clock.Now})
	require.NoError(t, err)
	require.FileExists(t, target)
}
