package memory

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The snapshot format, version 3. All integers are big-endian or Go varints
// (encoding/binary).
//
//	header   "RLSNAP" | version uint16 (3) | base int64 (Unix ms when written)
//	record   uvarint shared | uvarint n | n bytes    id: the first shared bytes of
//	                                                 the previous record's id, then these
//	         uvarint scale<<3 | algo                 scale 1..ms.MaxScale; 0 fixed, 1 sliding,
//	                                                 2 token, 3 log, 4 slices, 5 leaky
//	                                                 (versions 1 and 2: scale<<2 | algo, algo 0 to 3)
//	         varint count                            algo.Record.Count (token, leaky: limit<<32 |
//	                                                 fraction; slices: slice count<<32 | hits)
//	         varint created - base                   algo.Record.Created
//	         varint modified - created               algo.Record.Modified
//	         uvarint n | n bytes                     log only (version 2 on): its entries,
//	                                                 as algo.Log.AppendBinary writes them
//	end      uvarint 0 | uvarint 0                   an empty id ends the records
//	trailer  uvarint number of records | uint32 CRC-32C (Castagnoli) of every byte before it
//
// Nothing may follow the checksum. Ids are any bytes, 1 to snapshotMaxID of
// them. Records come shard by shard, each shard's in the store's order, and
// no two consecutive records share a key. Version 2 added the entries of Log
// records, which version 1 has none of; version 3 gave the algorithm three
// bits beside the scale (Slices and Leaky), where versions 1 and 2 have two.

// ErrCorruptSnapshot matches the error Load returns for bytes that are not a
// snapshot this build can read: empty, foreign, truncated, damaged, of a
// later format version, or holding a record no limiter could have written.
var ErrCorruptSnapshot = errors.New("memory: corrupt snapshot")

const (
	snapshotVersion = 3
	snapshotMagic   = "RLSNAP"
	headerSize      = len(snapshotMagic) + 2 + 8
	crcSize         = 4
	// snapshotMaxID is the longest id a snapshot holds: the longest a
	// store holds (checked below).
	snapshotMaxID = 1<<20 - 1
	// maxLogBytes bounds a Log record's entries: a log holds at most
	// check.MaxLogLimit hits, a few bytes each.
	maxLogBytes = 1 << 20
	// readStep bounds what one read of an id may allocate ahead of the data
	// actually present, so a hostile length field costs little.
	readStep = 64 << 10
	// algoBits is how many bits of a record's scale field hold its
	// algorithm (version 3; two before).
	algoBits = 3
	// clockSlack is how far ahead of the snapshot's own write time a
	// record's times may lie: the clocks of the writer's shards and of the
	// machine differ by less.
	clockSlack = int64(10 * 60_000)
	// saveChunk is how many records Save copies from a shard in one visit
	// to its goroutine.
	saveChunk = 32768
	// restoreBatch is how many records Load puts into a shard in one visit.
	restoreBatch = 256
)

// A snapshot holds any id a store holds.
var _ = [1]struct{}{}[snapshotMaxID-buckets.MaxIDBytes]

// castagnoli is the CRC-32C table; it is never written after init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Save writes a snapshot of l to w: every record a check could still read
// (expired ones are left out), for Load to restore into this limiter or
// another, of any number of shards, in this process or a later one.
//
// Checks go on during Save: each shard is copied in chunks of 32,768
// records, one short visit to its goroutine per chunk. A record is saved as
// it was when its chunk was copied, so a snapshot taken under traffic is
// not one instant across shards; stop the traffic first for an exact image.
//
// The snapshot ends with a CRC-32C checksum of everything before it, so
// Load refuses bytes cut short or changed. On error what Save wrote to w is
// not a complete snapshot, and Load refuses it too. Save buffers its writes.
// Writing a file so that a crash never leaves half of one (a temporary file,
// fsync, rename) is the caller's part.
//
// The format is stable: Load reads every version this module has written,
// and refuses a later one rather than guess.
func (l *Limiter) Save(ctx context.Context, w io.Writer) error {
	if l.actors == nil {
		return errNotNew
	}
	_, err := l.save(ctx, w, saveChunk)
	return err
}

// saveStats is what a save did.
type saveStats struct {
	records int
	visits  int
	// longestVisit is the longest visit to a shard's goroutine: the
	// longest a check could have waited for the save.
	longestVisit time.Duration
}

// save is Save copying chunk records per visit.
func (l *Limiter) save(ctx context.Context, w io.Writer, chunk int) (saveStats, error) {
	var st saveStats
	var base int64 // shard 0's time: the records' times are written relative to it
	if err := l.actors[0].Do(ctx, func(_ *buckets.Store, now int64) { base = now }); err != nil {
		return st, fmt.Errorf("memory: saving a snapshot: %w", err)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(bw, crc)
	e := &encoder{base: base, buf: appendHeader(nil, base)} // written with the first visit's records
	err := l.copyRecords(ctx, chunk, func(r record) error {
		e.add(r)
		return nil
	}, func(took time.Duration) error {
		st.visits++
		st.longestVisit = max(st.longestVisit, took)
		_, err := out.Write(e.buf)
		e.buf = e.buf[:0]
		return err
	})
	if err == nil {
		e.end()
		_, err = out.Write(e.buf)
	}
	if err == nil {
		_, err = bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return st, fmt.Errorf("memory: saving a snapshot: %w", err)
	}
	st.records = int(e.n)
	return st, nil
}

// Load restores into l a snapshot that Save wrote, read from r, size bytes
// long (an *os.File and its size, a *bytes.Reader and its Len), and returns
// how many records it restored.
//
// The whole snapshot is verified before anything is restored: its checksum,
// its structure, and that each record is one a limiter could have written
// (no negative count, no window from the future, at most 1 MiB - 1 bytes of
// id). Bytes that fail are refused with an error matching
// ErrCorruptSnapshot, and l is left as it was. What Load allocates follows
// what the records hold, never what a length field claims.
//
// Records expired at l's clock are left out, as are records whose id is
// longer than l's Config.MaxIDBytes, which no check of l could reach
// (Config.Logger is told how many). A restored record replaces l's record
// of the same id, window and algorithm; l's other records stay. Load is
// meant for a limiter that serves no checks yet. An error after the
// verification (ctx ended, l closed) may leave part of the snapshot
// restored, n records.
func (l *Limiter) Load(ctx context.Context, r io.ReaderAt, size int64) (n int, err error) {
	if l.actors == nil {
		return 0, errNotNew
	}
	if _, err := readSnapshot(r, size, nil); err != nil {
		return 0, err
	}
	var long int
	batches := map[*actor.Actor][]record{}
	flush := func(a *actor.Actor) error {
		k, err := restoreBatchInto(ctx, a, batches[a])
		n += k
		batches[a] = batches[a][:0]
		return err
	}
	_, err = decode(io.NewSectionReader(r, 0, size-crcSize), func(rec record) error {
		if len(rec.ID) > l.maxID {
			long++
			return nil
		}
		a := l.shard(rec.ID)
		batches[a] = append(batches[a], rec)
		if len(batches[a]) < restoreBatch {
			return nil
		}
		return flush(a)
	})
	for a := range batches {
		if err == nil {
			err = flush(a)
		}
	}
	if long > 0 {
		l.logger.Warn("memory: snapshot records whose ids are longer than MaxIDBytes were not loaded", "records", long, "max_id_bytes", l.maxID)
	}
	if err != nil {
		return n, fmt.Errorf("memory: loading a snapshot: %w", err)
	}
	return n, nil
}

// restoreBatchInto puts the records of rs not expired at the shard's time
// into a's store, in one visit, and returns how many it put.
func restoreBatchInto(ctx context.Context, a *actor.Actor, rs []record) (n int, err error) {
	if len(rs) == 0 {
		return 0, nil
	}
	var perr error
	if err := a.Do(ctx, func(s *buckets.Store, now int64) {
		for _, r := range rs {
			if algo.Expired(r.Algo, r.Scale, r.State, now) {
				continue
			}
			if r.Algo == rl.Log {
				perr = s.PutLog(r.ID, r.Scale, r.State.Created, r.Log)
			} else {
				perr = s.Put(r.ID, r.Scale, r.Algo, r.State)
			}
			if perr != nil {
				return
			}
			n++
		}
	}); err != nil {
		return n, err
	}
	return n, perr
}

// encoder turns records into the format's bytes. It is not safe for
// concurrent use.
type encoder struct {
	base int64
	prev []byte // the previous record's id
	buf  []byte // encoded, not yet written
	n    uint64 // records encoded
}

func appendHeader(b []byte, base int64) []byte {
	b = append(b, snapshotMagic...)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	return binary.BigEndian.AppendUint64(b, uint64(base))
}

// add encodes one record: the store guarantees an id of 1 to snapshotMaxID
// bytes, a scale of 1 to millis.MaxScale and a valid algorithm. A Log record's
// marshalled entries are written after its times, with their length.
func (e *encoder) add(r record) {
	id := r.ID
	shared := 0
	for shared < len(id) && shared < len(e.prev) && id[shared] == e.prev[shared] {
		shared++
	}
	b := e.buf
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(id)-shared))
	b = append(b, id[shared:]...)
	b = binary.AppendUvarint(b, uint64(r.Scale)<<algoBits|uint64(r.Algo))
	b = binary.AppendVarint(b, r.State.Count)
	b = binary.AppendVarint(b, r.State.Created-e.base) // wraps, and unwraps on read
	b = binary.AppendVarint(b, r.State.Modified-r.State.Created)
	if r.Algo == rl.Log {
		b = binary.AppendUvarint(b, uint64(len(r.Log)))
		b = append(b, r.Log...)
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

// snapshotInfo describes a snapshot that was read.
type snapshotInfo struct {
	version int
	written int64 // the writer's clock when it began, Unix ms
	records int
}

// corrupt returns an error matching ErrCorruptSnapshot.
func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, a...))
}

// readSnapshot verifies the snapshot in r (size bytes) and calls fn for
// each record in order. The checksum is verified before the first call, so
// fn never sees a record of damaged bytes; a fault the checksum cannot see
// (a foreign writer) stops the reading with an error matching
// ErrCorruptSnapshot. An error from fn stops the reading and is returned as
// it is. fn may be nil to verify the snapshot only.
func readSnapshot(r io.ReaderAt, size int64, fn func(record) error) (snapshotInfo, error) {
	if err := verifySum(r, size); err != nil {
		return snapshotInfo{}, err
	}
	return decode(io.NewSectionReader(r, 0, size-crcSize), fn)
}

// verifySum checks the magic, the version and the checksum.
func verifySum(r io.ReaderAt, size int64) error {
	if size <= 0 {
		return corrupt("empty: 0 bytes")
	}
	var h [headerSize]byte
	n, err := r.ReadAt(h[:min(int64(len(h)), size)], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("memory: reading a snapshot: %w", err)
	}
	if n < len(snapshotMagic) || string(h[:len(snapshotMagic)]) != snapshotMagic {
		return corrupt("not a raterlimiter snapshot (bad magic)")
	}
	if n < len(snapshotMagic)+2 {
		return corrupt("truncated header")
	}
	if v := binary.BigEndian.Uint16(h[len(snapshotMagic):]); v < 1 || v > snapshotVersion {
		return corrupt("unsupported format version %d (this build reads versions 1 to %d)", v, snapshotVersion)
	}
	if size < int64(headerSize)+2+1+crcSize {
		return corrupt("truncated: %d bytes", size)
	}
	crc := crc32.New(castagnoli)
	if _, err := io.Copy(crc, io.NewSectionReader(r, 0, size-crcSize)); err != nil {
		return fmt.Errorf("memory: reading a snapshot: %w", err)
	}
	var sum [crcSize]byte
	if _, err := r.ReadAt(sum[:], size-crcSize); err != nil {
		return fmt.Errorf("memory: reading a snapshot: %w", err)
	}
	if got, want := crc.Sum32(), binary.BigEndian.Uint32(sum[:]); got != want {
		return corrupt("checksum mismatch (the snapshot says %08x, its content gives %08x): damaged or truncated", want, got)
	}
	return nil
}

// decode parses everything before the checksum.
func decode(sr io.Reader, fn func(record) error) (snapshotInfo, error) {
	br := bufio.NewReaderSize(sr, 64<<10)
	var h [headerSize]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return snapshotInfo{}, corrupt("truncated header")
	}
	info := snapshotInfo{
		version: int(binary.BigEndian.Uint16(h[len(snapshotMagic):])),
		written: int64(binary.BigEndian.Uint64(h[len(snapshotMagic)+2:])),
	}
	bits := uint(algoBits)
	if info.version < 3 {
		bits = 2
	}
	var id []byte
	var prev key
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
			return info, corrupt("record %d: id shares %d bytes of a %d-byte id", info.records, shared, len(id))
		}
		if n > snapshotMaxID-shared {
			return info, corrupt("record %d: id longer than %d bytes", info.records, snapshotMaxID)
		}
		if id, err = readN(br, id[:shared], int(n)); err != nil {
			return info, corrupt("record %d: truncated id", info.records)
		}
		sa, err := uvarint(br, "scale")
		if err != nil {
			return info, err
		}
		rec := record{Scale: int64(sa >> bits), Algo: rl.Algo(sa & (1<<bits - 1))}
		if rec.Scale < 1 || rec.Scale > millis.MaxScale || !check.ValidAlgo(rec.Algo) {
			return info, corrupt("record %d: scale %d or algorithm %d out of range", info.records, sa>>bits, sa&(1<<bits-1))
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
		rec.State = algo.Record{Count: c, Created: info.written + dc, Modified: info.written + dc + dm}
		if why := implausible(rec, info.written); why != "" {
			return info, corrupt("record %d: %s", info.records, why)
		}
		k := keyOf(string(id), rec.Scale, rec.Algo, rec.State)
		if info.records > 0 && k == prev {
			return info, corrupt("record %d: the same key as the record before it", info.records)
		}
		prev = k
		if rec.Algo == rl.Log {
			if rec.Log, err = readLog(br, info, rec.State.Modified); err != nil {
				return info, err
			}
		}
		info.records++
		if fn != nil {
			rec.ID = k.id
			if err := fn(rec); err != nil {
				return info, err
			}
		}
	}
	count, err := uvarint(br, "record count")
	if err != nil {
		return info, err
	}
	if count != uint64(info.records) {
		return info, corrupt("the trailer counts %d records, the snapshot holds %d", count, info.records)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return info, corrupt("bytes after the trailer")
	}
	return info, nil
}

// readLog reads a Log record's entries, which must decode and end no later
// than the record's last change.
func readLog(br *bufio.Reader, info snapshotInfo, modified int64) ([]byte, error) {
	if info.version < 2 {
		return nil, corrupt("record %d: a log record in a version %d snapshot", info.records, info.version)
	}
	n, err := uvarint(br, "log length")
	if err != nil {
		return nil, err
	}
	if n > maxLogBytes {
		return nil, corrupt("record %d: a log of %d bytes (at most %d)", info.records, n, maxLogBytes)
	}
	data, err := readN(br, nil, int(n))
	if err != nil {
		return nil, corrupt("record %d: truncated log", info.records)
	}
	var l algo.Log
	if err := l.UnmarshalBinary(data); err != nil {
		return nil, corrupt("record %d: log entries: %v", info.records, err)
	}
	if newest, ok := l.Newest(); !ok || newest > modified {
		return nil, corrupt("record %d: the log's newest entry is after its record's last change", info.records)
	}
	return data, nil
}

// implausible says why a record that decodes cannot have been written by a
// store at written (Unix ms), or "" when it could: planted bytes must not
// give a limit of 5 a million hits, or hold a window from the future.
func implausible(r record, written int64) string {
	st := r.State
	switch r.Algo {
	case rl.Token, rl.Leaky:
		num, den := uint32(st.Count), uint32(uint64(st.Count)>>32)
		switch {
		case num != 0 && num >= den:
			return "a token fraction that is not below its denominator"
		case st.Modified > written+r.Scale+clockSlack:
			return "a theoretical arrival time more than a window after the snapshot was written"
		case st.Created > written+clockSlack:
			return "created after the snapshot was written"
		}
		return ""
	case rl.Fixed, rl.Sliding:
		switch {
		case st.Count < 0:
			return fmt.Sprintf("a negative count (%d)", st.Count)
		case r.Algo == rl.Sliding && st.Count > check.MaxLimit:
			return fmt.Sprintf("a sliding count (%d) above any limit", st.Count)
		}
	case rl.Slices:
		if n := uint64(st.Count) >> 32; n < uint64(check.MinSlices) || n > uint64(check.MaxSlices) {
			return fmt.Sprintf("a slice count (%d) out of %d to %d", n, check.MinSlices, check.MaxSlices)
		}
	}
	// Fixed, Sliding, Log and Slices: Modified is the time of a change.
	switch {
	case st.Modified < st.Created:
		return "changed before it was created"
	case st.Modified > written+clockSlack:
		return "changed after the snapshot was written"
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
