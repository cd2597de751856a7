package main

import (
	"math/big"
	"runtime"
	"strconv"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// logName is the sliding window log's row: the algorithm that should agree
// with the judge's own exact log on every decision.
var logName = rl.Log.String()

// variant is one row of the tables: an algorithm, and for the sliding
// window counters a slice count.
type variant struct {
	name   string
	algo   rl.Algo
	slices int64
}

// variants are the limiters replayed: every algorithm that decides by a
// count of the window (the leaky bucket is a queue that delays, not a
// window's count: an exact log cannot judge it), the sliding window
// counters at 10 and 60 slices.
var variants = []variant{
	{name: "fixed", algo: rl.Fixed},
	{name: "sliding", algo: rl.Sliding},
	{name: "token", algo: rl.Token},
	{name: "log", algo: rl.Log},
	{name: "slices 10", algo: rl.Slices, slices: 10},
	{name: "slices 60", algo: rl.Slices, slices: 60},
}

// request is v's check of one hit for tr.
func (v variant) request(tr *trace) rl.Request {
	return rl.Request{Scale: millis.Duration(tr.scale), Limit: tr.limit, Hits: 1, Algo: v.algo, Slices: v.slices}
}

// result is what one algorithm did on one trace.
type result struct {
	name      string
	requests  int64
	allowed   int64
	falseAllw int64 // allowed, though the exact log of its own allowed requests had no room
	falseDeny int64 // denied, though that log had room
	// maxWindow is the most requests of one source allowed in any window
	// (t-scale, t].
	maxWindow int64
	// bound is the largest (n - (t2-t1)/scale*limit) / limit over every
	// source and every interval [t1, t2] between two of its allowed requests,
	// n of them: GCRA promises n <= limit + (t2-t1)/scale*limit, so at most 1.
	bound float64
	// mismatches counts Token's decisions that differ from GCRA computed
	// in exact rationals (math/big); -1 when not checked.
	mismatches int64
	// overRequests and overWrong count the requests, and the wrong
	// decisions, of the sources that offer more than the limit in some
	// window (see trace.over).
	overRequests, overWrong int64
	// times are the allowed requests' times, kept for the plot.
	times []int64
	// nsPerCheck is the store's time per check on this trace, and
	// bytesPerID the heap its records held at the end per source with a
	// live record; 0 for rows that are not through the store.
	nsPerCheck, bytesPerID float64
}

func (r result) wrong() int64 { return r.falseAllw + r.falseDeny }

// idLog is one source's allowed requests in the last scale ms.
type idLog struct {
	times []int64
	head  int
	// cum and low track GCRA's bound: cum is the count of allowed requests,
	// low the least of cum*scale - t*limit taken just before each.
	cum, low int64
}

// judge holds the exact sliding log of every source and tallies a run.
type judge struct {
	scale, limit int64
	start        int64
	over         []bool
	logs         []idLog
	maxSlack     int64 // the largest cum*scale - t*limit - low
	res          result
}

func newJudge(tr *trace, name string, keepTimes bool) *judge {
	j := &judge{scale: tr.scale, limit: tr.limit, start: tr.start, over: tr.over, logs: make([]idLog, tr.ids)}
	j.res = result{name: name, mismatches: -1}
	if keepTimes {
		j.res.times = []int64{}
	}
	return j
}

// room reports whether the exact log of id's allowed requests leaves room
// for one more at now: fewer than limit of them in (now-scale, now].
func (j *judge) room(now int64, id int32) (bool, int64) {
	l := &j.logs[id]
	for l.head < len(l.times) && l.times[l.head] <= now-j.scale {
		l.head++
	}
	if l.head > 32 && 2*l.head > len(l.times) {
		l.times = l.times[:copy(l.times, l.times[l.head:])]
		l.head = 0
	}
	n := int64(len(l.times) - l.head)
	return n+1 <= j.limit, n
}

// record tallies the algorithm's decision on a request of id at now.
func (j *judge) record(now int64, id int32, allowed bool) {
	ok, n := j.room(now, id)
	j.res.requests++
	switch {
	case allowed && !ok:
		j.res.falseAllw++
	case !allowed && ok:
		j.res.falseDeny++
	}
	if j.over[id] {
		j.res.overRequests++
		if allowed != ok {
			j.res.overWrong++
		}
	}
	if !allowed {
		return
	}
	j.res.allowed++
	l := &j.logs[id]
	l.times = append(l.times, now)
	j.res.maxWindow = max(j.res.maxWindow, n+1)
	// GCRA's bound over [t_i, now]: (cum_now - cum_before_i)*S <= L*S + (now-t_i)*L,
	// i.e. cum_now*S - now*L - min_i(cum_before_i*S - t_i*L) <= L*S.
	t := now - j.start
	v := l.cum*j.scale - t*j.limit
	if l.cum == 0 || v < l.low {
		l.low = v
	}
	l.cum++
	j.maxSlack = max(j.maxSlack, l.cum*j.scale-t*j.limit-l.low)
	if j.res.times != nil {
		j.res.times = append(j.res.times, now)
	}
}

func (j *judge) result() result {
	r := j.res
	if j.limit > 0 {
		r.bound = float64(j.maxSlack) / float64(j.limit*j.scale)
	}
	return r
}

// gcraModel is GCRA in exact rationals, the check on Token's exactness.
type gcraModel struct {
	tat      []*big.Rat
	interval *big.Rat
	scale    *big.Rat
	tmp      big.Rat
}

func newGCRAModel(tr *trace) *gcraModel {
	return &gcraModel{
		tat:      make([]*big.Rat, tr.ids),
		interval: big.NewRat(tr.scale, tr.limit),
		scale:    new(big.Rat).SetInt64(tr.scale),
	}
}

// allow decides one hit of id at now: allowed iff max(TAT, now) + T - now <= scale.
func (g *gcraModel) allow(now int64, id int32) bool {
	n := new(big.Rat).SetInt64(now)
	base := n
	if t := g.tat[id]; t != nil && t.Cmp(n) > 0 {
		base = t
	}
	next := new(big.Rat).Add(base, g.interval)
	if g.tmp.Sub(next, n).Cmp(g.scale) > 0 {
		return false
	}
	g.tat[id] = next
	return true
}

// replay runs tr against every algorithm and the reference log, calling
// tick after each request.
func replay(tr *trace, keepTimes bool, tick func()) []result {
	return replayAll(tr, keepTimes, true, tick)
}

// replayAll is replay, measuring each algorithm's cost (a second pass
// through a fresh store) when withCost is set.
func replayAll(tr *trace, keepTimes, withCost bool, tick func()) []result {
	names := make([]string, tr.ids)
	for i := range names {
		names[i] = "src-" + strconv.Itoa(i)
	}
	var out []result
	for _, v := range variants {
		j := newJudge(tr, v.name, keepTimes)
		st := newStore(false)
		var model *gcraModel
		if v.algo == rl.Token {
			model = newGCRAModel(tr)
			j.res.mismatches = 0
		}
		req := v.request(tr)
		for i, ev := range tr.events {
			req.ID = names[ev.id]
			d, err := st.Check(ev.at, req)
			if err != nil {
				panic("rlaccuracy: " + err.Error()) // the traces make valid requests only
			}
			if model != nil && model.allow(ev.at, ev.id) != d.Allowed {
				j.res.mismatches++
			}
			j.record(ev.at, ev.id, d.Allowed)
			if i%4096 == 0 {
				// Sweeping stale records never changes a decision; it keeps
				// the tree to the records still in use.
				st.Sweep(ev.at, 8192)
			}
			tick()
		}
		r := j.result()
		if withCost {
			r.nsPerCheck, r.bytesPerID = cost(tr, names, v)
		}
		out = append(out, r)
	}
	return append(out, estimate(tr, tick), belowLimit(tr, tick), spread(tr, tick))
}

// cost replays tr through a fresh store with variant v alone, and returns
// the time per check and the heap bytes the store holds at the end (after a
// sweep) per source with a live record.
func cost(tr *trace, names []string, v variant) (nsPerCheck, bytesPerID float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st := newStore(true) // the cache's fixed size would blur the bytes per id
	req := v.request(tr)
	start := time.Now()
	for i, ev := range tr.events {
		req.ID = names[ev.id]
		st.Check(ev.at, req)
		if i%4096 == 0 {
			st.Sweep(ev.at, 8192)
		}
	}
	elapsed := time.Since(start)
	if len(tr.events) > 0 {
		st.Sweep(tr.events[len(tr.events)-1].at, 0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	ids := 0
	last := ""
	st.s.Scan(func(id string, _ int64, _ rl.Algo, _ algo.Record) bool {
		if id != last {
			ids++
			last = id
		}
		return true
	})
	runtime.KeepAlive(st)
	nsPerCheck = float64(elapsed.Nanoseconds()) / float64(max(1, len(tr.events)))
	if ids > 0 && after.HeapAlloc > before.HeapAlloc {
		bytesPerID = float64(after.HeapAlloc-before.HeapAlloc) / float64(ids)
	}
	return nsPerCheck, bytesPerID
}

// belowName is the row of the sliding window under Cloudflare's own test,
// which is not the contract's.
const belowName = "sliding, allowed iff est < limit"

// belowLimit replays the sliding window with the test Cloudflare describes,
// est < limit (for one hit), where the contract (docs/algorithms.md) has est + hits <=
// limit: the same two-window estimate of the allowed requests, with the
// previous window's part rounded down instead of taken whole. It is not an
// algorithm raterlimiter offers; it shows what that change of the contract
// would do to the wrong-decision share.
func belowLimit(tr *trace, tick func()) result {
	per := make([]windows, tr.ids)
	j := newJudge(tr, belowName, false) // not plotted
	for _, ev := range tr.events {
		c := &per[ev.id]
		b := algo.Bucket(ev.at, tr.scale)
		c.roll(b)
		e := ev.at - b*tr.scale
		// floor(prev*(S-e)/S) + cur + 1 <= limit, in integers (the traces'
		// counts and scales keep the products far below 2^63).
		ok := c.cur+1 <= tr.limit && c.prev*(tr.scale-e) < (tr.limit-c.cur)*tr.scale
		j.record(ev.at, ev.id, ok)
		if ok {
			c.count(ev.at)
		}
		tick()
	}
	return j.result()
}

// windows is one source's counts in the current and previous aligned
// window of a two-window estimate, with the first and last counted request
// of each (for the spread variant).
type windows struct {
	bucket              int64
	cur, prev           int64
	curFirst, curLast   int64
	prevFirst, prevLast int64
	seen                bool
}

// roll moves w to bucket b: the current window becomes the previous one
// when b is the next bucket, and both empty when b is further on.
func (w *windows) roll(b int64) {
	switch {
	case !w.seen:
		w.seen, w.bucket = true, b
	case b == w.bucket+1:
		w.prev, w.prevFirst, w.prevLast = w.cur, w.curFirst, w.curLast
		w.cur, w.bucket = 0, b
	case b > w.bucket+1:
		w.prev, w.cur, w.bucket = 0, 0, b
	}
}

// count counts one request at t in the current window.
func (w *windows) count(t int64) {
	if w.cur == 0 {
		w.curFirst = t
	}
	w.curLast = t
	w.cur++
}

// estimateName is the row of Cloudflare's measure.
const estimateName = "sliding, every request counted"

// estimate measures the sliding window's estimate as Cloudflare measured it:
// every request of a source is counted, allowed or not (their limiter counts
// every request and then blocks the source for a while), and a verdict
// "over the limit" (est + 1 > limit) is wrong when the exact count of the
// source's requests in the last scale ms says otherwise. The verdict comes
// from algo.Sliding itself, given records that count every request.
func estimate(tr *trace, tick func()) result {
	per := make([]windows, tr.ids)
	logs := make([]idLog, tr.ids)
	res := result{name: estimateName, mismatches: -1}
	req := millis.Request{ID: "x", Scale: tr.scale, Limit: tr.limit, Hits: 1, Algo: rl.Sliding}
	for _, ev := range tr.events {
		c := &per[ev.id]
		b := algo.Bucket(ev.at, tr.scale)
		c.roll(b)
		cur := algo.Record{Count: c.cur, Created: b * tr.scale}
		prev := algo.Record{Count: c.prev, Created: (b - 1) * tr.scale}
		d, _, _ := algo.Sliding(cur, c.cur > 0, prev, c.prev > 0, ev.at, req)
		l := &logs[ev.id]
		for l.head < len(l.times) && l.times[l.head] <= ev.at-tr.scale {
			l.head++
		}
		if l.head > 32 && 2*l.head > len(l.times) {
			l.times = l.times[:copy(l.times, l.times[l.head:])]
			l.head = 0
		}
		ok := int64(len(l.times)-l.head)+1 <= tr.limit
		res.requests++
		if d.Allowed {
			res.allowed++
		}
		switch {
		case d.Allowed && !ok:
			res.falseAllw++
		case !d.Allowed && ok:
			res.falseDeny++
		}
		if tr.over[ev.id] {
			res.overRequests++
			if d.Allowed != ok {
				res.overWrong++
			}
		}
		l.times = append(l.times, ev.at)
		c.count(ev.at)
		tick()
	}
	return res
}

// spreadName is the row of a sliding window whose estimate spreads the
// previous window's allowed requests evenly between the first and the last
// of them, rather than over the whole window.
const spreadName = "sliding, spread over first..last"

// spread replays that variant with the contract's test (est + 1 <= limit).
// It needs the first and last allowed time of each window, which a record
// has (created, modified), but the contract's estimate does not use; like
// belowLimit it is not an algorithm raterlimiter offers.
func spread(tr *trace, tick func()) result {
	per := make([]windows, tr.ids)
	j := newJudge(tr, spreadName, false) // not plotted
	for _, ev := range tr.events {
		c := &per[ev.id]
		c.roll(algo.Bucket(ev.at, tr.scale))
		from := ev.at - tr.scale // the requests after it are in the window
		var est float64
		switch {
		case c.prev == 0 || c.prevLast <= from:
		case c.prevFirst > from:
			est = float64(c.prev)
		default:
			est = float64(c.prev) * float64(c.prevLast-from) / float64(c.prevLast-c.prevFirst)
		}
		ok := est+float64(c.cur)+1 <= float64(tr.limit)
		j.record(ev.at, ev.id, ok)
		if ok {
			c.count(ev.at)
		}
		tick()
	}
	return j.result()
}

// store is the memory backend's store of one shard (package buckets)
// without its goroutine: a replay decides each check at the trace's time,
// on its own goroutine, as a shard would at that time.
type store struct{ s *buckets.Store }

// newStore returns an empty store; noCache turns its lookup cache off.
func newStore(noCache bool) store {
	o := buckets.Options{}
	if noCache {
		o.CacheSlots = -1
	}
	return store{buckets.New(o)}
}

// Check decides r at now (Unix milliseconds); r must be valid.
func (s store) Check(now int64, r rl.Request) (rl.Decision, error) {
	if err := check.Validate(r, 0); err != nil {
		return rl.Decision{}, err
	}
	d, err := s.s.Check(now, millis.Of(check.Counted(r)))
	return d.Public(), err
}

// Sweep deletes the records no decision at now can read, examining at
// most budget (0: all).
func (s store) Sweep(now int64, budget int) { s.s.Sweep(now, budget) }
