package limitertest

import (
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func sreq(scale, limit, hits int64) rl.Request {
	return rl.Request{ID: "u", Scale: millis.Duration(scale), Limit: limit, Hits: hits, Peek: hits == 0, Algo: rl.Sliding}
}

func treq(scale, limit, hits int64) rl.Request {
	return rl.Request{ID: "u", Scale: millis.Duration(scale), Limit: limit, Hits: hits, Peek: hits == 0, Algo: rl.Token}
}

// slidingCases are the sliding window's cases. The estimate is
// prev*(scale-elapsed)/scale + cur, allowed iff estimate + hits <= limit;
// Count is the estimate after the decision rounded up.
func slidingCases() []tcase {
	bigReset := millis.MaxScale - t0%millis.MaxScale
	return []tcase{
		{Name: "sliding/limit is reached, then passes as the window slides", Start: t0, Steps: []step{
			{Req: sreq(1000, 5, 5), Want: allow(5, 5, 1000)},
			// next window: 5*(1000-e)/1000 + 1 <= 5 from e = 200
			{Req: sreq(1000, 5, 1), Want: deny(5, 5, 1000, 1200)},
			// e = 199: 4.005 + 1 > 5
			{Advance: 1199, Req: sreq(1000, 5, 1), Want: deny(5, 5, 801, 1)},
			{Advance: 1, Req: sreq(1000, 5, 1), Want: allow(5, 5, 800)},
		}},
		{Name: "sliding/the previous window weighs by the part not elapsed", Start: t0, Steps: []step{
			{Req: sreq(1000, 4, 4), Want: allow(4, 4, 1000)},
			{Advance: 1500, Req: sreq(1000, 4, 2), Want: allow(4, 4, 500)}, // 4*0.5 + 2
			{Advance: 250, Req: sreq(1000, 4, 1), Want: allow(4, 4, 250)},  // 4*0.25 + 3
			// 1 + 3 + 1 > 4 until the previous window weighs nothing: the next window
			{Req: sreq(1000, 4, 1), Want: deny(4, 4, 250, 250)},
			{Advance: 250, Req: sreq(1000, 4, 1), Want: allow(4, 4, 1000)}, // 3*1 + 1
		}},
		{Name: "sliding/fractional estimates count rounded up", Start: t0, Steps: []step{
			{Req: sreq(1000, 3, 3), Want: allow(3, 3, 1000)},
			// 3*0.9 = 2.7 counts 3: nothing remains, though a peek is within the limit
			{Advance: 1100, Req: sreq(1000, 3, 0), Want: allow(3, 3, 900)},
			// 3*(1000-e)/1000 + 1 <= 3 from e = 333.3..., so 334
			{Req: sreq(1000, 3, 1), Want: deny(3, 3, 900, 234)},
			{Advance: 233, Req: sreq(1000, 3, 1), Want: deny(3, 3, 667, 1)},
			{Advance: 1, Req: sreq(1000, 3, 1), Want: allow(3, 3, 666)}, // 1.998 + 1
		}},
		{Name: "sliding/denied hits are not counted", Start: t0, Steps: []step{
			{Req: sreq(1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: sreq(1000, 1, 1), Want: deny(1, 1, 1000, 2000)},
			{Advance: 1000, Req: sreq(1000, 1, 1), Want: deny(1, 1, 1000, 1000)},
			// the previous window holds no hit: the denied ones were not counted
			{Advance: 1000, Req: sreq(1000, 1, 1), Want: allow(1, 1, 1000)},
		}},
		{Name: "sliding/a window two windows back is not read", Start: t0 + 999, Steps: []step{
			{Req: sreq(1000, 2, 2), Want: allow(2, 2, 1)},
			{Advance: 1001, Req: sreq(1000, 2, 2), Want: allow(2, 2, 1000)},
		}},
		{Name: "sliding/peek changes nothing", Start: t0, Steps: []step{
			{Req: sreq(1000, 3, 1), Want: allow(1, 3, 1000)},
			{Req: sreq(1000, 3, 0), Want: allow(1, 3, 1000)},
			{Req: sreq(1000, 3, 0), Want: allow(1, 3, 1000)},
			{Req: sreq(1000, 3, 1), Want: allow(2, 3, 1000)},
		}},
		{Name: "sliding/limit 0 denies every hit", Start: t0, Steps: []step{
			{Req: sreq(1000, 0, 1), Want: deny(0, 0, 1000, 1000)},
			{Advance: 250, Req: sreq(1000, 0, 1), Want: deny(0, 0, 750, 750)},
			{Req: sreq(1000, 0, 0), Want: allow(0, 0, 750)},
		}},
		{Name: "sliding/hits above the limit never pass", Start: t0, Steps: []step{
			{Req: sreq(1000, 3, 4), Want: deny(0, 3, 1000, 1000)},
			{Advance: 1000, Req: sreq(1000, 3, 4), Want: deny(0, 3, 1000, 1000)},
			{Req: sreq(1000, 3, 0), Want: allow(0, 3, 1000)},
			{Req: sreq(1000, 3, 3), Want: allow(3, 3, 1000)},
		}},
		{Name: "sliding/bounds at their edges", Start: t0, Steps: []step{
			{Req: sreq(millis.MaxScale, check.MaxLimit, check.MaxHits), Want: allow(check.MaxLimit, check.MaxLimit, bigReset)},
			// next window: from e = ceil(scale/limit) = 74
			{Req: sreq(millis.MaxScale, check.MaxLimit, 1), Want: deny(check.MaxLimit, check.MaxLimit, bigReset, bigReset+74)},
			{Req: rl.Request{ID: "u", Scale: time.Millisecond, Limit: check.MaxLimit, Hits: check.MaxHits, Algo: rl.Sliding}, Want: allow(check.MaxLimit, check.MaxLimit, 1)},
		}},
	}
}

// tokenCases are GCRA's cases: limit per scale, a burst of limit, one hit
// every scale/limit ms (kept exactly when fractional).
func tokenCases() []tcase {
	return []tcase{
		{Name: "token/a burst of the limit, then one hit per interval", Start: t0, Steps: []step{
			{Req: treq(1000, 5, 5), Want: allow(5, 5, 1000)},
			{Req: treq(1000, 5, 1), Want: deny(5, 5, 1000, 200)},
			{Advance: 199, Req: treq(1000, 5, 1), Want: deny(5, 5, 801, 1)},
			{Advance: 1, Req: treq(1000, 5, 1), Want: allow(5, 5, 1000)},
		}},
		{Name: "token/the bucket refills over time", Start: t0, Steps: []step{
			{Req: treq(1000, 5, 5), Want: allow(5, 5, 1000)},
			{Advance: 500, Req: treq(1000, 5, 0), Want: allow(3, 5, 500)}, // 2.5 hits back
			{Req: treq(1000, 5, 2), Want: allow(5, 5, 900)},
			{Req: treq(1000, 5, 1), Want: deny(5, 5, 900, 100)},
		}},
		{Name: "token/full again after reset_ms", Start: t0, Steps: []step{
			{Req: treq(1000, 5, 2), Want: allow(2, 5, 400)},
			{Advance: 399, Req: treq(1000, 5, 0), Want: allow(1, 5, 1)},
			{Advance: 1, Req: treq(1000, 5, 0), Want: allow(0, 5, 0)},
		}},
		{Name: "token/a fractional interval is exact", Start: t0, Steps: []step{
			{Req: treq(1000, 3, 1), Want: allow(1, 3, 334)},
			{Req: treq(1000, 3, 1), Want: allow(2, 3, 667)},
			{Req: treq(1000, 3, 1), Want: allow(3, 3, 1000)},
			// TAT - t <= 666.6...: t >= t0 + 333.3..., so 334
			{Req: treq(1000, 3, 1), Want: deny(3, 3, 1000, 334)},
			{Advance: 333, Req: treq(1000, 3, 1), Want: deny(3, 3, 667, 1)},
			{Advance: 1, Req: treq(1000, 3, 1), Want: allow(3, 3, 1000)},
			// three intervals later, exactly one window: no drift
			{Advance: 999, Req: treq(1000, 3, 3), Want: deny(1, 3, 1, 1)},
			{Advance: 1, Req: treq(1000, 3, 3), Want: allow(3, 3, 1000)},
		}},
		{Name: "token/denied hits are not counted", Start: t0, Steps: []step{
			{Req: treq(1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: treq(1000, 1, 1), Want: deny(1, 1, 1000, 1000)},
			{Advance: 500, Req: treq(1000, 1, 1), Want: deny(1, 1, 500, 500)},
			{Advance: 500, Req: treq(1000, 1, 1), Want: allow(1, 1, 1000)},
		}},
		{Name: "token/peek changes nothing", Start: t0, Steps: []step{
			{Req: treq(1000, 4, 1), Want: allow(1, 4, 250)},
			{Req: treq(1000, 4, 0), Want: allow(1, 4, 250)},
			{Req: treq(1000, 4, 0), Want: allow(1, 4, 250)},
			{Req: treq(1000, 4, 1), Want: allow(2, 4, 500)},
		}},
		{Name: "token/limit 0 denies every hit", Start: t0, Steps: []step{
			// a bucket of no tokens is always full: reset is 0; a denial
			// still says to wait (at least 1 ms), though no wait helps
			{Req: treq(1000, 0, 1), Want: deny(0, 0, 0, 1)},
			{Req: treq(1000, 0, 0), Want: allow(0, 0, 0)},
		}},
		{Name: "token/hits above the limit never pass", Start: t0, Steps: []step{
			{Req: treq(1000, 3, 4), Want: deny(0, 3, 0, 1)},
			{Req: treq(1000, 3, 1), Want: allow(1, 3, 334)},
			{Req: treq(1000, 3, 4), Want: deny(1, 3, 334, 334)},
		}},
		{Name: "token/bounds at their edges", Start: t0, Steps: []step{
			{Req: treq(millis.MaxScale, check.MaxLimit, check.MaxHits), Want: allow(check.MaxLimit, check.MaxLimit, millis.MaxScale)},
			// one interval is 315360000000/4294967295 = 73.4... ms
			{Req: treq(millis.MaxScale, check.MaxLimit, 1), Want: deny(check.MaxLimit, check.MaxLimit, millis.MaxScale, 74)},
			{Req: rl.Request{ID: "u", Scale: time.Millisecond, Limit: check.MaxLimit, Hits: 1, Algo: rl.Token}, Want: allow(1, check.MaxLimit, 1)},
		}},
	}
}
