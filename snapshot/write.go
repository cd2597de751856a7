package snapshot

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/algo"
	"github.com/raterlimiter/raterlimiter/buckets"
)

// Source is what Write reads: the shards of a limiter, as
// memory.Limiter.Actors returns them.
type Source interface {
	Actors() []*actor.Actor
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
	// Clock returns the time in Unix milliseconds; the header records it.
	// Default: the system clock.
	Clock func() int64
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
// Each shard is read in chunks of opts.ChunkRecords records, each chunk in
// one short visit to the shard's goroutine, so checks go on meanwhile. A
// record is saved as it was when its chunk was read; checks made during the
// write may or may not be in the file. Stop the traffic first (as the sidecar
// does on SIGTERM) for an exact image.
func Write(ctx context.Context, path string, src Source, opts WriteOptions) (WriteStats, error) {
	if opts.ChunkRecords <= 0 {
		opts.ChunkRecords = DefaultChunkRecords
	}
	if opts.Clock == nil {
		opts.Clock = actor.SystemClock
	}
	dir, name := filepath.Split(path)
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
		err = os.Rename(tmp, path)
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
	e := &encoder{base: opts.Clock()}
	if _, err := out.Write(appendHeader(nil, e.base)); err != nil {
		return st, err
	}
	for i, a := range src.Actors() {
		if err := copyShard(ctx, a, e, out, opts.ChunkRecords, &st); err != nil {
			return st, fmt.Errorf("shard %d: %w", i, err)
		}
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

// key is a record's place in a store: the order buckets.Store.Scan follows
// (id, then scale, then algorithm, then bucket).
type key struct {
	id    string
	scale int64
	algo  rl.Algo
	b     int64
}

func keyOf(id string, scale int64, a rl.Algo, r algo.Record) key {
	return key{id: id, scale: scale, algo: a, b: algo.BucketOf(a, scale, r)}
}

func (k key) compare(o key) int {
	if c := strings.Compare(k.id, o.id); c != 0 {
		return c
	}
	switch {
	case k.scale != o.scale:
		return cmp.Compare(k.scale, o.scale)
	case k.algo != o.algo:
		return cmp.Compare(k.algo, o.algo)
	}
	return cmp.Compare(k.b, o.b)
}

// copyShard encodes a's records in visits of at most chunk records each.
func copyShard(ctx context.Context, a *actor.Actor, e *encoder, out io.Writer, chunk int, st *WriteStats) error {
	var c cursor
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var (
			done  bool
			verr  error
			visit time.Duration
		)
		e.buf = e.buf[:0]
		err := a.Do(ctx, func(s *buckets.Store, now int64) {
			t0 := time.Now()
			done, verr = c.visit(s, now, e, chunk)
			visit = time.Since(t0)
		})
		if err != nil {
			return err
		}
		st.Visits++
		st.LongestVisit = max(st.LongestVisit, visit)
		if verr != nil {
			return verr
		}
		if _, err := out.Write(e.buf); err != nil {
			return err
		}
		if done {
			e.buf = e.buf[:0]
			return nil
		}
	}
}

// cursor is where a chunked copy of one store stands: each visit resumes
// after the last record the previous one copied (buckets.Store.ScanFrom), so
// a visit costs its own chunk only. Records added or removed between visits
// are never copied twice, and a record that stays is never missed.
type cursor struct {
	last    key // the last record copied
	started bool
}

// visit copies at most chunk records after the cursor into e, leaving out
// expired ones, and reports done when it reached the end of the store.
func (c *cursor) visit(s *buckets.Store, now int64, e *encoder, chunk int) (done bool, err error) {
	n := 0
	var prev key
	done = true
	fn := func(id string, scale int64, al rl.Algo, r algo.Record) bool {
		k := keyOf(id, scale, al, r)
		if c.started && k.compare(c.last) <= 0 {
			return true // the record the previous visit ended on
		}
		if n > 0 && k.compare(prev) <= 0 {
			err = fmt.Errorf("snapshot: the store's scan order is not the key order this package relies on")
			return false
		}
		if n == chunk {
			done = false
			return false
		}
		if !algo.Expired(al, scale, r, now) {
			var logData []byte
			if al == rl.Log {
				// A log's hits are not in its record: its entries follow.
				e.logBuf, _ = s.AppendLog(e.logBuf[:0], id, scale)
				logData = e.logBuf
			}
			e.add(id, scale, al, r, logData)
		}
		prev = k
		n++
		return true
	}
	if c.started {
		s.ScanFrom(c.last.id, c.last.scale, c.last.algo, c.last.b, fn)
	} else {
		s.Scan(fn)
	}
	if n > 0 {
		// The id is the store's memory: copy it out.
		c.last, c.started = prev, true
		c.last.id = strings.Clone(prev.id)
	}
	return done, err
}

// Probe checks that Write can create its temporary file beside path, so a
// program can refuse to start rather than find out at shutdown that its
// snapshot cannot be saved. It leaves nothing behind.
func Probe(path string) error {
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
