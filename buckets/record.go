package buckets

import (
	"strings"
	"unsafe"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
)

// rec is the header of a record. The record is a []uint64 allocation: these
// four words, then the id's bytes. meta also holds a mark, set while the
// record's last check was denied. While the record is in the store its id
// never changes, nor does meta or, for windowed algorithms, created (which
// fixes the bucket); once evicted, its memory may become a new record
// (newRec).
//
// A Slices record (one slice's counter) packs more into the same four
// words, so that one slice costs what a fixed window's record costs: its
// hits, a summary of the window's older slices, the time last seen and the
// slice count (slices.go has the layout).
type rec struct {
	meta     uint64 // scale<<metaScaleShift | algo<<metaAlgoShift | len(id)
	count    int64
	created  int64
	modified int64
}

const (
	headerWords    = 4
	metaAlgoShift  = 21
	metaAlgoMask   = 7
	metaScaleShift = 24
	// metaDenying marks a record whose last check was denied: eviction
	// spares it while it has other candidates.
	metaDenying = 1 << 20
	// MaxIDBytes is the longest id a record can hold: 1 MiB - 1, far above
	// what a sidecar accepts (-max-id-bytes is at most 64 KiB).
	MaxIDBytes = metaDenying - 1
)

// newRec returns the record of (id, scale, a) holding r. It is made in the
// memory of old, a record no longer in the store (evicted, and forgotten by
// the cache), when old's id takes as many words as id: a flood of new ids
// at the bound then costs no allocation per id. With old nil or of another
// size it allocates: a record's memory is always what its id needs, so the
// store's bytes (Store.bytesHeld) are its records' real size.
func newRec(old *rec, id string, scale int64, a rl.Algo, r algo.Record) *rec {
	p := old
	if p == nil || (p.meta&MaxIDBytes+7)/8 != uint64(len(id)+7)/8 {
		w := make([]uint64, headerWords+(len(id)+7)/8)
		p = (*rec)(unsafe.Pointer(unsafe.SliceData(w)))
	}
	p.meta = makeMeta(len(id), scale, a)
	p.set(r)
	copy(unsafe.Slice(p.idData(), len(id)), id)
	return p
}

func makeMeta(idLen int, scale int64, a rl.Algo) uint64 {
	return uint64(scale)<<metaScaleShift | uint64(a)<<metaAlgoShift | uint64(idLen)
}

func (p *rec) idData() *byte {
	return (*byte)(unsafe.Add(unsafe.Pointer(p), headerWords*8))
}

// id returns the record's id without copying it. The string must not outlive
// the record's reachability from the caller (it shares its memory).
func (p *rec) id() string {
	return unsafe.String(p.idData(), int(p.meta&MaxIDBytes))
}

func (p *rec) scale() int64  { return int64(p.meta >> metaScaleShift) }
func (p *rec) algo() rl.Algo { return rl.Algo(p.meta >> metaAlgoShift & metaAlgoMask) }
func (p *rec) key() uint64   { return p.meta >> metaAlgoShift } // scale and algo

// keyMeta is the record's meta without the denying mark: what lookups and
// the cache compare and hash.
func (p *rec) keyMeta() uint64 { return p.meta &^ metaDenying }

func (p *rec) denying() bool { return p.meta&metaDenying != 0 }

// setDenying marks or clears the record as denying.
func (p *rec) setDenying(on bool) {
	if on {
		p.meta |= metaDenying
	} else {
		p.meta &^= metaDenying
	}
}

// record returns the record as package algo reads it (a Slices record as
// algo.SlicesRecord packs it).
func (p *rec) record() algo.Record {
	if p.algo() == rl.Slices {
		return algo.SlicesRecord(p.slices(), p.own(), p.created, p.seen())
	}
	return algo.Record{Count: p.count, Created: p.created, Modified: p.modified}
}

// set stores r, a record as package algo reads it. A Slices record's
// summary is left invalid: the next check of its slice reads the window.
func (p *rec) set(r algo.Record) {
	if p.algo() == rl.Slices {
		n, hits := algo.SlicesOfRecord(r)
		p.count, p.created = hits, r.Created
		p.modified = packSeen(r.Created, r.Modified) | int64(uint64(n)&slicesNMask<<slicesNShift)
		return
	}
	p.count, p.created, p.modified = r.Count, r.Created, r.Modified
}

// seen is the last time the record was seen: Modified, or for a Slices
// record its packed offset from created. Eviction takes the least recently
// seen.
func (p *rec) seen() int64 {
	if p.algo() == rl.Slices {
		return p.created + p.modified&seenMask
	}
	return p.modified
}

func (p *rec) bucket() int64 {
	switch p.algo() {
	case rl.Token, rl.Log, rl.Leaky:
		return 0
	case rl.Slices:
		return p.slot() // its place in its limit's ring (slices.go)
	}
	return algo.Bucket(p.created, p.scale())
}

// less orders records by id, then scale, then algo, then (Slices) slice
// count, then bucket (Slices: the slot in the ring).
func less(a, b *rec) bool {
	if c := strings.Compare(a.id(), b.id()); c != 0 {
		return c < 0
	}
	if ka, kb := a.key(), b.key(); ka != kb {
		return ka < kb
	}
	if a.algo() == rl.Slices {
		if na, nb := a.slices(), b.slices(); na != nb {
			return na < nb
		}
	}
	return a.bucket() < b.bucket()
}

// pivot is a reusable search key: a record header and room for an id.
type pivot struct {
	w []uint64
}

// set makes the pivot the key (id, scale, a, bucket) and returns it. A scale
// of 0 sorts before every record of id; a Slices pivot set here sorts
// before every slice count (see setSlice).
func (pv *pivot) set(id string, scale int64, a rl.Algo, bucket int64) *rec {
	n := headerWords + (len(id)+7)/8
	if cap(pv.w) < n {
		pv.w = make([]uint64, n, n+8)
	}
	p := (*rec)(unsafe.Pointer(unsafe.SliceData(pv.w)))
	p.meta = makeMeta(len(id), scale, a)
	p.count, p.modified = 0, 0
	p.created = bucket * scale
	copy(unsafe.Slice(p.idData(), len(id)), id)
	return p
}

// setSlice makes the pivot the key of slot (0 .. n-1) of the ring of (id,
// scale) cut into n slices, and returns it.
func (pv *pivot) setSlice(id string, scale, n, slot int64) *rec {
	p := pv.set(id, scale, rl.Slices, 0)
	p.modified = int64(uint64(n) & slicesNMask << slicesNShift)
	p.created = slot * algo.SliceWidth(scale, n) // slice slot: in slot slot
	return p
}
