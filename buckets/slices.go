package buckets

import (
	"math"

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

// getSlice returns the record of slice num of (id, scale, n), from the
// cache when it holds it.
func (s *Store) getSlice(id string, scale, n, num int64) (*rec, bool) {
	cm := slicesCacheMeta(id, scale, n)
	meta := makeMeta(len(id), scale, rl.Slices)
	slot := s.cache.slot(id, cm)
	if p := s.cache.at(slot); p != nil && p.keyMeta() == meta && p.slices() == n && p.bucket() == num && p.id() == id {
		return p, true
	}
	p, ok := s.tree.Get(s.pv.setSlice(id, scale, n, num))
	if ok {
		s.cache.put(slot, p)
	}
	return p, ok
}

// checkSlices decides a request with algo Slices (see the comment at the
// top of this file).
func (s *Store) checkSlices(now int64, r rl.Request) (rl.Decision, error) {
	n, _, k := algo.SliceOf(now, r)
	cur, ok := s.getSlice(r.ID, r.Scale, n, k)
	if ok && cur.summaryValid() {
		base, own := cur.base(), cur.own()
		oldest := k
		if base > 0 {
			oldest = k - cur.oldestBack()
		}
		if d, allowed := algo.SlicesFast(uint64(base+own), oldest, now, r); allowed {
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
		if s.overScales(r.ID, r.Scale) {
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
