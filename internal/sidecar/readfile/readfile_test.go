package readfile_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
)

func TestReadRefusesAllButRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	for _, tc := range []struct{ name, path, msg string }{
		{"a FIFO, which would block open", fifo, "is a FIFO, not a regular file"},
		{"a link to /dev/zero, which never ends", zero, "is a character device, not a regular file"},
		{"a directory", dir, "is a directory, not a regular file"},
		{"a socket", sock, "is a socket, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := readfile.Read(tc.path, 1<<20)
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorIs(t, err, readfile.ErrNotRegular)
				assert.EqualError(t, err, "readfile: "+tc.path+" "+tc.msg)
			case <-time.After(10 * time.Second):
				t.Fatal("Read blocked")
			}
		})
	}
}

func TestReadBoundsTheSize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("0123456789"), 0o600))
	b, err := readfile.Read(path, 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(b))
	_, err = readfile.Read(path, 9)
	require.ErrorIs(t, err, readfile.ErrTooLarge)
	assert.EqualError(t, err, "readfile: "+path+" is 10 bytes; at most 9 are read")

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	b, err = readfile.Read(empty, 9)
	require.NoError(t, err)
	assert.Empty(t, b)

	// A regular file whose size Stat does not tell: the bound holds while
	// reading.
	if _, err := os.Stat("/proc/self/mountinfo"); err == nil {
		_, err = readfile.Read("/proc/self/mountinfo", 8)
		require.ErrorIs(t, err, readfile.ErrTooLarge)
		assert.Contains(t, err.Error(), "is more than 8 bytes")
	}

	_, err = readfile.Read(filepath.Join(dir, "missing"), 9)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.EqualError(t, err, "readfile: "+filepath.Join(dir, "missing")+" cannot be read: no such file or directory")
	assert.False(t, errors.Is(err, readfile.ErrNotRegular))
}

func TestOpenGivesTheOpenFilesSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte("abc"), 0o600))
	f, fi, err := readfile.Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.EqualValues(t, 3, fi.Size())
}
