package main

import (
	"math/big"
	"strconv"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
	"github.com/raterlimiter/raterlimiter/buckets"
)

// logName is the exact sliding log, the reference, replayed as a limiter of
// its own beside the algorithms.
const logName = "sliding log"

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
	names := make([]string, tr.ids)
	for i := range names {
		names[i] = "src-" + strconv.Itoa(i)
	}
	var out []result
	for _, a := range rl.Algos {
		j := newJudge(tr, a.String(), keepTimes)
		st := buckets.New(buckets.Options{})
		var model *gcraModel
		if a == rl.Token {
			model = newGCRAModel(tr)
			j.res.mismatches = 0
		}
		req := rl.Request{Scale: tr.scale, Limit: tr.limit, Hits: 1, Algo: a}
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
		out = append(out, j.result())
	}
	j := newJudge(tr, logName, keepTimes)
	for _, ev := range tr.events {
		ok, _ := j.room(ev.at, ev.id)
		j.record(ev.at, ev.id, ok)
		tick()
	}
	return append(out, j.result(), estimate(tr, tick))
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
	type counts struct {
		bucket    int64
		cur, prev int64
		seen      bool
	}
	per := make([]counts, tr.ids)
	logs := make([]idLog, tr.ids)
	res := result{name: estimateName, mismatches: -1}
	req := rl.Request{ID: "x", Scale: tr.scale, Limit: tr.limit, Hits: 1, Algo: rl.Sliding}
	for _, ev := range tr.events {
		c := &per[ev.id]
		b := algo.Bucket(ev.at, tr.scale)
		switch {
		case !c.seen:
			c.seen, c.bucket = true, b
		case b == c.bucket+1:
			c.prev, c.cur, c.bucket = c.cur, 0, b
		case b > c.bucket+1:
			c.prev, c.cur, c.bucket = 0, 0, b
		}
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
		c.cur++
		tick()
	}
	return res
}
