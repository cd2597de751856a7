package main

import (
	"math"
	"math/rand/v2"
	"slices"
)

// event is one request of one source at a Unix millisecond.
type event struct {
	at int64
	id int32
}

// trace is a synthetic workload: every source is limited to limit per scale.
type trace struct {
	name  string
	about string
	scale int64
	limit int64
	ids   int
	// events are ordered by time.
	events []event
	// start and end bound the time the trace covers.
	start, end int64
	// over marks the sources that offer more than limit requests in some
	// window (t-scale, t]: the only ones an exact limiter ever denies.
	over []bool
}

// epoch starts every trace on a window boundary of 1 s and 1 min.
const epoch = 1_700_000_040_000

// poisson appends the arrivals of a Poisson process of rate (requests per
// ms) on [from, to) for source id.
func poisson(rng *rand.Rand, evs []event, id int32, rate float64, from, to int64) []event {
	if rate <= 0 {
		return evs
	}
	t := float64(from)
	for {
		t += rng.ExpFloat64() / rate
		if t >= float64(to) {
			return evs
		}
		evs = append(evs, event{int64(t), id})
	}
}

// finish orders the events and marks the sources over the limit.
func finish(tr trace) trace {
	slices.SortStableFunc(tr.events, func(a, b event) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	tr.over = make([]bool, tr.ids)
	recent := make([][]int64, tr.ids) // each source's requests in the last scale ms
	for _, ev := range tr.events {
		q := recent[ev.id]
		k := 0
		for k < len(q) && q[k] <= ev.at-tr.scale {
			k++
		}
		q = append(q[k:], ev.at)
		if int64(len(q)) > tr.limit {
			tr.over[ev.id] = true
			q = q[1:] // it is over: the count no longer matters
		}
		recent[ev.id] = q
	}
	return tr
}

// overShare returns how many sources are over the limit and the share of
// the requests they make.
func (tr *trace) overShare() (sources int, requests int64) {
	for _, o := range tr.over {
		if o {
			sources++
		}
	}
	for _, ev := range tr.events {
		if tr.over[ev.id] {
			requests++
		}
	}
	return sources, requests
}

// steady is Poisson traffic from ids sources, each at load times the limit.
func steady(rng *rand.Rand, name string, ids int, load float64, windows int64) trace {
	tr := trace{name: name, scale: 1000, limit: 120, ids: ids, start: epoch}
	tr.end = tr.start + windows*tr.scale
	rate := load * float64(tr.limit) / float64(tr.scale)
	for id := range ids {
		tr.events = poisson(rng, tr.events, int32(id), rate, tr.start, tr.end)
	}
	return finish(tr)
}

// onOff is bursty traffic: each source alternates bursts at 4x the limit,
// lasting 0.1 to 1 window, with silences of 0.5 to 3 windows.
func onOff(rng *rand.Rand, ids int, windows int64) trace {
	tr := trace{name: "on/off bursts", scale: 1000, limit: 120, ids: ids, start: epoch}
	tr.end = tr.start + windows*tr.scale
	rate := 4 * float64(tr.limit) / float64(tr.scale)
	for id := range ids {
		t := tr.start + rng.Int64N(tr.scale)
		for t < tr.end {
			on := tr.scale/10 + rng.Int64N(tr.scale*9/10)
			tr.events = poisson(rng, tr.events, int32(id), rate, t, min(t+on, tr.end))
			t += on + tr.scale/2 + rng.Int64N(tr.scale*5/2)
		}
	}
	return finish(tr)
}

// boundary is the attack on fixed windows: one source sends the limit in the
// last 50 ms of a window and the limit again in the first 50 ms of the next,
// then rests for two windows, and again.
func boundary(cycles int64) trace {
	tr := trace{name: "boundary attack", scale: 1000, limit: 120, ids: 1, start: epoch}
	const burst = 50 // ms
	tr.end = tr.start + (4*cycles+1)*tr.scale
	for c := range cycles {
		edge := tr.start + (4*c+1)*tr.scale
		for _, from := range []int64{edge - burst, edge} {
			for i := range tr.limit {
				tr.events = append(tr.events, event{from + i*burst/tr.limit, 0})
			}
		}
	}
	return finish(tr)
}

// manySources is ids sources with heavy-tailed rates: a source's mean rate
// is Pareto distributed (shape alpha, the least rate xm requests per
// minute), capped at capX times the limit; each sends Poisson traffic whose
// rate also wanders by a factor of up to 2 every minute, as real clients do.
func manySources(rng *rand.Rand, ids int, minutes int64, limit int64, xm, alpha, capX float64) trace {
	tr := trace{name: "many sources", scale: 60_000, limit: limit, ids: ids, start: epoch}
	tr.end = tr.start + minutes*tr.scale
	for id := range ids {
		perMin := min(xm*math.Pow(1-rng.Float64(), -1/alpha), capX*float64(limit))
		for m := range minutes {
			from := tr.start + m*tr.scale
			wander := math.Exp2(2*rng.Float64() - 1)
			tr.events = poisson(rng, tr.events, int32(id), perMin*wander/float64(tr.scale), from, from+tr.scale)
		}
	}
	return finish(tr)
}
