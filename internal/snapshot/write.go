package snapshot

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"github.com/raterlimiter/raterlimiter/memory"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Source is what Write reads: a memory limiter's CopyRecords (memstore), which hands out
// every live record, shard by shard in the store's order, in short visits
// to each shard's goroutine.
type Source interface {
	CopyRecords(ctx context.Context, chunk int, fn func(memstore.Record) error, endVisit func(took time.Duration) error) error
}

// DefaultChunkRecords is how many records Write copies from a shard per visit
// when WriteOptions.ChunkRecords is 0.
const DefaultChunkRecords = 32768

// WriteOptions configures Write. The zero value is ready to use.
type WriteOptions struct {
	// ChunkRecords is how many records Write copies from a shard in one visit
	// to its goroutine; checks wait only for one visit. Default
	// DefaultChunkRecords.
	ChunkRecords int
	// Clock returns the time; the header records it. Default: time.Now.
	Clock func() time.Time
}

// WriteStats reports a finished Write.
type WriteStats struct {
	// Records is how many records the snapshot holds.
	Records int
	// Bytes is the file's size.
	Bytes int64
	// Visits is how many times Write ran on a shard's goroutine.
	Visits int
	// LongestVisit is the longest of those visits, measured on the shard's
	// goroutine: the longest a check could have waited for the snapshot.
	LongestVisit time.Duration
}

// Write saves every live record of src to path atomically: it writes a
// temporary file in the same directory, fsyncs it, renames it over path and
// fsyncs the directory. On error path is left as it was and the temporary
// file is removed. Records that no decision can read any more (algo.Expired)
// are left out.
//
// A path that is a symbolic link (to a file on a persistent volume, say) is
// written through: the link is resolved at each write (Resolve), and the
// temporary file is written beside the link's target and renamed over it,
// so the link stays and the target is what changes.
//
// Each shard is read in chunks of opts.ChunkRecords records, each chunk in
// one short visit to the shard's goroutine, so checks go on meanwhile. A
// record is saved as it was when its chunk was read; checks made during the
// write may or may not be in the file. Stop the traffic first (as the sidecar
// does on SIGTERM) for an exact image.
func Write(ctx context.Context, path string, lim *memory.Limiter, opts WriteOptions) (WriteStats, error) {
	return writeFile(ctx, path, memstore.MustOf(lim), opts)
}

func writeFile(ctx context.Context, path string, src Source, opts WriteOptions) (WriteStats, error) {
	if opts.ChunkRecords <= 0 {
		opts.ChunkRecords = DefaultChunkRecords
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	dest, err := Resolve(path)
	if err != nil {
		return WriteStats{}, err
	}
	dir, name := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return WriteStats{}, fmt.Errorf("snapshot: %s: %w", path, err)
	}
	tmp := f.Name()
	st, err := writeTo(ctx, f, src, opts)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		os.Remove(tmp)
		return st, fmt.Errorf("snapshot: writing %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return st, fmt.Errorf("snapshot: %s: %w", path, err)
	}
	return st, nil
}

// maxLinks is how many symbolic links Resolve follows, as Linux does.
const maxLinks = 40

// Resolve returns the file a snapshot at path is read from and written to:
// path, or, when path is a symbolic link, the file it points to (following
// a chain of links; a link to a file that does not exist yet names the file
// to create). Only path's last element is resolved here: the system
// follows links among its directories. A relative link is read from the
// link's directory, as the system reads it.
func Resolve(path string) (string, error) {
	cur := path
	for range maxLinks {
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return cur, nil // not a link; what is wrong with it, the write (or Probe) says
		}
		to, err := os.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("snapshot: %s: %w", path, cause(err))
		}
		if !filepath.IsAbs(to) {
			// Not filepath.Join: cleaning "dir/../x" would be wrong where
			// dir is itself a link.
			to = filepath.Dir(cur) + string(filepath.Separator) + to
		}
		cur = to
	}
	return "", fmt.Errorf("snapshot: %s: more than %d symbolic links in a row", path, maxLinks)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeTo writes the snapshot to w.
func writeTo(ctx context.Context, w io.Writer, src Source, opts WriteOptions) (WriteStats, error) {
	var st WriteStats
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(bw, crc)
	e := &encoder{base: opts.Clock().UnixMilli()}
	if _, err := out.Write(appendHeader(nil, e.base)); err != nil {
		return st, err
	}
	e.buf = e.buf[:0]
	err := src.CopyRecords(ctx, opts.ChunkRecords, func(r memstore.Record) error {
		e.add(r.ID, r.Scale, r.Algo, r.State, r.Log)
		return nil
	}, func(took time.Duration) error {
		st.Visits++
		st.LongestVisit = max(st.LongestVisit, took)
		_, err := out.Write(e.buf)
		e.buf = e.buf[:0]
		return err
	})
	if err != nil {
		return st, err
	}
	e.end()
	if _, err := out.Write(e.buf); err != nil {
		return st, err
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return st, err
	}
	if err := bw.Flush(); err != nil {
		return st, err
	}
	st.Records = int(e.n)
	st.Bytes = cw.n
	return st, nil
}

// Probe checks that Write can create its temporary file beside path, so a
// program can refuse to start rather than find out at shutdown that its
// snapshot cannot be saved. It leaves nothing behind.
func Probe(path string) error {
	dest, err := Resolve(path)
	if err != nil {
		return err
	}
	if dest != path {
		// Name the target too: its directory is the one that must be
		// writable.
		if err := Probe(dest); err != nil {
			return fmt.Errorf("%w (%s is a symbolic link to it)", err, path)
		}
		return nil
	}
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	dir = filepath.Clean(dir)
	// The errors name path and its directory, never the probe's own file:
	// that is a name the user never gave.
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("snapshot: %s cannot be written: its directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("snapshot: %s cannot be written: directory %s: %w", path, dir, cause(err))
	case !st.IsDir():
		return fmt.Errorf("snapshot: %s cannot be written: %s is not a directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("snapshot: %s cannot be written: it is a directory", path)
	}
	f, err := os.CreateTemp(dir, "."+name+".probe-*")
	if err != nil {
		return fmt.Errorf("snapshot: %s cannot be written: no file can be created in %s: %w", path, dir, cause(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// cause is err without the path a *fs.PathError adds to it.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
