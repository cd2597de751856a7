package limitertest

import (
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func wreq(scale, limit, hits, slices int64) rl.Request {
	return rl.Request{ID: "u", Scale: millis.Duration(scale), Limit: limit, Hits: hits, Peek: hits == 0, Algo: rl.Slices, Slices: slices}
}

func qreq(scale, limit, hits, queue int64) rl.Request {
	return rl.Request{ID: "u", Scale: millis.Duration(scale), Limit: limit, Hits: hits, Peek: hits == 0, Algo: rl.Leaky, Queue: queue}
}

// slicesCases are the sliding window counters' cases: the window is cut
// into slices of ceil(scale/slices) ms aligned to the epoch, and a check is
// allowed iff the allowed hits of the current slice and the slices-1
// before it, plus its own, stay within the limit. Reset is the time
// until the oldest counted slice leaves, RetryAfter the time until
// enough slices have left for the hits to fit.
func slicesCases() []tcase {
	const minute = 60_000
	// A minute in six slices of 10 s: t0 starts one.
	ten := func(hits int64) rl.Request { return wreq(minute, 4, hits, 6) }
	bigW := millis.MaxScale / 600
	bigReset := bigW*600 - t0%bigW
	return []tcase{
		{Name: "slices/the window is the last slices", Start: t0, Steps: []step{
			{Req: ten(1), Want: allow(1, 4, minute)},
			{Advance: 1, Req: ten(1), Want: allow(2, 4, minute-1)},
			{Advance: 9_999, Req: ten(1), Want: allow(3, 4, minute-10_000)},
			{Advance: 15_000, Req: ten(1), Want: allow(4, 4, minute-25_000)},
			// full until the first slice, holding 2, leaves at t0+60 s
			{Req: ten(1), Want: deny(4, 4, minute-25_000, minute-25_000)},
			{Advance: 34_999, Req: ten(1), Want: deny(4, 4, 1, 1)},
			{Advance: 1, Req: ten(1), Want: allow(3, 4, 10_000)},
		}},
		{Name: "slices/retry when enough slices have left", Start: t0, Steps: []step{
			{Req: ten(2), Want: allow(2, 4, minute)},
			{Advance: 10_000, Req: ten(1), Want: allow(3, 4, minute-10_000)},
			{Advance: 10_000, Req: ten(1), Want: allow(4, 4, minute-20_000)},
			// three more need the first two slices gone: at t0+70 s
			{Req: ten(3), Want: deny(4, 4, minute-20_000, 70_000-20_000)},
			{Advance: 50_000, Req: ten(3), Want: allow(4, 4, 10_000)},
		}},
		{Name: "slices/denied hits are not counted", Start: t0, Steps: []step{
			{Req: ten(4), Want: allow(4, 4, minute)},
			{Advance: 30_000, Req: ten(1), Want: deny(4, 4, 30_000, 30_000)},
			{Req: ten(1), Want: deny(4, 4, 30_000, 30_000)},
			{Advance: 30_000, Req: ten(4), Want: allow(4, 4, minute)},
		}},
		{Name: "slices/peek changes nothing", Start: t0, Steps: []step{
			{Req: ten(0), Want: allow(0, 4, 0)},
			{Advance: 5_000, Req: ten(1), Want: allow(1, 4, minute-5_000)},
			{Req: ten(0), Want: allow(1, 4, minute-5_000)},
			{Advance: 20_000, Req: ten(0), Want: allow(1, 4, minute-25_000)},
			{Req: ten(1), Want: allow(2, 4, minute-25_000)},
		}},
		{Name: "slices/limit 0 and hits above the limit", Start: t0, Steps: []step{
			{Req: wreq(minute, 0, 1, 6), Want: deny(0, 0, 0, 1)},
			{Req: ten(5), Want: deny(0, 4, 0, 1)},
			{Req: ten(1), Want: allow(1, 4, minute)},
			{Req: ten(5), Want: deny(1, 4, minute, minute)},
		}},
		{Name: "slices/slice counts never share counters", Start: t0, Steps: []step{
			{Req: wreq(minute, 2, 2, 6), Want: allow(2, 2, minute)},
			{Req: wreq(minute, 2, 1, 6), Want: deny(2, 2, minute, minute)},
			{Req: wreq(minute, 2, 1, 60), Want: allow(1, 2, minute)},
			{Req: wreq(minute, 2, 1, 0), Want: allow(2, 2, minute)}, // 0 is 60
			{Req: wreq(minute, 2, 1, 2), Want: allow(1, 2, minute)},
		}},
		{Name: "slices/60 by default, a slice a second for a minute", Start: t0 + 500, Steps: []step{
			{Req: wreq(minute, 2, 2, 0), Want: allow(2, 2, minute-500)},
			{Advance: 59_499, Req: wreq(minute, 2, 1, 0), Want: deny(2, 2, 1, 1)},
			{Advance: 1, Req: wreq(minute, 2, 2, 0), Want: allow(2, 2, minute)},
		}},
		{Name: "slices/slices wider than the scale's share cover a longer window", Start: t0, Steps: []step{
			// 1000 ms in 60 slices: 17 ms each, a window of 1020 ms
			{Req: wreq(1000, 1, 1, 0), Want: allow(1, 1, 1020-t0%17)},
			{Advance: 1019 - t0%17, Req: wreq(1000, 1, 1, 0), Want: deny(1, 1, 1, 1)},
			{Advance: 1, Req: wreq(1000, 1, 1, 0), Want: allow(1, 1, 1020)},
		}},
		{Name: "slices/bounds at their edges", Start: t0, Steps: []step{
			{Req: wreq(millis.MaxScale, check.MaxLimit, check.MaxHits, 600), Want: allow(check.MaxLimit, check.MaxLimit, bigReset)},
			{Req: wreq(millis.MaxScale, check.MaxLimit, 1, 600), Want: deny(check.MaxLimit, check.MaxLimit, bigReset, bigReset)},
			{Req: wreq(1, check.MaxLimit, check.MaxHits, 2), Want: allow(check.MaxLimit, check.MaxLimit, 2)},
			{Req: wreq(1, 5, 1, 1), WantErr: rl.ErrInvalid},
			{Req: wreq(1, 5, 1, 601), WantErr: rl.ErrInvalid},
		}},
	}
}

// lallow builds an expected leaky decision: allow's, with its delay. A
// denied one is deny's.
func lallow(count, limit, reset, delay int64) rl.Decision {
	d := allow(count, limit, reset)
	d.Delay = millis.Duration(delay)
	return d
}

// leakyCases are the leaky bucket's cases: one hit leaves every
// scale/limit ms; a check waits Delay, the time until its turn, and is
// refused when more than queue hits' worth of time is ahead of it.
func leakyCases() []tcase {
	five := func(hits, queue int64) rl.Request { return qreq(1000, 5, hits, queue) }
	bounded := func(maxDelay int64) rl.Request { r := five(1, 10); r.MaxDelay = millis.Duration(maxDelay); return r }
	return []tcase{
		{Name: "leaky/a queue of three at five a second", Start: t0, Steps: []step{
			{Req: five(1, 3), Want: lallow(1, 5, 200, 0)},
			{Req: five(1, 3), Want: lallow(2, 5, 400, 200)},
			{Req: five(1, 3), Want: lallow(3, 5, 600, 400)},
			{Req: five(1, 3), Want: lallow(4, 5, 800, 600)},
			{Req: five(1, 3), Want: deny(4, 5, 800, 200)},
			{Advance: 199, Req: five(1, 3), Want: deny(4, 5, 601, 1)},
			{Advance: 1, Req: five(1, 3), Want: lallow(4, 5, 800, 600)},
			{Advance: 800, Req: five(1, 3), Want: lallow(1, 5, 200, 0)},
		}},
		{Name: "leaky/no queue: one check per interval", Start: t0, Steps: []step{
			{Req: five(1, 0), Want: lallow(1, 5, 200, 0)},
			{Advance: 100, Req: five(1, 0), Want: deny(1, 5, 100, 100)},
			{Advance: 100, Req: five(1, 0), Want: lallow(1, 5, 200, 0)},
		}},
		{Name: "leaky/a fractional interval is exact", Start: t0, Steps: []step{
			{Req: qreq(1000, 3, 1, 2), Want: lallow(1, 3, 334, 0)},
			{Req: qreq(1000, 3, 1, 2), Want: lallow(2, 3, 667, 334)},
			{Req: qreq(1000, 3, 1, 2), Want: lallow(3, 3, 1000, 667)},
			{Req: qreq(1000, 3, 1, 2), Want: deny(3, 3, 1000, 334)},
			{Advance: 999, Req: qreq(1000, 3, 3, 0), Want: deny(1, 3, 1, 1)},
			{Advance: 1, Req: qreq(1000, 3, 3, 0), Want: lallow(3, 3, 1000, 0)},
		}},
		{Name: "leaky/hits leave one interval each", Start: t0, Steps: []step{
			{Req: five(3, 2), Want: lallow(3, 5, 600, 0)},
			// three intervals ahead: more than a queue of two
			{Req: five(1, 2), Want: deny(3, 5, 600, 200)},
			{Advance: 200, Req: five(2, 2), Want: lallow(4, 5, 800, 400)},
		}},
		{Name: "leaky/a bound on the delay refuses without a place", Start: t0, Steps: []step{
			{Req: five(3, 10), Want: lallow(3, 5, 600, 0)},
			{Req: bounded(599), Want: deny(3, 5, 600, 1)},
			{Req: bounded(600), Want: lallow(4, 5, 800, 600)},
			{Req: five(1, 10), Want: lallow(5, 5, 1000, 800)},
		}},
		{Name: "leaky/denied hits are not counted", Start: t0, Steps: []step{
			{Req: five(1, 0), Want: lallow(1, 5, 200, 0)},
			{Req: five(1, 0), Want: deny(1, 5, 200, 200)},
			{Req: five(1, 0), Want: deny(1, 5, 200, 200)},
			{Advance: 200, Req: five(1, 0), Want: lallow(1, 5, 200, 0)},
		}},
		{Name: "leaky/peek changes nothing", Start: t0, Steps: []step{
			{Req: five(0, 1), Want: lallow(0, 5, 0, 0)},
			{Req: five(1, 1), Want: lallow(1, 5, 200, 0)},
			{Req: five(0, 1), Want: lallow(1, 5, 200, 0)},
			{Req: five(1, 1), Want: lallow(2, 5, 400, 200)},
			{Req: five(0, 1), Want: deny(2, 5, 400, 200)},
		}},
		{Name: "leaky/limit 0 and hits above the limit", Start: t0, Steps: []step{
			{Req: qreq(1000, 0, 1, 5), Want: deny(0, 0, 0, 1)},
			{Req: five(6, 100), Want: deny(0, 5, 0, 1)},
			{Req: five(1, 100), Want: lallow(1, 5, 200, 0)},
			{Req: five(6, 100), Want: deny(1, 5, 200, 200)},
		}},
		{Name: "leaky/bounds at their edges", Start: t0, Steps: []step{
			{Req: qreq(millis.MaxScale, check.MaxLimit, check.MaxHits, check.MaxQueue), Want: lallow(check.MaxLimit, check.MaxLimit, millis.MaxScale, 0)},
			// a scale's worth queued, far more than 65536 intervals of 73.4 ms
			{Req: qreq(millis.MaxScale, check.MaxLimit, 1, check.MaxQueue), Want: deny(check.MaxLimit, check.MaxLimit, millis.MaxScale, millis.MaxScale-check.MaxQueue*millis.MaxScale/check.MaxLimit)},
			{Req: qreq(1, check.MaxLimit, 1, check.MaxQueue), Want: lallow(1, check.MaxLimit, 1, 0)},
			{Req: qreq(1000, 5, 1, check.MaxQueue+1), WantErr: rl.ErrInvalid},
			{Req: rl.Request{ID: "u", Scale: time.Second, Limit: 5, Hits: 1, Queue: 1}, WantErr: rl.ErrInvalid},
		}},
	}
}
