package actor

import (
	"sync"
	"sync/atomic"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/ms"
)

// The denied fast path: a fixed-window check the actor denied because its
// bucket's count passed the limit stays denied, for any request of the same
// id and scale with at least one hit and no higher limit, until the window
// ends: within a window the count only grows. The actor records such
// denials (deniedKey → *denial) in a map that callers read without a
// message; a later matching check is answered by its caller, at the time of
// its own clock reading, only while that time is before the window's end,
// and never allowed. Fixed counts denied hits, so the caller adds its hits
// to the denial's total, and the actor adds what callers counted to the
// record (merge) before it decides or reads anything else: a message sent
// after a fast denial is decided on a count that includes it.

// maxDenials bounds an actor's recorded denials (about 100 bytes each
// beside the id, which the request already holds): a flood of fresh ids
// denied at once (limit 0) with long windows must not grow them past the
// store's own bound.
const maxDenials = 1 << 14

type deniedKey struct {
	id    string
	scale int64
}

// denial is a fixed-window bucket that denies until end.
type denial struct {
	key    deniedKey
	bucket int64        // the window's number
	end    int64        // Unix ms at which the window ends
	limit  atomic.Int64 // denied at this limit, so at every lower one
	// total is the bucket's count: the actor's, plus every hit callers
	// counted in it. merged is how much of total the record holds (the
	// actor's own).
	total  atomic.Int64
	merged int64
	// dirty is set by the caller that finds it clear after counting, and
	// pushes the denial onto Actor.dirty; the actor clears it and merges.
	dirty atomic.Bool
	next  *denial // in the dirty stack
}

// denials is an actor's set of denials: written by the actor only, read by
// every caller.
type denials struct {
	m     sync.Map // deniedKey → *denial
	n     int      // entries, as the actor knows them
	dirty atomic.Pointer[denial]
	// any is n > 0, for callers: with no denial recorded (every check of
	// an unthrottled workload) a check skips the map's lookup, which
	// hashes its key. A caller that reads false just as a denial is added
	// sends its check to the actor, which decides it the same.
	any atomic.Bool
}

// add changes the count of entries by delta.
func (ds *denials) add(delta int) {
	ds.n += delta
	if (ds.n > 0) != ds.any.Load() {
		ds.any.Store(ds.n > 0)
	}
}

// fastDeny answers r from a recorded denial if one covers it. It reports
// false when the actor must decide r.
func (a *Actor) fastDeny(r ms.Request) (ms.Decision, bool) {
	if r.Algo != rl.Fixed || r.Hits <= 0 || !a.denied.any.Load() {
		return ms.Decision{}, false
	}
	v, ok := a.denied.m.Load(deniedKey{r.ID, r.Scale})
	if !ok {
		return ms.Decision{}, false
	}
	e := v.(*denial)
	if r.Limit > e.limit.Load() {
		return ms.Decision{}, false
	}
	now := a.cfg.Clock()
	if p := a.nowPub.Load(); now < p {
		now = p // the actor's time never goes back; nor does this
	}
	if now >= e.end {
		return ms.Decision{}, false
	}
	count := e.total.Add(r.Hits)
	if !e.dirty.Load() && e.dirty.CompareAndSwap(false, true) {
		for {
			h := a.denied.dirty.Load()
			e.next = h
			if a.denied.dirty.CompareAndSwap(h, e) {
				break
			}
		}
	}
	// What algo.Fixed decides for a count above the limit.
	d := ms.Decision{Count: count, Limit: r.Limit, ResetMS: e.end - now, RetryAfterMS: e.end - now, Now: now}
	if count < r.Limit {
		d.Remaining = r.Limit - count
	}
	return d, true
}

// mergeDenied adds the hits callers counted on denials to their records.
// It runs on the actor's goroutine before any decision or read of the store.
func (a *Actor) mergeDenied() {
	if a.denied.dirty.Load() == nil {
		return
	}
	for e := a.denied.dirty.Swap(nil); e != nil; {
		next := e.next
		e.dirty.Store(false) // before reading total: a later count sets it again
		if t := e.total.Load(); t > e.merged {
			if !a.store.AddHits(e.key.id, e.key.scale, rl.Fixed, e.bucket, t-e.merged, a.now) {
				// The record was evicted at the store's bound: the denial
				// goes with it, and the actor decides again.
				if a.denied.m.CompareAndDelete(e.key, e) {
					a.denied.add(-1)
				}
			}
			e.merged = t
		}
		e = next
	}
}

// noteDecision keeps the denials in step with a decision the actor made.
func (a *Actor) noteDecision(r ms.Request, d ms.Decision) {
	if r.Algo != rl.Fixed || r.Hits <= 0 {
		return
	}
	k := deniedKey{r.ID, r.Scale}
	if d.Allowed || d.Count <= r.Limit {
		// Allowed at a higher limit than a recorded denial, or denied for
		// asking more than the limit: the denial's total would miss these
		// hits. Forget it (hits its callers counted are still merged: the
		// dirty list holds the denial, not the map).
		if a.denied.n > 0 {
			if _, ok := a.denied.m.LoadAndDelete(k); ok {
				a.denied.add(-1)
			}
		}
		return
	}
	end := d.ResetAt()
	if v, ok := a.denied.m.Load(k); ok {
		if e := v.(*denial); e.end == end {
			// The same window, denied through the actor (a higher limit,
			// or a caller that came before the denial was recorded): the
			// record now holds these hits too.
			e.total.Add(r.Hits)
			e.merged += r.Hits
			if r.Limit > e.limit.Load() {
				e.limit.Store(r.Limit)
			}
			return
		}
	}
	if a.denied.n >= maxDenials {
		return // the fast path is full: the actor decides
	}
	e := &denial{key: k, bucket: algo.Bucket(d.Now, r.Scale), end: end, merged: d.Count}
	e.limit.Store(r.Limit)
	e.total.Store(d.Count)
	if _, loaded := a.denied.m.Swap(k, e); !loaded {
		a.denied.add(1)
	}
}

// forgetDenied drops every denial, merging what callers counted first.
func (a *Actor) forgetDenied() {
	a.mergeDenied()
	if a.denied.n == 0 {
		return
	}
	a.denied.m.Clear()
	a.denied.add(-a.denied.n)
}

// expireDenied drops the denials whose window has ended.
func (a *Actor) expireDenied() {
	if a.denied.n == 0 {
		return
	}
	a.mergeDenied()
	a.denied.m.Range(func(k, v any) bool {
		if v.(*denial).end <= a.now {
			a.denied.m.Delete(k)
			a.denied.add(-1)
		}
		return true
	})
}
