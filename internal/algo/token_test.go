package algo_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func treq(scale, limit, hits int64) millis.Request {
	return millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Token}
}

// tat is a token record whose theoretical arrival time is ms + num/den.
func tat(ms, num, den int64) *algo.Record {
	return &algo.Record{Count: int64(uint64(den)<<32 | uint64(num)), Created: t0 - 5000, Modified: ms}
}

func TestToken(t *testing.T) {
	const maxS, maxL = millis.MaxScale, check.MaxLimit
	tests := []struct {
		name    string
		st      *algo.Record // nil: absent
		now     int64
		req     millis.Request
		want    millis.Decision
		wantTAT *algo.Record // the stored state when the check writes
	}{
		{name: "fresh id: one hit costs one interval (100 ms)", now: t0, req: treq(1000, 10, 1),
			want: dec(true, 1, 10, 100, 0), wantTAT: tat(t0+100, 0, 10)},
		{name: "a full bucket takes the whole burst at once", now: t0, req: treq(1000, 10, 10),
			want: dec(true, 10, 10, 1000, 0), wantTAT: tat(t0+1000, 0, 10)},
		{name: "an empty bucket: retry after one interval", st: tat(t0+1000, 0, 10), now: t0, req: treq(1000, 10, 1),
			want: dec(false, 10, 10, 1000, 100)},
		{name: "it refills one hit per interval", st: tat(t0+1000, 0, 10), now: t0 + 250, req: treq(1000, 10, 1),
			// 750 ms from full = 7.5 hits used; +1 = 8.5 counts 9
			want: dec(true, 9, 10, 850, 0), wantTAT: tat(t0+1100, 0, 10)},
		{name: "several hits wait for several intervals", st: tat(t0+1000, 0, 10), now: t0 + 250, req: treq(1000, 10, 4),
			// needs TAT - t <= 600: t = T0+400
			want: dec(false, 8, 10, 750, 150)},
		{name: "a fractional interval is kept exactly", now: t0, req: treq(1000, 3, 1),
			want: dec(true, 1, 3, 334, 0), wantTAT: tat(t0+333, 1, 3)},
		{name: "fractional interval: retry rounded up", st: tat(t0+1000, 0, 3), now: t0, req: treq(1000, 3, 1),
			// TAT - t <= 666.66...: t >= T0 + 333.33..., so 334
			want: dec(false, 3, 3, 1000, 334)},
		{name: "a fractional TAT", st: tat(t0+666, 2, 3), now: t0, req: treq(1000, 3, 2),
			// TAT - t <= 333.33...: t >= T0 + 333.33..., so 334
			want: dec(false, 2, 3, 667, 334)},
		{name: "the whole burst waits until the TAT has passed", st: tat(t0, 2, 3), now: t0, req: treq(1000, 3, 3),
			want: dec(false, 1, 3, 1, 1)},
		{name: "peek reports and writes nothing", st: tat(t0+1000, 0, 10), now: t0 + 500, req: treq(1000, 10, 0),
			want: dec(true, 5, 10, 500, 0)},
		{name: "a past TAT reads as a full bucket", st: tat(t0-5, 0, 10), now: t0, req: treq(1000, 10, 1),
			want: dec(true, 1, 10, 100, 0), wantTAT: tat(t0+100, 0, 10)},
		{name: "a lowered limit reads the same distance from full", st: tat(t0+500, 0, 10), now: t0, req: treq(1000, 5, 1),
			// 500 ms from full is 2.5 of 5; +1 interval of 200 ms
			want: dec(true, 4, 5, 700, 0), wantTAT: tat(t0+700, 0, 5)},
		{name: "a changed limit converts the fraction rounding up", st: tat(t0, 1, 3), now: t0, req: treq(1000, 2, 0),
			// 1/3 ms becomes 1/2 ms
			want: dec(true, 1, 2, 1, 0)},
		{name: "limit 0 denies", now: t0, req: treq(1000, 0, 1),
			want: dec(false, 0, 0, 0, 1)},
		{name: "limit 0 peek on a fresh id", now: t0, req: treq(1000, 0, 0),
			want: dec(true, 0, 0, 0, 0)},
		{name: "limit 0 over a used bucket", st: tat(t0+400, 1, 3), now: t0, req: treq(1000, 0, 1),
			want: dec(false, 0, 0, 401, 401)},
		{name: "hits above the limit never pass", now: t0, req: treq(1000, 3, 4),
			want: dec(false, 0, 3, 0, 1)},
		{name: "hits above the limit over a used bucket", st: tat(t0+500, 0, 10), now: t0, req: treq(1000, 10, 11),
			want: dec(false, 5, 10, 500, 500)},
		{name: "bounds: the largest scale, limit and hits", now: t0, req: treq(maxS, maxL, check.MaxHits),
			want: dec(true, maxL, maxL, maxS, 0), wantTAT: tat(t0+maxS, 0, maxL)},
		{name: "bounds: one hit of the largest limit", st: tat(t0+maxS, 0, maxL), now: t0, req: treq(maxS, maxL, 1),
			// the interval is 315360000000/4294967295 = 73.4... ms
			want: dec(false, maxL, maxL, maxS, 74)},
		{name: "bounds: scale 1", now: t0, req: treq(1, maxL, 1),
			want: dec(true, 1, maxL, 1, 0), wantTAT: tat(t0, 1, maxL)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st algo.Record
			if tc.st != nil {
				st = *tc.st
			}
			got, next, write := algo.Token(st, tc.st != nil, tc.now, tc.req)
			assert.Equal(t, tc.now, got.Now)
			got.Now = 0
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantTAT != nil, write, "write")
			if write {
				assert.Equal(t, tc.wantTAT.Count, next.Count, "fraction")
				assert.Equal(t, tc.wantTAT.Modified, next.Modified, "TAT's whole ms")
				if tc.st != nil {
					assert.Equal(t, tc.st.Created, next.Created, "created is kept")
				} else {
					assert.Equal(t, tc.now, next.Created)
				}
				assert.Equal(t, int64(0), algo.BucketOf(rl.Token, tc.req.Scale, next))
			}
			if tc.st == nil || uint64(tc.st.Count)>>32 == uint64(tc.req.Limit) {
				// Under one limit, the exact rational model agrees.
				var g gcraModel
				if tc.st != nil {
					g.tat = new(big.Rat).Add(rat(tc.st.Modified), big.NewRat(int64(uint32(tc.st.Count)), tc.req.Limit))
				}
				allowed, count, reset := g.check(tc.now, tc.req.Scale, tc.req.Limit, tc.req.Hits)
				assert.Equal(t, allowed, got.Allowed, "model: allowed")
				assert.Equal(t, count, got.Count, "model: count")
				assert.Equal(t, reset, got.ResetMS, "model: reset")
			}
		})
	}
}

func TestTokenExpired(t *testing.T) {
	tests := []struct {
		name string
		rec  *algo.Record
		now  int64
		want bool
	}{
		{"TAT ahead", tat(t0+10, 0, 10), t0, false},
		{"TAT now, whole", tat(t0, 0, 10), t0, true},
		{"TAT now plus a fraction", tat(t0, 1, 3), t0, false},
		{"TAT now plus a fraction, 1 ms later", tat(t0, 1, 3), t0 + 1, true},
		{"TAT past", tat(t0-1, 2, 3), t0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, algo.Expired(rl.Token, 1000, *tc.rec, tc.now))
			// Expired means the state reads as a fresh one.
			d, _, _ := algo.Token(*tc.rec, true, tc.now, treq(1000, 3, 0))
			fresh, _, _ := algo.Token(algo.Record{}, false, tc.now, treq(1000, 3, 0))
			assert.Equal(t, tc.want, d == fresh)
		})
	}
}

func TestTokenView(t *testing.T) {
	b := algo.View(rl.Token, 1000, *tat(t0+333, 1, 3))
	assert.Equal(t, millis.Bucket{Scale: 1000, Algo: check.AlgoName(rl.Token), Count: t0 + 334, Created: t0 - 5000, Modified: t0 + 333}, b)
	b = algo.View(rl.Token, 1000, *tat(t0+300, 0, 10))
	assert.Equal(t, int64(t0+300), b.Count)
}
