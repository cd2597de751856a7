package buckets

import (
	"math"

	"github.com/tidwall/btree"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

// The sliding window counters keep one record per slice, keyed (id, scale,
// Slices, slice count, slice number): the slices of one limit are
// neighbours in the tree, so the whole window is one range scan of at most
// N records. A check does not scan on the way it takes most often, though:
// the record of the current slice also holds the window's other slices'
// hits and how far back the oldest of them is (its summary), written when
// the record is made, and the slices before the current one never change
// again (only the current slice counts, and the store's time never runs
// back). A check of a slice that has its record is then one cache lookup,
// as a fixed window's; the first check of a new slice, and every denied
// one (whose RetryAfterMS needs each slice), scan the window, and the
// scan deletes the limit's slices that have left it, so a busy limit never
// holds more than N+1 records and the sweeper only mops up idle ones.
//
// The packing of a Slices record's modified word (see rec):
const (
	seenBits      = 40 // the time last seen, as an offset from created
	seenMask      = 1<<seenBits - 1
	slicesNShift  = seenBits // the slice count, 2 to 600
	slicesNMask   = 1<<10 - 1
	oldestShift   = slicesNShift + 10 // k - the oldest counted slice before k
	oldestMask    = 1<<10 - 1
	summaryShift  = oldestShift + 10 // set: count's high half and oldest are valid
	ownMask       = 1<<32 - 1
	maxSliceCount = ownMask // counts saturate here (they never pass a limit)
)

// packSeen returns seen's offset from created as the low bits of a Slices
// record's modified word: clamped to [0, 2^40-1] (12 years).
func packSeen(created, seen int64) int64 {
	if seen <= created {
		return 0
	}
	return min(seen-created, seenMask)
}

func (p *rec) slices() int64 { return p.modified >> slicesNShift & slicesNMask }

// own is the hits of the record's own slice.
func (p *rec) own() int64 { return p.count & ownMask }

func (p *rec) summaryValid() bool { return p.modified>>summaryShift&1 != 0 }

// base is the summary's hits of the window's slices before this one.
func (p *rec) base() int64 { return int64(uint64(p.count) >> 32) }

// oldestBack is the summary's distance from this slice back to the oldest
// slice before it holding hits (read only when base > 0).
func (p *rec) oldestBack() int64 { return p.modified >> oldestShift & oldestMask }

func (p *rec) setOwn(n int64) { p.count = p.count&^ownMask | min(n, maxSliceCount) }

// setSummary records the window's older slices: base hits, the oldest of
// them back slices ago.
func (p *rec) setSummary(base, back int64) {
	p.count = min(base, maxSliceCount)<<32 | p.own()
	p.modified = p.modified&^(oldestMask<<oldestShift) | (back&oldestMask)<<oldestShift | 1<<summaryShift
}

func (p *rec) clearSummary() { p.modified &^= 1 << summaryShift }

// see marks the record seen at now.
func (p *rec) see(now int64) {
	if s := packSeen(p.created, now); s > p.modified&seenMask {
		p.modified = p.modified&^seenMask | s
	}
}

// cacheMeta is what the cache hashes a record's key by: its meta without
// the denying mark, and for a Slices record its slice count too, so that
// two slice counts of one scale each keep their current slice.
func (p *rec) cacheMeta() uint64 {
	if p.algo() == rl.Slices {
		return p.keyMeta() ^ uint64(p.slices())<<4
	}
	return p.keyMeta()
}

func slicesCacheMeta(id string, scale, n int64) uint64 {
	return makeMeta(len(id), scale, rl.Slices) ^ uint64(n)<<4
}

// checkSlices decides a request with algo Slices (see the comment at the
// top of this file).
func (s *Store) checkSlices(now int64, r rl.Request) (rl.Decision, error) {
	n, w, k := algo.SliceOf(now, r)
	meta := makeMeta(len(r.ID), r.Scale, rl.Slices)
	slot := s.cache.slot(r.ID, slicesCacheMeta(r.ID, r.Scale, n))
	// last is the limit's record the cache holds: its newest, since every
	// new slice's record goes there (and nothing but a check makes one).
	last := s.cache.at(slot)
	if last != nil && (last.keyMeta() != meta || last.slices() != n || last.id() != r.ID) {
		last = nil
	}
	if last != nil && last.created >= (k+1)*w {
		// Before the limit's newest slice: a caller whose clock ran back
		// (an actor's never does) is decided at that slice's last
		// sighting, as the log and Redis decide: the window never rewinds.
		now = max(now, last.seen())
		k = algo.Bucket(now, w)
	}
	var cur *rec
	ok := false
	switch {
	case last != nil && last.created >= k*w:
		cur, ok = last, true
	case last != nil && last.summaryValid():
		if d, done := s.nextSlice(last, now, n, w, k, r); done {
			return d, nil
		}
	default:
		if cur, ok = s.tree.Get(s.pv.setSlice(r.ID, r.Scale, n, k)); ok {
			s.cache.put(slot, cur)
		}
	}
	if ok && cur.summaryValid() {
		base, own := cur.base(), cur.own()
		oldest := k
		if base > 0 {
			oldest = k - cur.oldestBack()
		}
		if d, allowed := algo.SlicesFastAt(uint64(base+own), oldest, n, w, k, now, r); allowed {
			if r.Hits > 0 {
				cur.setOwn(own + r.Hits)
				cur.see(now)
				cur.setDenying(false)
			}
			return d, nil
		}
	}
	list, newest := s.scanSlices(r.ID, r.Scale, n, k)
	d := algo.SlicesCheck(list, now, r)
	var base, back int64
	for _, sl := range list {
		if sl.Num < k && sl.Hits > 0 {
			if base == 0 {
				back = k - sl.Num
			}
			base += sl.Hits
		}
	}
	switch {
	case ok:
		if d.Allowed && r.Hits > 0 {
			cur.setOwn(cur.own() + r.Hits)
		}
		cur.setSummary(base, back)
	case d.Allowed && r.Hits > 0:
		// A limit that holds slices has its scale: only a first slice can
		// pass the bound on scales.
		if newest == nil && s.overScales(r.ID, r.Scale) {
			return rl.Decision{}, ErrTooManyScales
		}
		p := newRecIn(s.makeRoom(now), r.ID, r.Scale, rl.Slices, algo.SlicesRecord(n, r.Hits, now, now))
		p.setSummary(base, back)
		s.insert(r.ID, p)
		cur = p
	}
	if r.Hits > 0 {
		if cur != nil {
			cur.setDenying(!d.Allowed)
			cur.see(now)
		}
		if !d.Allowed && newest != nil {
			// Denied, so nothing is written; but the limit is busy: its
			// newest slice counts as seen, and eviction (least recently
			// seen first) does not take a throttled id for an idle one.
			newest.setDenying(true)
			newest.see(now)
		}
	}
	return d, nil
}

// nextSlice decides the first check of slice k of a limit whose newest
// record, last, is of an older slice and holds a valid summary of its own
// window: the new window's older slices are that window less the slices
// that have left since, which a walk from the limit's first record finds
// (and deletes), so the first check of each slice reads those few records,
// not the window's. It reports done false, having changed nothing, when
// the check is denied (RetryAfterMS needs every slice) or the records do
// not add up to the summary: the caller then scans the window.
func (s *Store) nextSlice(last *rec, now, n, w, k int64, r rl.Request) (rl.Decision, bool) {
	lo := k - n + 1
	from := algo.Bucket(last.created, w) - n + 1 // the first slice last's summary counts
	leaving, oldest := int64(0), int64(0)
	found := false
	gone := s.goneBuf[:0]
	meta := last.keyMeta()
	start := s.pv.setSlice(r.ID, r.Scale, n, 0)
	start.created = math.MinInt64 // before every slice
	s.tree.Ascend(start, func(q *rec) bool {
		if q.keyMeta() != meta || q.slices() != n || q.id() != r.ID {
			return false
		}
		j := algo.Bucket(q.created, w)
		if j < lo {
			if j >= from {
				leaving += q.own()
			}
			gone = append(gone, q)
			return true
		}
		if q.own() > 0 {
			oldest, found = j, true
			return false
		}
		return true
	})
	s.goneBuf = gone[:0]
	base := last.base() + last.own() - leaving
	if base < 0 || base > 0 && (!found || oldest >= k) {
		clear(gone)
		return rl.Decision{}, false // the summary is stale: scan
	}
	d, allowed := algo.SlicesFastAt(uint64(base), oldest, n, w, k, now, r)
	if !allowed {
		clear(gone)
		return rl.Decision{}, false
	}
	// The slices gone and the new one are the limit's first and last
	// records, most often in one leaf: a path hint spares the searches.
	var hint btree.PathHint
	for _, q := range gone {
		s.tree.DeleteHint(q, &hint)
		s.remove(q)
	}
	clear(gone)
	if r.Hits > 0 {
		p := newRecIn(s.makeRoom(now), r.ID, r.Scale, rl.Slices, algo.SlicesRecord(n, r.Hits, now, now))
		p.setSummary(base, k-oldest)
		s.tree.SetHint(p, &hint)
		s.cache.grow(s.tree.Len())
		s.cache.put(s.cache.slot(r.ID, p.cacheMeta()), p)
	}
	return d, true
}

// scanSlices reads the slices of (id, scale, n) up to slice k, oldest first,
// and deletes those that have left the window ending at k. It returns them
// in the store's scratch (valid until the next scan), and the newest record
// read.
func (s *Store) scanSlices(id string, scale, n, k int64) ([]algo.Slice, *rec) {
	lo := k - n + 1
	list, gone := s.sliceBuf[:0], s.goneBuf[:0]
	var newest *rec
	meta := makeMeta(len(id), scale, rl.Slices)
	start := s.pv.setSlice(id, scale, n, 0)
	start.created = math.MinInt64 // before every slice
	s.tree.Ascend(start, func(p *rec) bool {
		if p.keyMeta() != meta || p.slices() != n || p.id() != id {
			return false
		}
		num := p.bucket()
		switch {
		case num < lo:
			gone = append(gone, p)
		case num <= k:
			list = append(list, algo.Slice{Num: num, Hits: p.own()})
			newest = p
		default:
			return false
		}
		return true
	})
	for _, p := range gone {
		s.tree.Delete(p)
		s.remove(p)
	}
	clear(gone)
	s.sliceBuf, s.goneBuf = list, gone[:0]
	return list, newest
}

// invalidateSlices clears the summaries of (id, scale, n)'s slices: a
// record put among them (a snapshot's) changes what they summarise.
func (s *Store) invalidateSlices(id string, scale, n int64) {
	var pv pivot
	start := pv.setSlice(id, scale, n, 0)
	start.created = math.MinInt64
	meta := makeMeta(len(id), scale, rl.Slices)
	s.tree.Ascend(start, func(p *rec) bool {
		if p.keyMeta() != meta || p.slices() != n || p.id() != id {
			return false
		}
		p.clearSummary()
		return true
	})
}

// forgetSlice is remove's part for a Slices record p leaving the tree: the
// summary of its limit's newest record (the one the cache holds) may
// count p's hits, so it is no longer trusted.
func (s *Store) forgetSlice(p *rec) {
	q := s.cache.at(s.cache.slot(p.id(), p.cacheMeta()))
	if q != nil && q != p && q.keyMeta() == p.keyMeta() && q.slices() == p.slices() && q.id() == p.id() {
		q.clearSummary()
	}
}
