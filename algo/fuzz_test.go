package algo_test

import (
	"math/big"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

// within maps any v into [lo, hi].
func within(v, lo, hi int64) int64 {
	return lo + int64(uint64(v)%uint64(hi-lo+1))
}

// checkRetry checks a denied decision's RetryAfterMS against the state in s:
// the same request passes at now+retry and fails 1 ms earlier.
func checkRetry(t *testing.T, s *sim, now int64, r rl.Request, d rl.Decision) {
	t.Helper()
	if d.Allowed {
		if d.RetryAfterMS != 0 {
			t.Fatalf("allowed with retry %d: %+v", d.RetryAfterMS, d)
		}
		return
	}
	if r.Hits > r.Limit {
		if d.RetryAfterMS != max(d.ResetMS, 1) {
			t.Fatalf("never passes, retry %d != max(reset %d, 1)", d.RetryAfterMS, d.ResetMS)
		}
		return
	}
	if d.RetryAfterMS <= 0 {
		t.Fatalf("denied with retry %d: %+v", d.RetryAfterMS, d)
	}
	if at := s.clone().check(now+d.RetryAfterMS, r); !at.Allowed {
		t.Fatalf("%+v still denied after retry %d: %+v", r, d.RetryAfterMS, at)
	}
	if early := s.clone().check(now+d.RetryAfterMS-1, r); early.Allowed {
		t.Fatalf("%+v allowed 1 ms before retry %d", r, d.RetryAfterMS)
	}
}

func FuzzSliding(f *testing.F) {
	f.Add(int64(10), int64(2), int64(250), int64(1000), int64(10), int64(1))
	f.Add(int64(3), int64(0), int64(0), int64(1000), int64(3), int64(1))
	f.Add(rl.MaxLimit, int64(0), int64(1), rl.MaxScale, rl.MaxLimit, rl.MaxHits)
	f.Add(int64(0), rl.MaxLimit, int64(0), int64(1), rl.MaxLimit, int64(1))
	f.Fuzz(func(t *testing.T, p, c, e, scale, limit, hits int64) {
		scale = within(scale, 1, rl.MaxScale)
		limit = within(limit, 0, rl.MaxLimit)
		hits = within(hits, 0, rl.MaxHits)
		p, c = within(p, 0, rl.MaxLimit), within(c, 0, rl.MaxLimit)
		b := algo.Bucket(t0, scale)
		e = within(e, 0, scale-1)
		now := b*scale + e
		s := newSim(t)
		if p > 0 {
			s.recs[b-1] = rec(p, (b-1)*scale)
		}
		if c > 0 {
			s.recs[b] = rec(c, b*scale)
		}
		r := rl.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Sliding}
		before := s.clone()
		d := s.check(now, r)
		allowed, count := slidingModel(p, c, e, scale, limit, hits)
		if d.Allowed != allowed || d.Count != count {
			t.Fatalf("%+v p=%d c=%d e=%d: got %+v, the exact model says allowed=%v count=%d", r, p, c, e, d, allowed, count)
		}
		if d.Remaining != max(0, limit-count) || d.ResetMS != scale-e {
			t.Fatalf("%+v: %+v", r, d)
		}
		checkRetry(t, before, now, r, d)
	})
}

func FuzzToken(f *testing.F) {
	f.Add(int64(1000), int64(0), int64(10), int64(1000), int64(10), int64(1))
	f.Add(int64(666), int64(2), int64(3), int64(1000), int64(3), int64(2))
	f.Add(int64(0), int64(2), int64(3), int64(1000), int64(3), int64(3))
	f.Add(rl.MaxScale, int64(0), rl.MaxLimit, rl.MaxScale, rl.MaxLimit, int64(1))
	f.Add(int64(400), int64(1), int64(3), int64(1000), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, ahead, num, den, scale, limit, hits int64) {
		scale = within(scale, 1, rl.MaxScale)
		limit = within(limit, 0, rl.MaxLimit)
		hits = within(hits, 0, rl.MaxHits)
		den = within(den, 1, rl.MaxLimit)
		num = within(num, 0, den-1)
		ahead = within(ahead, -scale, scale) // a TAT from the past up to full use
		now := int64(t0)
		s := newSim(t)
		s.recs[0] = *tat(now+ahead, num, den)
		r := rl.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Token}
		before := s.clone()
		d := s.check(now, r)
		if den == limit {
			g := gcraModel{tat: new(big.Rat).Add(rat(now+ahead), big.NewRat(num, den))}
			allowed, count, reset := g.check(now, scale, limit, hits)
			if d.Allowed != allowed || d.Count != count || d.ResetMS != reset {
				t.Fatalf("%+v TAT=%d+%d/%d: got %+v, the exact model says allowed=%v count=%d reset=%d",
					r, now+ahead, num, den, d, allowed, count, reset)
			}
		}
		if d.Remaining != max(0, limit-d.Count) || d.ResetMS < 0 {
			t.Fatalf("%+v: %+v", r, d)
		}
		checkRetry(t, before, now, r, d)
	})
}
