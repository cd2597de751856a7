package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"hash/crc32"
	"io"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/ms"
)

// ErrCorrupt matches every error about a file that is not a valid snapshot
// this build can read: foreign, truncated, damaged or of another version.
var ErrCorrupt = errors.New("snapshot: corrupt or foreign file")

// Version is the format version this build writes. It reads it and every
// older one: version 2 added the entries of Log records, which version 1
// has none of; version 3 gave the algorithm three bits beside the scale
// (Slices and Leaky), where versions 1 and 2 have two.
const Version = 3

// maxLogBytes bounds a Log record's entries in a file: a log holds at most
// bounds.MaxLogLimit hits, a few bytes each.
const maxLogBytes = 1 << 20

const (
	magic      = "RLSNAP"
	headerSize = len(magic) + 2 + 8
	crcSize    = 4
	// readStep bounds what one read of an id may allocate ahead of the data
	// actually present, so a hostile length field costs little.
	readStep = 64 << 10
)

// castagnoli is the CRC-32C table; it is never written after init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one bucket record as a snapshot holds it: the memory backend's
// record, as memory.Limiter.CopyRecords hands it out (Log, for a sliding
// log, holds its entries as algo.Log.AppendBinary writes them).
type Record = memstore.Record

// corrupt returns an error matching ErrCorrupt.
func corrupt(format string, a ...any) error {
	return &corruptError{msg: fmt.Sprintf(format, a...)}
}

// corruptError is a refused file; path is set once known.
type corruptError struct{ path, msg string }

func (e *corruptError) Error() string {
	if e.path == "" {
		return "snapshot: " + e.msg
	}
	return "snapshot: " + e.path + ": " + e.msg
}

func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

// encoder turns records into the format's bytes. It is not safe for
// concurrent use.
type encoder struct {
	base int64
	prev []byte // the previous record's id
	buf  []byte // encoded, not yet written
	n    uint64 // records encoded
	tmp  [binary.MaxVarintLen64]byte
	// logBuf is reused for a Log record's entries.
	logBuf []byte
}

func appendHeader(b []byte, base int64) []byte {
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, Version)
	return binary.BigEndian.AppendUint64(b, uint64(base))
}

// add encodes one record. id must be 1 to memstore.MaxIDBytes bytes, scale 1
// to bounds.MaxScale and a valid: the store guarantees it. logData is a Log
// record's marshalled entries, written after its times with their length.
func (e *encoder) add(id string, scale int64, a rl.Algo, r algo.Record, logData []byte) {
	shared := 0
	for shared < len(id) && shared < len(e.prev) && id[shared] == e.prev[shared] {
		shared++
	}
	b := e.buf
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(id)-shared))
	b = append(b, id[shared:]...)
	b = binary.AppendUvarint(b, uint64(scale)<<algoBits|uint64(a))
	b = binary.AppendVarint(b, r.Count)
	b = binary.AppendVarint(b, r.Created-e.base) // wraps, and unwraps on read
	b = binary.AppendVarint(b, r.Modified-r.Created)
	if a == rl.Log {
		b = binary.AppendUvarint(b, uint64(len(logData)))
		b = append(b, logData...)
	}
	e.buf = b
	e.prev = append(e.prev[:shared], id[shared:]...)
	e.n++
}

// end appends the end marker and the record count; the checksum follows.
func (e *encoder) end() {
	e.buf = append(e.buf, 0, 0)
	e.buf = binary.AppendUvarint(e.buf, e.n)
}

// Info describes a snapshot that was read.
type Info struct {
	// Version is the file's format version.
	Version int
	// Written is the writer's clock when it began, Unix ms.
	Written int64
	// Records is the number of records in the file.
	Records int
}

// Read checks the snapshot in r (size bytes) and calls fn for each record in
// file order. The whole file's checksum is verified before the first call,
// so fn never sees a record of a damaged file; a structural fault the
// checksum cannot see (a foreign writer) stops the reading with an error
// matching ErrCorrupt. An error from fn stops the reading and is returned as
// it is. fn may be nil to check the file only. Memory used is bounded by the
// longest id plus a small constant, whatever the length fields claim.
func Read(r io.ReaderAt, size int64, fn func(Record) error) (Info, error) {
	if err := verify(r, size); err != nil {
		return Info{}, err
	}
	return decode(sectionOf(r, size), fn)
}

// verify checks the magic, the version and the checksum.
func verify(r io.ReaderAt, size int64) error {
	if size == 0 {
		return corrupt("empty file")
	}
	var h [headerSize]byte
	n, err := r.ReadAt(h[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("snapshot: reading: %w", err)
	}
	if n < len(magic) || string(h[:len(magic)]) != magic {
		return corrupt("not a raterlimiter snapshot (bad magic)")
	}
	if n < len(magic)+2 {
		return corrupt("truncated header: %v", err)
	}
	if v := binary.BigEndian.Uint16(h[len(magic):]); v < 1 || v > Version {
		return corrupt("unsupported format version %d (this build reads versions 1 to %d)", v, Version)
	}
	if size < int64(headerSize)+2+1+crcSize {
		return corrupt("truncated: %d bytes", size)
	}
	crc := crc32.New(castagnoli)
	if _, err := io.Copy(crc, io.NewSectionReader(r, 0, size-crcSize)); err != nil {
		return fmt.Errorf("snapshot: reading: %w", err)
	}
	var sum [crcSize]byte
	if _, err := r.ReadAt(sum[:], size-crcSize); err != nil {
		return fmt.Errorf("snapshot: reading: %w", err)
	}
	if got, want := crc.Sum32(), binary.BigEndian.Uint32(sum[:]); got != want {
		return corrupt("checksum mismatch (file says %08x, content gives %08x): damaged or truncated", want, got)
	}
	return nil
}

// decode parses everything before the checksum.
func decode(sr io.Reader, fn func(Record) error) (Info, error) {
	br := bufio.NewReaderSize(sr, 64<<10)
	var h [headerSize]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return Info{}, corrupt("truncated header")
	}
	info := Info{Version: int(binary.BigEndian.Uint16(h[len(magic):])), Written: int64(binary.BigEndian.Uint64(h[len(magic)+2:]))}
	base := info.Written
	var id []byte
	var prevKey recordKey
	for {
		shared, err := uvarint(br, "id prefix")
		if err != nil {
			return info, err
		}
		n, err := uvarint(br, "id length")
		if err != nil {
			return info, err
		}
		if shared == 0 && n == 0 {
			break
		}
		if shared > uint64(len(id)) {
			return info, corrupt("record %d: id shares %d bytes of a %d-byte id", info.Records, shared, len(id))
		}
		if n > memstore.MaxIDBytes-shared {
			return info, corrupt("record %d: id longer than %d bytes", info.Records, memstore.MaxIDBytes)
		}
		id = id[:shared]
		if id, err = readN(br, id, int(n)); err != nil {
			return info, corrupt("record %d: truncated id", info.Records)
		}
		sa, err := uvarint(br, "scale")
		if err != nil {
			return info, err
		}
		bits := uint(algoBits)
		if info.Version < 3 {
			bits = 2
		}
		rec := Record{Scale: int64(sa >> bits), Algo: rl.Algo(sa & (1<<bits - 1))}
		if rec.Scale < 1 || rec.Scale > ms.MaxScale || !check.ValidAlgo(rec.Algo) {
			return info, corrupt("record %d: scale %d or algorithm %d out of range", info.Records, sa>>bits, sa&(1<<bits-1))
		}
		var c, dc, dm int64
		if c, err = varint(br, "count"); err == nil {
			if dc, err = varint(br, "created"); err == nil {
				dm, err = varint(br, "modified")
			}
		}
		if err != nil {
			return info, err
		}
		rec.State = algo.Record{Count: c, Created: base + dc, Modified: base + dc + dm}
		if why := implausible(rec, info.Written); why != "" {
			return info, corrupt("record %d: %s", info.Records, why)
		}
		k := recordKey{string(id), rec.Scale, rec.Algo, 0, algo.BucketOf(rec.Algo, rec.Scale, rec.State)}
		if rec.Algo == rl.Slices {
			k.slices, _ = algo.SlicesOfRecord(rec.State)
		}
		if info.Records > 0 && k == prevKey {
			return info, corrupt("record %d: the same key as the record before it", info.Records)
		}
		prevKey = k
		var logData []byte
		if rec.Algo == rl.Log {
			if info.Version < 2 {
				return info, corrupt("record %d: a log record in a version %d file", info.Records, info.Version)
			}
			n, err := uvarint(br, "log length")
			if err != nil {
				return info, err
			}
			if n > maxLogBytes {
				return info, corrupt("record %d: a log of %d bytes (at most %d)", info.Records, n, maxLogBytes)
			}
			if logData, err = readN(br, nil, int(n)); err != nil {
				return info, corrupt("record %d: truncated log", info.Records)
			}
			var l algo.Log
			if err := l.UnmarshalBinary(logData); err != nil {
				return info, corrupt("record %d: log entries: %v", info.Records, err)
			}
			if newest, ok := l.Newest(); !ok || newest > rec.State.Modified {
				return info, corrupt("record %d: the log's newest entry is after its record's last change", info.Records)
			}
		}
		info.Records++
		if fn != nil {
			rec.ID = string(id)
			rec.Log = logData
			if err := fn(rec); err != nil {
				return info, err
			}
		}
	}
	count, err := uvarint(br, "record count")
	if err != nil {
		return info, err
	}
	if count != uint64(info.Records) {
		return info, corrupt("the trailer counts %d records, the file holds %d", count, info.Records)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return info, corrupt("bytes after the trailer")
	}
	return info, nil
}

// clockSlack is how far ahead of the file's own write time a record's times
// may lie: the clocks of the writer's shards and of the machine differ by
// less.
const clockSlack = int64(10 * 60_000)

// implausible says why a record that decodes cannot have been written by a
// store at written (Unix ms), or "" when it could: a planted file must not
// give a limit of 5 a million hits, or hold a window from the future.
func implausible(r Record, written int64) string {
	st := r.State
	switch r.Algo {
	case rl.Fixed, rl.Sliding:
		switch {
		case st.Count < 0:
			return fmt.Sprintf("a negative count (%d)", st.Count)
		case r.Algo == rl.Sliding && st.Count > bounds.MaxLimit:
			return fmt.Sprintf("a sliding count (%d) above any limit", st.Count)
		case st.Modified < st.Created:
			return "changed before it was created"
		case st.Modified > written+clockSlack:
			return "changed after the file was written"
		}
	case rl.Token, rl.Leaky:
		num, den := uint32(st.Count), uint32(uint64(st.Count)>>32)
		switch {
		case num != 0 && num >= den:
			return "a token fraction that is not below its denominator"
		case st.Modified > written+r.Scale+clockSlack:
			return "a theoretical arrival time more than a window after the file was written"
		case st.Created > written+clockSlack:
			return "created after the file was written"
		}
	case rl.Log:
		switch {
		case st.Modified < st.Created:
			return "changed before it was created"
		case st.Modified > written+clockSlack:
			return "changed after the file was written"
		}
	case rl.Slices:
		switch n := uint64(st.Count) >> 32; {
		case n < uint64(bounds.MinSlices) || n > uint64(bounds.MaxSlices):
			return fmt.Sprintf("a slice count (%d) out of 2 to 600", n)
		case st.Modified < st.Created:
			return "changed before it was created"
		case st.Modified > written+clockSlack:
			return "changed after the file was written"
		}
	}
	return ""
}

// readN appends n bytes from r to b, growing b no faster than the data
// arrives.
func readN(r io.Reader, b []byte, n int) ([]byte, error) {
	for n > 0 {
		step := min(n, readStep)
		b = append(b, make([]byte, step)...)
		if _, err := io.ReadFull(r, b[len(b)-step:]); err != nil {
			return b, err
		}
		n -= step
	}
	return b, nil
}

func uvarint(r io.ByteReader, what string) (uint64, error) {
	v, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, fieldErr(what, err)
	}
	return v, nil
}

func varint(r io.ByteReader, what string) (int64, error) {
	v, err := binary.ReadVarint(r)
	if err != nil {
		return 0, fieldErr(what, err)
	}
	return v, nil
}

func fieldErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("truncated at the %s", what)
	}
	return corrupt("bad %s: %v", what, err)
}

// sectionOf is the part of a size-byte file before its checksum.
func sectionOf(r io.ReaderAt, size int64) io.Reader {
	return io.NewSectionReader(r, 0, size-crcSize)
}

// recordKey is a record's place in the store: no two records of a file
// share one.
type recordKey struct {
	id     string
	scale  int64
	algo   rl.Algo
	slices int64
	b      int64
}

// algoBits is how many bits of a record's scale field hold its algorithm
// (version 3; two before).
const algoBits = 3
