package redisbackend

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The local cache of denials. When Redis denies a request, the backend keeps
// the state Redis decided it from (a fixed window's count, a sliding window's
// two counts, a token bucket's or a leaky bucket's TAT, the sliding window
// counters' slices); a later request of the same record (id, algorithm,
// scale, slice count) is decided here, from that state, with the same pure
// function (package algo), and answered without Redis when that denies it.
// A flood on one denied key then costs Redis one check per denial, per
// sidecar, instead of one per request.
//
// It never denies what Redis would allow, nor for longer: with no other
// traffic the state is what Redis holds, so the answer is Redis's; other
// traffic only adds to what Redis holds (more hits counted, in the current
// slice or window; a later TAT), and every algorithm allows less, never
// more, for more counted. The time is
// Redis's: a state read at Redis's time t is judged at the client's now
// plus (t - the client's time when the check was sent), which is never
// earlier than Redis's own time then. A state is dropped when it allows a
// request (which then goes to Redis), when Redis answers for the record
// again, and when its window has passed.
//
// The exceptions are documented (docs/redis.md): Reset on another sidecar,
// which this cache does not see (a Reset here forgets the id), and a fixed
// window's count, which on Redis lacks the denied hits counted here.
//
// The log algorithm decides in its script, from entries the client never
// sees: its denial is kept as the decision itself, for the same limit and
// hits, until the earlier of its retry time and its reset (when its oldest
// entry leaves, changing the count).

// denyShards spreads the cache's lock.
const denyShards = 64

// denyCache is safe for concurrent use; a nil *denyCache caches nothing.
type denyCache struct {
	seed     maphash.Seed
	perShard int
	// ids counts the ids with a state: while it is 0, which is most of the
	// time, a check takes no lock.
	ids    atomic.Int64
	shards [denyShards]denyShard
}

type denyShard struct {
	mu sync.Mutex
	m  map[string][]denial // by id
}

// state is what the cache keeps of a record, as Redis showed it.
type state struct {
	w         int64       // fixed, sliding: the window cur counts in
	cur, prev int64       // fixed: the count; sliding: the two windows' counts
	pending   int64       // fixed: hits counted here, not yet on Redis
	rec       algo.Record // token, leaky: the TAT
	ok        bool        // token, leaky: a record exists
	// slices: the window's slices holding hits, oldest first, packed
	// (packSlices) from w, the newest.
	slices []uint64
	// log: the decision of (limit, hits), valid before end (Redis's time).
	limit, hits int64
	d           millis.Decision
	end         int64
}

// denial is the state of one record of an id that Redis denied a request
// of.
type denial struct {
	algo       rl.Algo
	scale, sub int64 // sub: the slice count of a slices record, else 0
	offset     int64 // Redis's time minus the client's when the check was sent
	st         state
}

func newDenyCache(size int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), perShard: max(1, size/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]denial)
	}
	return c
}

func (c *denyCache) shard(id string) *denyShard {
	return &c.shards[maphash.String(c.seed, id)%denyShards]
}

// answer decides from the cache the requests of rs it can deny at now (the
// client's clock), into ds, and returns the indexes of the others, with the
// hits each must add on Redis besides its own: a fixed window's hits counted
// here, which Redis learns with the window's next check that goes to it.
func (c *denyCache) answer(rs []millis.Request, now int64, ds []millis.Decision) (todo []int, pending []int64) {
	todo = make([]int, 0, len(rs))
	for i, r := range rs {
		if c == nil || c.ids.Load() == 0 {
			todo = append(todo, i)
			continue
		}
		ok, p := c.lookup(r, now, &ds[i])
		if !ok {
			todo = append(todo, i)
			if p > 0 {
				if pending == nil {
					pending = make([]int64, len(rs))
				}
				pending[i] = p
			}
		}
	}
	return todo, pending
}

func (c *denyCache) lookup(r millis.Request, now int64, out *millis.Decision) (answered bool, pending int64) {
	s := c.shard(r.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.m[r.ID]
	sub := subOf(r)
	for i := range es {
		e := &es[i]
		if e.algo != r.Algo || e.scale != r.Scale || e.sub != sub {
			continue
		}
		d, denied, gone := e.decide(r, now)
		switch {
		case gone:
			c.drop(s, r.ID, i)
			return false, 0
		case !denied && r.Hits == 0 && e.st.pending == 0:
			return false, 0 // a peek, which Redis answers; the state stands
		case !denied:
			// Redis decides, and its answer replaces this state.
			pending = e.st.pending
			c.drop(s, r.ID, i)
			return false, pending
		}
		if r.Algo == rl.Fixed {
			// Every hit counts in a fixed window: here, and on Redis
			// with the window's next check that goes there.
			e.st.cur = d.Count
			e.st.pending += r.Hits
		}
		*out = d
		return true, 0
	}
	return false, 0
}

// decide decides r at now (the client's clock) from e's state: denied when
// it denies, gone when the state no longer says anything about r's record.
func (e *denial) decide(r millis.Request, now int64) (d millis.Decision, denied, gone bool) {
	t := now + e.offset // never earlier than Redis's time now
	st := &e.st
	switch r.Algo {
	case rl.Fixed:
		if algo.Bucket(now, r.Scale) != st.w {
			return d, false, true
		}
		d, _, _ = algo.Fixed(algo.Record{Count: st.cur}, true, now, r)
	case rl.Sliding:
		var cur, prev int64
		switch algo.Bucket(t, r.Scale) - st.w {
		case 0:
			cur, prev = st.cur, st.prev
		case 1:
			prev = st.cur
		default:
			return d, false, true
		}
		d, _, _ = algo.Sliding(algo.Record{Count: cur}, cur > 0, algo.Record{Count: prev}, prev > 0, t, r)
	case rl.Token:
		d, _, _ = algo.Token(st.rec, st.ok, t, r)
	case rl.Leaky:
		d, _, _ = algo.Leaky(st.rec, st.ok, t, r)
	case rl.Slices:
		// Gone once the newest slice held has left the window: the
		// state is then a fresh record's, which Redis answers.
		n, _, k := algo.SliceOf(t, r)
		if len(st.slices) == 0 || st.w <= k-n {
			return d, false, true
		}
		var buf [maxCachedSlices]algo.Slice
		d = algo.SlicesCheck(unpackSlices(buf[:0], st.w, st.slices), t, r)
	default:
		if t >= st.end {
			return d, false, true
		}
		if r.Limit != st.limit || r.Hits != st.hits {
			return d, false, false
		}
		d = st.d
		d.ResetMS -= t - d.Now
		d.RetryAfterMS -= t - d.Now
		d.Now = t
	}
	return d, !d.Allowed, false
}

// maxCachedSlices bounds the slices a cached denial of the sliding window
// counters keeps (8 bytes each), so that the cache's memory stays bounded
// by its ids: a denial whose window holds more slices with hits is not
// cached, and Redis answers the record's later requests.
const maxCachedSlices = 64

// packSlices packs list, oldest first, for the cache of denials: each
// slice as its distance back from newest (below 2^10: a window has at most
// MaxSlices) over its hits (below 2^32: a slice holds at most a limit). It
// returns nil when list is empty or longer than maxCachedSlices.
func packSlices(list []algo.Slice) (newest int64, packed []uint64) {
	if len(list) == 0 || len(list) > maxCachedSlices {
		return 0, nil
	}
	newest = list[len(list)-1].Num
	packed = make([]uint64, len(list))
	for i, x := range list {
		packed[i] = uint64(newest-x.Num)<<32 | uint64(uint32(x.Hits))
	}
	return newest, packed
}

// unpackSlices appends to buf the slices packSlices packed from newest.
func unpackSlices(buf []algo.Slice, newest int64, packed []uint64) []algo.Slice {
	for _, p := range packed {
		buf = append(buf, algo.Slice{Num: newest - int64(p>>32), Hits: int64(uint32(p))})
	}
	return buf
}

// drop removes the i-th state of id from its shard s, locked.
func (c *denyCache) drop(s *denyShard, id string, i int) {
	es := s.m[id]
	es = append(es[:i], es[i+1:]...)
	if len(es) == 0 {
		delete(s.m, id)
		c.ids.Add(-1)
		return
	}
	s.m[id] = es
}

// remember notes Redis's answer d to r, from state st, sent at now (the
// client's clock): a denial's state is kept, and any other answer drops the
// record's state, which the check may have changed.
func (c *denyCache) remember(r millis.Request, d millis.Decision, st state, now int64) {
	if c == nil || (d.Allowed && (r.Hits == 0 || c.ids.Load() == 0)) {
		return
	}
	s := c.shard(r.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.m[r.ID]
	sub := subOf(r)
	at := -1
	for i := range es {
		if es[i].algo == r.Algo && es[i].scale == r.Scale && es[i].sub == sub {
			at = i
			break
		}
	}
	if d.Allowed || (r.Algo == rl.Slices && st.slices == nil) {
		// An allowed check may have changed the record; a slices denial
		// too long to keep leaves it to Redis.
		if at >= 0 {
			c.drop(s, r.ID, at)
		}
		return
	}
	e := denial{algo: r.Algo, scale: r.Scale, sub: sub, offset: d.Now - now, st: st}
	if r.Algo == rl.Log {
		e.st.limit, e.st.hits, e.st.d = r.Limit, r.Hits, d
		e.st.end = d.Now + min(d.RetryAfterMS, max(d.ResetMS, 1))
	}
	if at >= 0 {
		es[at] = e
		return
	}
	if len(es) == 0 {
		if len(s.m) >= c.perShard {
			s.evict()
			c.ids.Add(-1)
		}
		c.ids.Add(1)
	}
	s.m[r.ID] = append(es, e)
}

// evict makes room in a full shard: it drops one id's states, at random (a
// cached denial only saves Redis work; losing one costs one check).
func (s *denyShard) evict() {
	for id := range s.m {
		delete(s.m, id) // map order is random
		return
	}
}

// forget drops the states of id (Reset).
func (c *denyCache) forget(id string) {
	if c == nil {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	if _, ok := s.m[id]; ok {
		delete(s.m, id)
		c.ids.Add(-1)
	}
	s.mu.Unlock()
}
