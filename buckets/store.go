package buckets

import (
	"cmp"
	"slices"

	"github.com/tidwall/btree"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// MaxIDBytes is the longest id accepted; 0 means
	// check.DefaultMaxIDBytes. It cannot exceed MaxIDBytes.
	MaxIDBytes int
	// CacheSlots is the most slots of the direct-mapped cache of recently
	// used records that spares hot ids a tree search. The cache starts small
	// and doubles while it has fewer than four slots a record, up to this
	// size (rounded up to a power of two). 0 means defaultCacheSlots;
	// negative disables the cache. A slot costs 8 bytes.
	CacheSlots int
	// MaxRecords bounds the store: a new record that would pass it first
	// evicts one (see Store.Check). 0 or negative means no bound.
	MaxRecords int
	// MaxBytes bounds the bytes of the store's records (recordBytes each,
	// which grows with the id: ids are the caller's choice) and of its
	// logs' rings: a new record that would pass it first evicts records,
	// as MaxRecords does, and so does a log that grows past it. A record
	// larger than the whole bound is kept alone. 0 or negative means no
	// bound.
	MaxBytes int
	// Seed seeds the sampling of eviction candidates. Any value works.
	Seed uint64
	// MaxScalesPerID bounds the distinct scales one id may hold records
	// of; a check that would add one more is refused (ErrTooManyScales).
	// Each slice count of a scale's Slices records counts as a scale of its
	// own (a Slices limit holds up to 600 records): a scale's records of
	// the other algorithms count once. 0 or negative means no bound.
	MaxScalesPerID int
}

// ErrTooManyScales refuses a check that would give an id records of more
// distinct scales than Options.MaxScalesPerID allows (check.ErrTooManyScales).
var ErrTooManyScales = check.ErrTooManyScales

// evictSamples is how many records an eviction looks at.
const evictSamples = 8

// defaultCacheSlots is the cache's largest size when Options.CacheSlots is
// 0: 512 KiB.
const defaultCacheSlots = 1 << 16

// Store is an ordered set of bucket records. The zero Store is not usable;
// make one with New. A Store is not safe for concurrent use.
type Store struct {
	tree  *btree.BTreeG[*rec]
	maxID int
	pv    pivot
	// sweepNext is where an incremental sweep stands between calls: the
	// first record not yet examined; nil: the next call starts a pass.
	sweepNext *rec
	cache     cache
	max       int
	rng       uint64
	// maxBytes is Options.MaxBytes; bytes is the recordBytes of the
	// records in the tree, added up (the logs' rings are in logs).
	maxBytes int
	bytes    int
	// maxScales is Options.MaxScalesPerID.
	maxScales int
	logs      logSlab
	// sliceBuf is the scratch of a scan of slices; sliceScans counts the
	// scans of a whole window (the tests watch the way around them).
	sliceBuf   []algo.Slice
	sliceScans uint64
	// seekPv is the pivot of the seeks over an id's limits (scalesOf), and
	// scaleSeeks counts those seeks (the tests bound them).
	seekPv     pivot
	scaleSeeks uint64
	// Evicted counts records evicted to stay within MaxRecords or MaxBytes.
	Evicted uint64
}

// New returns an empty store.
func New(opts Options) *Store {
	maxID := opts.MaxIDBytes
	if maxID <= 0 {
		maxID = check.DefaultMaxIDBytes
	}
	maxID = min(maxID, MaxIDBytes)
	return &Store{
		tree:      btree.NewBTreeGOptions(less, btree.Options{NoLocks: true}),
		maxID:     maxID,
		cache:     newCache(opts.CacheSlots),
		max:       opts.MaxRecords,
		maxBytes:  opts.MaxBytes,
		rng:       opts.Seed | 1,
		maxScales: opts.MaxScalesPerID,
	}
}

// get returns the record of (id, scale, a, bucket), from the cache when it
// holds it.
func (s *Store) get(id string, scale int64, a rl.Algo, bucket int64) (*rec, bool) {
	meta := makeMeta(len(id), scale, a)
	slot := s.cache.slot(id, meta)
	if p := s.cache.at(slot); p != nil && p.keyMeta() == meta && p.bucket() == bucket && p.id() == id {
		return p, true
	}
	p, ok := s.tree.Get(s.pv.set(id, scale, a, bucket))
	if ok {
		s.cache.put(slot, p)
	}
	return p, ok
}

// evict removes one record: an expired one among evictSamples neighbours
// read from a random place in the tree, else the least recently modified of
// them, and returns it (nil if the store is empty). The neighbours are read
// and the victim deleted by position, which walks the tree's node counts and
// compares no keys: a comparison reads a record's id, a cache miss in a large
// tree.
func (s *Store) evict(now int64) *rec {
	n := s.tree.Len()
	if n == 0 {
		return nil
	}
	// xorshift64*: cheap, and seeded for reproducible tests.
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	start := int((s.rng * 0x2545f4914f6cdd1d) % uint64(max(1, n-evictSamples+1)))
	var victim *rec
	at := -1
	for i := start; i < min(n, start+evictSamples); i++ {
		p, _ := s.tree.GetAt(i)
		if algo.Expired(p.algo(), p.scale(), p.record(), now) {
			victim, at = p, i
			break
		}
		// A record that is denying goes last: taking it would hand its id
		// a fresh limit. Among the rest, the least recently seen goes.
		if victim == nil || (victim.denying() && !p.denying()) ||
			(victim.denying() == p.denying() && p.seen() < victim.seen()) {
			victim, at = p, i
		}
	}
	if victim != nil {
		s.remove(victim)
		s.tree.DeleteAt(at)
		s.Evicted++
	}
	return victim
}

// remove is the hook every deletion passes through: it keeps the cache from
// pointing at a record no longer in the tree, frees a Log record's log,
// distrusts the summary that may count a Slices record's hits, and takes
// the record's bytes off the store's.
func (s *Store) remove(p *rec) {
	s.cache.forget(p)
	s.bytes -= p.size()
	switch p.algo() {
	case rl.Log:
		s.logs.release(p.count)
	case rl.Slices:
		s.forgetSlice(p)
	}
}

// makeRoom evicts records while the store has no room for a new record of
// an id of idLen bytes (MaxRecords, MaxBytes), before it is added, and
// returns the last one evicted (whose memory the new record may take), or
// nil.
func (s *Store) makeRoom(now int64, idLen int) *rec {
	var old *rec
	need := recordBytes(idLen)
	for s.tree.Len() > 0 && (s.max > 0 && s.load() >= s.max || s.maxBytes > 0 && s.bytesHeld()+need > s.maxBytes) {
		old = s.evict(now)
	}
	return old
}

// trim evicts records while the store is past MaxBytes, which a log that
// grows in place can take it past, sparing keep: it stops rather than
// evict it.
func (s *Store) trim(now int64, keep *rec) {
	for s.maxBytes > 0 && s.bytesHeld() > s.maxBytes && s.tree.Len() > 1 {
		if s.evict(now) == keep {
			return
		}
	}
}

// bytesHeld is the bytes of the store's records (recordBytes each) and of its
// logs' rings, what Options.MaxBytes bounds.
func (s *Store) bytesHeld() int { return s.bytes + s.logs.ringBytes }

// recOverhead is what a record costs beside its own allocation: its
// pointer in a B-tree node (nodes are half to wholly full) and the
// allocator's share of the node.
const recOverhead = 16

// recordBytes is what a record of an id of idLen bytes counts toward
// Options.MaxBytes: its allocation (a 32-byte header and the id, in 8-byte
// words) and its place in the tree. Go's allocator rounds an allocation up
// to its size class, by at most an eighth for records below 32 KiB.
func recordBytes(idLen int) int { return 8*(headerWords+(idLen+7)/8) + recOverhead }

// size is p's recordBytes.
func (p *rec) size() int { return recordBytes(int(p.meta & MaxIDBytes)) }

// insert adds the new record p of id to the tree and the cache.
func (s *Store) insert(id string, p *rec) {
	s.bytes += p.size()
	if prev, replaced := s.tree.Set(p); replaced {
		s.remove(prev) // never by a check; kept sound all the same
	}
	s.cache.grow(s.tree.Len())
	s.cache.put(s.cache.slot(id, p.cacheMeta()), p)
}

// Len returns the number of live records.
func (s *Store) Len() int { return s.tree.Len() }

// Check decides r at now and stores what the algorithm counts.
//
// When the store holds MaxRecords records, a check that needs a new record
// first evicts one: of a few neighbouring records read from a random place,
// an expired one if there is one (that costs no decision anything), else the
// one seen least recently (an idle id: it loses its count, which a busy
// abuser's record, seen all the time, is unlikely to). Denied checks count
// as seen: fixed counts them, a token bucket's throttled record holds a
// theoretical arrival time in the future, and sliding and log records take
// the time of a denied check as their last change. A flood of distinct ids
// thus costs a bounded amount of memory, and mostly its own records; a
// throttled id cannot reset itself by minting fresh ids.
//
// r must be valid (millis.Request.Validate, with ids up to the
// store's MaxIDBytes): the store trusts its owner, and the embedded
// limiter validates every request once, where it comes in (package memory).
// The error is ErrTooManyScales or nil.
func (s *Store) Check(now int64, r millis.Request) (millis.Decision, error) {
	switch r.Algo {
	case rl.Log:
		return s.checkLog(now, r)
	case rl.Slices:
		return s.checkSlices(now, r)
	}
	var b int64
	if r.Algo != rl.Token && r.Algo != rl.Leaky {
		b = algo.Bucket(now, r.Scale)
	}
	cur, ok := s.get(r.ID, r.Scale, r.Algo, b)
	var curRec, prevRec algo.Record
	var prev *rec
	var prevOK bool
	if ok {
		curRec = cur.record()
	}
	if r.Algo == rl.Sliding {
		if prev, prevOK = s.tree.Get(s.pv.set(r.ID, r.Scale, r.Algo, b-1)); prevOK {
			prevRec = prev.record()
		}
	}
	d, next, write := algo.Check(curRec, ok, prevRec, prevOK, now, r)
	if r.Hits > 0 {
		if ok {
			cur.setDenying(!d.Allowed)
		}
		if prevOK {
			prev.setDenying(!d.Allowed)
		}
	}
	switch {
	case write && ok:
		cur.set(next)
	case write:
		if s.overScales(r.ID, r.Scale, 0) {
			return millis.Decision{}, ErrTooManyScales
		}
		p := newRec(s.makeRoom(now, len(r.ID)), r.ID, r.Scale, r.Algo, next)
		p.setDenying(!d.Allowed)
		s.insert(r.ID, p)
	case r.Algo == rl.Sliding && r.Hits > 0:
		// A denied sliding check writes nothing, but its id is busy: its
		// records count as seen now, so eviction (least recently modified
		// first) does not take a throttled id for an idle one and hand it
		// a fresh limit. Sliding decides by counts and created times only.
		if ok {
			cur.modified = max(cur.modified, now)
		}
		if prevOK {
			prev.modified = max(prev.modified, now)
		}
	}
	return d, nil
}

// overScales reports whether a new record of (id, scale), of n slices (0
// for an algorithm other than Slices), would pass MaxScalesPerID. It looks
// at id's records only when a record is about to be made, so checks of
// existing records pay nothing, and then seeks (see scalesOf).
func (s *Store) overScales(id string, scale, n int64) bool {
	return s.maxScales > 0 && !s.hasLimit(id, scale, n) && s.scalesOf(id) >= s.maxScales
}

// seek returns the first record at or after the key p (a pivot), or nil.
// Every look at an id's limits goes through it, and the tests count them.
func (s *Store) seek(p *rec) *rec {
	s.scaleSeeks++
	var first *rec
	s.tree.Ascend(p, func(q *rec) bool {
		first = q
		return false
	})
	return first
}

// hasLimit reports whether id has a record of the limit MaxScalesPerID
// counts as (scale, n): with n 0, a record of scale of any algorithm but
// Slices; else a Slices record of scale cut into n slices.
func (s *Store) hasLimit(id string, scale, n int64) bool {
	if n > 0 {
		p := s.seek(s.seekPv.setSlice(id, scale, n, 0))
		return p != nil && p.id() == id && p.scale() == scale && p.algo() == rl.Slices && p.slices() == n
	}
	p := s.seek(s.seekPv.set(id, scale, 0, 0))
	if p == nil || p.id() != id || p.scale() != scale {
		return false
	}
	if p.algo() != rl.Slices {
		return true
	}
	// Only Slices records sort before the rest of the scale's (Leaky).
	p = s.seek(s.seekPv.set(id, scale, rl.Slices+1, 0))
	return p != nil && p.id() == id && p.scale() == scale
}

// scalesOf counts id's limits as MaxScalesPerID counts them, stopping once
// past the bound: each scale with records of an algorithm other than
// Slices, and each (scale, slice count) with Slices records. It seeks from
// one limit to the next, reading one record of each (at most two more for
// a scale's other algorithms), never every record of a limit: one id may
// hold hundreds of records in each of its Slices limits.
func (s *Store) scalesOf(id string) int {
	n := 0
	counted := int64(-1) // the last scale counted for its other algorithms
	at := s.seekPv.set(id, 0, 0, 0)
	for n <= s.maxScales {
		p := s.seek(at)
		if p == nil || p.id() != id {
			break
		}
		sc := p.scale()
		switch a := p.algo(); {
		case a == rl.Slices:
			n++
			at = s.seekPv.setSlice(id, sc, p.slices()+1, 0) // past this slice count
		default:
			if sc != counted {
				n, counted = n+1, sc
			}
			if a < rl.Slices {
				at = s.seekPv.set(id, sc, rl.Slices, 0) // past the algorithms before Slices
			} else {
				at = s.seekPv.set(id, sc+1, 0, 0) // past the scale
			}
		}
	}
	return n
}

// Put stores rec under (id, scale, a), replacing the record with the same key
// (the bucket comes from rec, see algo.BucketOf), and evicting one as Check
// does when the store is full. It is for restoring a snapshot; Check is the
// way to count.
func (s *Store) Put(id string, scale int64, a rl.Algo, r algo.Record) error {
	req := millis.Request{ID: id, Scale: scale, Algo: a}
	if err := req.Validate(s.maxID); err != nil {
		return err
	}
	if a == rl.Log {
		return errPutLog
	}
	if a == rl.Slices {
		if n, _ := algo.SlicesOfRecord(r); n < check.MinSlices || n > check.MaxSlices {
			return &rl.FieldError{Field: "slices", Rule: "a slices record's slice count must be from 2 to 600"}
		}
	}
	p := newRec(nil, id, scale, a, r)
	old, found := s.tree.Get(p)
	if found && a == rl.Slices && old.sliceNum() > p.sliceNum() {
		// A slot holds one slice: a record of an older slice than the one
		// there has left the window already.
		return nil
	}
	if !found {
		s.makeRoom(r.Modified, len(id))
	}
	s.bytes += p.size()
	if prev, replaced := s.tree.Set(p); replaced {
		s.remove(prev)
	}
	if a == rl.Slices {
		s.invalidateSlices(id, scale, p.slices())
	}
	return nil
}

// errPutLog refuses a Log record in Put: its hits are not in a Record.
var errPutLog = &rl.FieldError{Field: "algo", Rule: "log records cannot be restored from a record"}

// Buckets returns the records of id in key order (a Slices limit's in the
// order of its slices, not of its ring).
func (s *Store) Buckets(id string) []millis.Bucket {
	var out []millis.Bucket
	s.tree.Ascend(s.pv.set(id, 0, 0, 0), func(p *rec) bool {
		if p.id() != id {
			return false
		}
		out = append(out, algo.View(p.algo(), p.scale(), s.recordOf(p)))
		return true
	})
	// The tree's order but for the slices, which it keeps by their slot in
	// the ring, and which this puts in the order of their numbers.
	slices.SortFunc(out, func(x, y millis.Bucket) int {
		return cmp.Or(cmp.Compare(x.Scale, y.Scale), cmp.Compare(x.Algo, y.Algo),
			cmp.Compare(x.Slices, y.Slices), cmp.Compare(x.Bucket, y.Bucket))
	})
	return out
}

// Delete removes the records of id, of every scale when scale is 0 and of
// that scale only otherwise, and returns how many it removed.
func (s *Store) Delete(id string, scale int64) int {
	n := 0
	s.tree.DeleteAscend(s.pv.set(id, scale, 0, 0), func(p *rec) btree.Action {
		if p.id() != id || (scale != 0 && p.scale() != scale) {
			return btree.Stop
		}
		n++
		s.remove(p)
		return btree.Delete
	})
	return n
}

// Scan calls fn for every record in key order until fn returns false. fn
// must not change the store. The id passed to fn shares the store's memory:
// clone it to keep it past the call. A Log record's Count is the hits its
// log held at its last check.
func (s *Store) Scan(fn func(id string, scale int64, a rl.Algo, r algo.Record) bool) {
	s.tree.Scan(func(p *rec) bool {
		return fn(p.id(), p.scale(), p.algo(), s.recordOf(p))
	})
}

// recordOf is p's record as Scan shows it.
func (s *Store) recordOf(p *rec) algo.Record {
	r := p.record()
	if p.algo() == rl.Log {
		r.Count = int64(s.logs.logs[p.count].Hits())
	}
	return r
}

// ScanFrom is Scan starting at the first record whose key (id, scale, algo,
// slices, bucket) is not less than the given one, so a long walk can be
// resumed across calls without passing over what it already saw. slices
// is the slice count of a Slices key (algo.SlicesOfRecord), else 0, and a
// Slices key's bucket is the slot in its ring: the slice number modulo the
// slice count (see SliceSlot).
func (s *Store) ScanFrom(id string, scale int64, a rl.Algo, slices, bucket int64, fn func(id string, scale int64, a rl.Algo, r algo.Record) bool) {
	pv := s.pv.set(id, scale, a, bucket)
	if a == rl.Slices {
		pv = s.pv.setSlice(id, scale, slices, bucket)
	}
	s.tree.Ascend(pv, func(p *rec) bool {
		return fn(p.id(), p.scale(), p.algo(), s.recordOf(p))
	})
}

// SliceSlot is the bucket of a Slices record in the store's key order: its
// slot in its limit's ring, the slice number modulo the slice count (see
// ScanFrom).
func SliceSlot(num, slices int64) int64 { return floorMod(num, max(slices, 1)) }
