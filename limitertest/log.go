package limitertest

import (
	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func lreq(scale, limit, hits int64) rl.Request {
	return rl.Request{ID: "u", Scale: millis.Duration(scale), Limit: limit, Hits: hits, Peek: hits == 0, Algo: rl.Log}
}

// logCases are the sliding window log's cases: allowed iff the allowed hits
// stamped within (now-scale, now] plus hits stay within the limit; Reset
// is the time until the oldest remembered hit leaves the window,
// RetryAfter the time until enough have left for the hits to fit.
func logCases() []tcase {
	return []tcase{
		{Name: "log/a hit leaves exactly scale ms after it was allowed", Start: t0 + 300, Steps: []step{
			{Req: lreq(1000, 2, 1), Want: allow(1, 2, 1000)},
			{Advance: 400, Req: lreq(1000, 2, 1), Want: allow(2, 2, 600)},
			{Advance: 599, Req: lreq(1000, 2, 1), Want: deny(2, 2, 1, 1)},
			{Advance: 1, Req: lreq(1000, 2, 1), Want: allow(2, 2, 400)},
		}},
		{Name: "log/no burst at a window's edge", Start: t0 + 950, Steps: []step{
			{Req: lreq(1000, 3, 3), Want: allow(3, 3, 1000)},
			// a fixed window would start over 50 ms later
			{Advance: 50, Req: lreq(1000, 3, 1), Want: deny(3, 3, 950, 950)},
			{Advance: 950, Req: lreq(1000, 3, 3), Want: allow(3, 3, 1000)},
		}},
		{Name: "log/several hits at once, and retry when enough have left", Start: t0, Steps: []step{
			{Req: lreq(1000, 5, 2), Want: allow(2, 5, 1000)},
			{Advance: 100, Req: lreq(1000, 5, 2), Want: allow(4, 5, 900)},
			// 4+3 > 5: two hits must leave, the two at t0
			{Advance: 100, Req: lreq(1000, 5, 3), Want: deny(4, 5, 800, 800)},
			// 4+4 > 5: three must leave, the third at t0+100
			{Req: lreq(1000, 5, 4), Want: deny(4, 5, 800, 900)},
			{Advance: 800, Req: lreq(1000, 5, 3), Want: allow(5, 5, 100)},
		}},
		{Name: "log/denied hits are not remembered", Start: t0, Steps: []step{
			{Req: lreq(1000, 1, 1), Want: allow(1, 1, 1000)},
			{Advance: 500, Req: lreq(1000, 1, 1), Want: deny(1, 1, 500, 500)},
			{Advance: 500, Req: lreq(1000, 1, 1), Want: allow(1, 1, 1000)},
		}},
		{Name: "log/peek changes nothing", Start: t0, Steps: []step{
			{Req: lreq(1000, 3, 0), Want: allow(0, 3, 0)},
			{Req: lreq(1000, 3, 1), Want: allow(1, 3, 1000)},
			{Advance: 10, Req: lreq(1000, 3, 0), Want: allow(1, 3, 990)},
			{Req: lreq(1000, 3, 1), Want: allow(2, 3, 990)},
		}},
		{Name: "log/hits above the limit never pass", Start: t0, Steps: []step{
			{Req: lreq(1000, 3, 1), Want: allow(1, 3, 1000)},
			{Advance: 200, Req: lreq(1000, 3, 4), Want: deny(1, 3, 800, 800)},
			{Req: lreq(1000, 0, 1), Want: deny(1, 0, 800, 800)},
		}},
		{Name: "log/the limit's bound", Start: t0, Steps: []step{
			{Req: lreq(1000, check.MaxLogLimit, check.MaxLogLimit), Want: allow(check.MaxLogLimit, check.MaxLogLimit, 1000)},
			{Req: lreq(1000, check.MaxLogLimit+1, 1), WantErr: rl.ErrInvalid},
			{Req: lreq(1000, check.MaxLogLimit, 1), Want: deny(check.MaxLogLimit, check.MaxLogLimit, 1000, 1000)},
		}},
		{Name: "log/long scales", Start: t0, Steps: []step{
			{Req: lreq(millis.MaxScale, 2, 1), Want: allow(1, 2, millis.MaxScale)},
			{Advance: 1, Req: lreq(millis.MaxScale, 2, 1), Want: allow(2, 2, millis.MaxScale-1)},
			{Req: lreq(millis.MaxScale, 2, 1), Want: deny(2, 2, millis.MaxScale-1, millis.MaxScale-1)},
		}},
	}
}
