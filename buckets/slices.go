package buckets

import (
	"cmp"
	"math"
	"slices"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The sliding window counters keep one record per slice, in a ring: the
// key is (id, scale, Slices, slice count N, slot), the slot of slice j being
// j mod N, so the slices of one limit are neighbours in the tree (the whole
// window is one range scan of at most N records, in the ring's order) and a
// limit never holds more than N records. A slice takes the record of the
// slice N before it, which has just left the window, in place: starting a
// slice moves no record in the tree. A record whose slice has left the
// window counts nothing until its slot is taken again, or the sweeper
// deletes it.
//
// A check does not scan on the way it takes most often, though: the record
// of the current slice also holds the window's other slices' hits and how
// far back the oldest of them is (its summary), and the slices before the
// current one never change again (only the current slice counts, and the
// store's time never runs back). A check of a slice that has its record is
// then one cache lookup, as a fixed window's. The first check of a new
// slice derives the new summary from the previous slice's (the cache holds
// the limit's newest record), reading only the slots of the slices that
// have left and the next one; a denied check (whose RetryAfterMS needs each
// slice) scans the window.
//
// The packing of a Slices record (see rec): count holds the slice's own hits
// in its low 32 bits and the summary's hits of the older slices in its high
// 32; modified holds, from its low bits up:
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

// floorMod returns a mod n in [0, n).
func floorMod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}

// sliceNum is the number of a Slices record's slice, and slot its place in
// its limit's ring.
func (p *rec) sliceNum() int64 {
	return algo.Bucket(p.created, algo.SliceWidth(p.scale(), max(p.slices(), 1)))
}

func (p *rec) slot() int64 { return floorMod(p.sliceNum(), max(p.slices(), 1)) }

// inGroup reports whether p is a record of the limit (meta, n, id).
func (p *rec) inGroup(meta uint64, n int64, id string) bool {
	return p.keyMeta() == meta && p.slices() == n && p.id() == id
}

// checkSlices decides a request with algo Slices (see the comment at the
// top of this file).
func (s *Store) checkSlices(now int64, r millis.Request) (millis.Decision, error) {
	n, w, k := algo.SliceOf(now, r)
	meta := makeMeta(len(r.ID), r.Scale, rl.Slices)
	slot := s.cache.slot(r.ID, slicesCacheMeta(r.ID, r.Scale, n))
	// last is the limit's record the cache holds: its newest, since every
	// slice's record goes there when it starts (and nothing but a check
	// starts one).
	last := s.cache.at(slot)
	if last != nil && !last.inGroup(meta, n, r.ID) {
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
	switch {
	case last != nil && last.created >= k*w:
		cur = last
	case last != nil && last.summaryValid():
		if d, done := s.nextSlice(last, now, n, w, k, r); done {
			return d, nil
		}
	default:
		if p, found := s.tree.Get(s.pv.setSlice(r.ID, r.Scale, n, floorMod(k, n))); found && p.created >= k*w {
			cur = p // in slice k: its slot may hold an older slice's
			s.cache.put(slot, p)
		}
	}
	if cur != nil && cur.summaryValid() {
		base, own := cur.base(), cur.own()
		oldest := k
		if base > 0 {
			oldest = k - cur.oldestBack()
		}
		if d, allowed := algo.SlicesFast(uint64(base+own), oldest, n, w, k, now, r); allowed {
			if r.Hits > 0 {
				cur.setOwn(own + r.Hits)
				cur.see(now)
				cur.setDenying(false)
			}
			return d, nil
		}
	}
	list, newest, atK := s.scanSlices(r.ID, r.Scale, n, w, k)
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
	case cur != nil:
		if d.Allowed && r.Hits > 0 {
			cur.setOwn(cur.own() + r.Hits)
		}
		cur.setSummary(base, back)
	case d.Allowed && r.Hits > 0:
		p, err := s.startSlice(atK, newest == nil, slot, now, n, r)
		if err != nil {
			return millis.Decision{}, err
		}
		p.setSummary(base, back)
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

// startSlice makes the record of the current slice, holding r.Hits: in
// atK, the record of its slot (whose slice has left the window), when
// there is one, else a new record (refused past MaxScalesPerID when first
// is set: the limit holds no record in its window, so perhaps none at
// all). The record goes into the cache's slot.
func (s *Store) startSlice(atK *rec, first bool, slot uint64, now, n int64, r millis.Request) (*rec, error) {
	rec := algo.SlicesRecord(n, r.Hits, now, now)
	if atK != nil {
		atK.set(rec) // the same slot: its place in the tree holds
		atK.setDenying(false)
		s.cache.put(slot, atK)
		return atK, nil
	}
	if first && s.overScales(r.ID, r.Scale, n) {
		return nil, ErrTooManyScales
	}
	p := newRec(s.makeRoom(now, len(r.ID)), r.ID, r.Scale, rl.Slices, rec)
	s.insert(r.ID, p)
	return p, nil
}

// nextSlice decides the first check of slice k of a limit whose newest
// record, last, is of an older slice k' and holds a valid summary of its
// window, k'-N+1 .. k': the new window's older slices are that window less
// the slices k'-N+1 .. k-N, which have left since. They sit in the ring's
// slots just before the new window's oldest, so a walk from the first of
// them reads those few records and stops at the first slice of the new
// window holding hits; it passes slot k's record, which the new slice
// takes. It reports done false, having changed nothing, when the check is
// denied (RetryAfterMS needs every slice) or the records do not add up to
// the summary: the caller then scans the window.
func (s *Store) nextSlice(last *rec, now, n, w, k int64, r millis.Request) (millis.Decision, bool) {
	kp := algo.Bucket(last.created, w)
	from, lo := kp-n+1, k-n+1 // the first slice last's summary counts; the new window's
	base, oldest := int64(0), int64(0)
	var atK *rec
	meta := last.keyMeta()
	if k-kp >= n {
		// All of last's window has left: only slot k's record matters.
		if p, found := s.tree.Get(s.pv.setSlice(r.ID, r.Scale, n, floorMod(k, n))); found {
			atK = p
		}
	} else {
		leaving := int64(0)
		found, seen := false, int64(0)
		slotK := floorMod(k, n)
		visit := func(q *rec) bool {
			if !q.inGroup(meta, n, r.ID) {
				return false
			}
			j := algo.Bucket(q.created, w)
			if floorMod(j, n) == slotK {
				atK = q
			}
			switch {
			case j >= from && j < lo:
				leaving += q.own()
			case j >= lo && j <= kp && q.own() > 0:
				oldest, found = j, true
				return false
			}
			seen++
			return seen < n
		}
		// The ring from the slot of slice from on, round to the slot before
		// it.
		first := floorMod(from, n)
		more := true
		s.tree.Ascend(s.pv.setSlice(r.ID, r.Scale, n, first), func(q *rec) bool {
			more = visit(q)
			return more
		})
		if more && !found && first > 0 {
			s.tree.Ascend(s.pv.setSlice(r.ID, r.Scale, n, 0), func(q *rec) bool {
				return q.inGroup(meta, n, r.ID) && q.slot() < first && visit(q)
			})
		}
		base = last.base() + last.own() - leaving
		if base < 0 || base > 0 && !found {
			return millis.Decision{}, false // the summary is stale: scan
		}
	}
	d, allowed := algo.SlicesFast(uint64(base), oldest, n, w, k, now, r)
	if !allowed {
		return millis.Decision{}, false
	}
	if r.Hits > 0 {
		slot := s.cache.slot(r.ID, slicesCacheMeta(r.ID, r.Scale, n))
		p, err := s.startSlice(atK, false, slot, now, n, r)
		if err != nil {
			return millis.Decision{}, false
		}
		back := int64(0)
		if base > 0 {
			back = k - oldest
		}
		p.setSummary(base, back)
	}
	return d, true
}

// scanSlices reads the slices of (id, scale, n) in the window ending at
// slice k, oldest first, into the store's scratch (valid until the next
// scan). It also returns the newest record of the window, and the record of
// slot k (in slice k, or in a slice that has left the window), nil when
// absent.
func (s *Store) scanSlices(id string, scale, n, w, k int64) (list []algo.Slice, newest, atK *rec) {
	lo := k - n + 1
	s.sliceScans++
	list = s.sliceBuf[:0]
	meta := makeMeta(len(id), scale, rl.Slices)
	slotK := floorMod(k, n)
	newestNum := int64(math.MinInt64)
	s.tree.Ascend(s.pv.setSlice(id, scale, n, 0), func(p *rec) bool {
		if !p.inGroup(meta, n, id) {
			return false
		}
		j := algo.Bucket(p.created, w)
		if floorMod(j, n) == slotK {
			atK = p
		}
		if j >= lo && j <= k {
			list = append(list, algo.Slice{Num: j, Hits: p.own()})
			if j > newestNum {
				newest, newestNum = p, j
			}
		}
		return true
	})
	// The ring's order is the slices' turned round: put it in order.
	slices.SortFunc(list, func(a, b algo.Slice) int { return cmp.Compare(a.Num, b.Num) })
	s.sliceBuf = list
	return list, newest, atK
}

// invalidateSlices clears the summaries of (id, scale, n)'s slices: a
// record put among them (a snapshot's) changes what they summarise.
func (s *Store) invalidateSlices(id string, scale, n int64) {
	var pv pivot
	meta := makeMeta(len(id), scale, rl.Slices)
	s.tree.Ascend(pv.setSlice(id, scale, n, 0), func(p *rec) bool {
		if !p.inGroup(meta, n, id) {
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
	if q != nil && q != p && q.inGroup(p.keyMeta(), p.slices(), p.id()) {
		q.clearSummary()
	}
}
