package algo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// t0 starts a window of 1000 ms (and of 60000 ms).
const t0 = 1_700_000_040_000

func rec(count, created int64) algo.Record {
	return algo.Record{Count: count, Created: created, Modified: created}
}

func sreq(scale, limit, hits int64) millis.Request {
	return millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Sliding}
}

func dec(allowed bool, count, limit, reset, retry int64) millis.Decision {
	return millis.Decision{Allowed: allowed, Count: count, Limit: limit, Remaining: max(0, limit-count), ResetMS: reset, RetryAfterMS: retry}
}

func TestSliding(t *testing.T) {
	const maxS, maxL = millis.MaxScale, check.MaxLimit
	bigStart := algo.Bucket(t0, maxS) * maxS
	tests := []struct {
		name      string
		cur, prev *algo.Record // nil: absent
		now       int64
		req       millis.Request
		want      millis.Decision
		wantCount int64 // the stored count when the check writes; 0: no write
	}{
		{name: "fresh id: the first hit counts", now: t0 + 250, req: sreq(1000, 10, 1),
			want: dec(true, 1, 10, 750, 0), wantCount: 1},
		{name: "the hit that reaches the limit passes", cur: &algo.Record{Count: 9, Created: t0}, now: t0 + 500, req: sreq(1000, 10, 1),
			want: dec(true, 10, 10, 500, 0), wantCount: 10},
		{name: "at the limit: retry in the next window once this one weighs 9/10",
			cur: &algo.Record{Count: 10, Created: t0}, now: t0 + 500, req: sreq(1000, 10, 1),
			// next window: 10*(1000-e)/1000 + 1 <= 10 from e = 100
			want: dec(false, 10, 10, 500, 1100-500)},
		{name: "in the last ms of the window", cur: &algo.Record{Count: 10, Created: t0}, now: t0 + 999, req: sreq(1000, 10, 1),
			want: dec(false, 10, 10, 1, 101)},
		{name: "the previous window weighs by the part not elapsed",
			prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0 + 250, req: sreq(1000, 10, 1),
			// est = 10*0.75 = 7.5; +1 = 8.5 counts 9
			want: dec(true, 9, 10, 750, 0), wantCount: 1},
		{name: "a fractional estimate counts rounded up",
			prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0 + 250, req: sreq(1000, 10, 2),
			// 7.5 + 2 = 9.5 <= 10 passes and counts 10: no whole hit fits any more
			want: dec(true, 10, 10, 750, 0), wantCount: 2},
		{name: "denied while prev decays: retry when it weighs 7",
			cur: &algo.Record{Count: 2, Created: t0}, prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0 + 250, req: sreq(1000, 10, 1),
			// 7.5 + 2 + 1 = 10.5 > 10; 10*(1000-e)/1000 + 3 <= 10 from e = 300
			want: dec(false, 10, 10, 750, 50)},
		{name: "several hits wait longer",
			prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0 + 100, req: sreq(1000, 10, 5),
			// 9 + 5 > 10; 10*(1000-e)/1000 + 5 <= 10 from e = 500
			want: dec(false, 9, 10, 900, 400)},
		{name: "exactly at the limit passes",
			prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0 + 500, req: sreq(1000, 10, 5),
			want: dec(true, 10, 10, 500, 0), wantCount: 5},
		{name: "retry after a fractional weight is rounded up",
			prev: &algo.Record{Count: 3, Created: t0 - 1000}, now: t0, req: sreq(1000, 3, 1),
			// 3*(1000-e)/1000 + 1 <= 3 from e = 333.3..., so 334
			want: dec(false, 3, 3, 1000, 334)},
		{name: "a full current window and the limit asked: the window after next",
			cur: &algo.Record{Count: 10, Created: t0}, now: t0 + 500, req: sreq(1000, 10, 10),
			want: dec(false, 10, 10, 500, 1500)},
		{name: "peek reports and writes nothing",
			cur: &algo.Record{Count: 2, Created: t0}, prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0 + 250, req: sreq(1000, 10, 0),
			want: dec(true, 10, 10, 750, 0)},
		{name: "peek over a lowered limit says when it is back within",
			prev: &algo.Record{Count: 10, Created: t0 - 1000}, now: t0, req: sreq(1000, 5, 0),
			want: dec(false, 10, 5, 1000, 500)},
		{name: "limit 0 denies", now: t0 + 250, req: sreq(1000, 0, 1),
			want: dec(false, 0, 0, 750, 750)},
		{name: "limit 0 peek on a fresh id", now: t0 + 250, req: sreq(1000, 0, 0),
			want: dec(true, 0, 0, 750, 0)},
		{name: "hits above the limit never pass", now: t0, req: sreq(1000, 3, 4),
			want: dec(false, 0, 3, 1000, 1000)},
		{name: "hits above the limit over a used window", cur: &algo.Record{Count: 2, Created: t0}, now: t0 + 10, req: sreq(1000, 3, 4),
			want: dec(false, 2, 3, 990, 990)},
		{name: "bounds: the largest scale and limit",
			prev: &algo.Record{Count: maxL, Created: bigStart - 1}, now: t0, req: sreq(maxS, maxL, 1),
			want: dec(true, 2617074911, maxL, 192159960000, 0), wantCount: 1},
		{name: "bounds: the largest hits wait for the whole window",
			prev: &algo.Record{Count: maxL, Created: bigStart - 1}, now: t0, req: sreq(maxS, maxL, check.MaxHits),
			want: dec(false, 2617074910, maxL, 192159960000, 192159960000)},
		{name: "bounds: scale 1", now: t0, req: sreq(1, maxL, check.MaxHits),
			want: dec(true, maxL, maxL, 1, 0), wantCount: maxL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cur, prev algo.Record
			if tc.cur != nil {
				cur = *tc.cur
			}
			if tc.prev != nil {
				prev = *tc.prev
			}
			got, next, write := algo.Sliding(cur, tc.cur != nil, prev, tc.prev != nil, tc.now, tc.req)
			assert.Equal(t, tc.now, got.Now)
			got.Now = 0
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantCount != 0, write, "write")
			if write {
				assert.Equal(t, tc.wantCount, next.Count)
				assert.Equal(t, tc.now, next.Modified)
				assert.Equal(t, algo.Bucket(tc.now, tc.req.Scale), algo.BucketOf(rl.Sliding, tc.req.Scale, next))
				if tc.cur != nil {
					assert.Equal(t, tc.cur.Created, next.Created, "created is kept")
				} else {
					assert.Equal(t, tc.now, next.Created)
				}
			}
			m, c := int64(0), int64(0)
			if tc.prev != nil {
				m = tc.prev.Count
			}
			if tc.cur != nil {
				c = tc.cur.Count
			}
			e := tc.now - algo.Bucket(tc.now, tc.req.Scale)*tc.req.Scale
			allowed, count := slidingModel(m, c, e, tc.req.Scale, tc.req.Limit, tc.req.Hits)
			assert.Equal(t, allowed, got.Allowed, "the exact model's decision")
			assert.Equal(t, count, got.Count, "the exact model's count")
		})
	}
}

func TestSlidingExpired(t *testing.T) {
	r := rec(5, t0+10)
	tests := []struct {
		name string
		now  int64
		want bool
	}{
		{"in its window", t0 + 999, false},
		{"in the next window, which still weighs it", t0 + 1999, false},
		{"two windows later", t0 + 2000, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, algo.Expired(rl.Sliding, 1000, r, tc.now))
		})
	}
}
