package algo_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// within maps any v into [lo, hi].
func within(v, lo, hi int64) int64 {
	return lo + int64(uint64(v)%uint64(hi-lo+1))
}

// checkRetry checks a denied decision's RetryAfterMS against the state in s:
// the same request passes at now+retry and fails 1 ms earlier.
func checkRetry(t *testing.T, s *sim, now int64, r millis.Request, d millis.Decision) {
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
	f.Add(check.MaxLimit, int64(0), int64(1), millis.MaxScale, check.MaxLimit, check.MaxHits)
	f.Add(int64(0), check.MaxLimit, int64(0), int64(1), check.MaxLimit, int64(1))
	f.Fuzz(func(t *testing.T, p, c, e, scale, limit, hits int64) {
		scale = within(scale, 1, millis.MaxScale)
		limit = within(limit, 0, check.MaxLimit)
		hits = within(hits, 0, check.MaxHits)
		p, c = within(p, 0, check.MaxLimit), within(c, 0, check.MaxLimit)
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
		r := millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Sliding}
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
	f.Add(millis.MaxScale, int64(0), check.MaxLimit, millis.MaxScale, check.MaxLimit, int64(1))
	f.Add(int64(400), int64(1), int64(3), int64(1000), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, ahead, num, den, scale, limit, hits int64) {
		scale = within(scale, 1, millis.MaxScale)
		limit = within(limit, 0, check.MaxLimit)
		hits = within(hits, 0, check.MaxHits)
		den = within(den, 1, check.MaxLimit)
		num = within(num, 0, den-1)
		ahead = within(ahead, -scale, scale) // a TAT from the past up to full use
		now := int64(t0)
		s := newSim(t)
		s.recs[0] = *tat(now+ahead, num, den)
		r := millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Token}
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

func FuzzSlices(f *testing.F) {
	f.Add(int64(3_600_000), int64(10), int64(1), int64(60), int64(30_000), []byte{4, 0, 0, 3, 0, 2})
	f.Add(int64(1000), int64(3), int64(3), int64(2), int64(0), []byte{1, 1, 1})
	f.Add(millis.MaxScale, check.MaxLimit, check.MaxHits, int64(600), int64(-1), []byte{255, 255})
	f.Add(int64(1), int64(0), int64(0), int64(600), int64(0), []byte{})
	f.Fuzz(func(t *testing.T, scale, limit, hits, n, e int64, counts []byte) {
		scale = within(scale, 1, millis.MaxScale)
		limit = within(limit, 0, check.MaxLimit)
		hits = within(hits, 0, check.MaxHits)
		n = within(n, check.MinSlices, check.MaxSlices)
		r := millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Slices, Slices: n}
		w := algo.SliceWidth(scale, n)
		k := algo.Bucket(t0, w)
		now := k*w + within(e, 0, w-1)
		// One counter a byte, from a slice before the window up to the
		// current one; zeros are slices with no record.
		var list []algo.Slice
		var sum, oldest int64 = 0, -1
		for i, c := range counts[:min(len(counts), int(n)+2)] {
			num := k - int64(len(counts[:min(len(counts), int(n)+2)])) + 1 + int64(i)
			if c == 0 {
				continue
			}
			list = append(list, algo.Slice{Num: num, Hits: int64(c)})
			if num > k-n {
				sum += int64(c)
				if oldest < 0 {
					oldest = num
				}
			}
		}
		d := algo.SlicesCheck(list, now, r)
		allowed := sum+hits <= limit
		count := sum
		if allowed {
			count += hits
			if oldest < 0 && hits > 0 {
				oldest = k
			}
		}
		var reset int64
		if oldest >= 0 {
			reset = (oldest+n)*w - now
		}
		want := millis.Decision{Allowed: allowed, Count: count, Limit: limit, Remaining: max(0, limit-count), ResetMS: reset, Now: now}
		if allowed {
			require.Equal(t, want, d, "%+v %v", r, list)
			fast, ok := slicesFast(uint64(sum), max(oldest, 0), now, r)
			require.True(t, ok)
			require.Equal(t, d, fast)
			return
		}
		want.RetryAfterMS = d.RetryAfterMS
		require.Equal(t, want, d, "%+v %v", r, list)
		_, ok := slicesFast(uint64(sum), max(oldest, 0), now, r)
		require.False(t, ok)
		if hits > limit {
			require.Equal(t, max(reset, 1), d.RetryAfterMS)
			return
		}
		// No traffic in between: the counters stay as they are.
		require.True(t, algo.SlicesCheck(list, now+d.RetryAfterMS, r).Allowed, "passes after %d", d.RetryAfterMS)
		require.False(t, algo.SlicesCheck(list, now+d.RetryAfterMS-1, r).Allowed, "fails 1 ms before")
	})
}

func FuzzLeaky(f *testing.F) {
	f.Add(int64(0), int64(0), int64(5), int64(1000), int64(5), int64(1), int64(3), int64(0))
	f.Add(int64(600), int64(0), int64(5), int64(1000), int64(5), int64(1), int64(3), int64(0))
	f.Add(int64(666), int64(2), int64(3), int64(1000), int64(3), int64(1), int64(2), int64(600))
	f.Add(millis.MaxScale, int64(0), check.MaxLimit, millis.MaxScale, check.MaxLimit, int64(1), check.MaxQueue, millis.MaxScale)
	f.Add(int64(400), int64(1), int64(3), int64(1000), int64(0), int64(1), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, ahead, num, den, scale, limit, hits, queue, maxDelay int64) {
		scale = within(scale, 1, millis.MaxScale)
		limit = within(limit, 0, check.MaxLimit)
		hits = within(hits, 0, check.MaxHits)
		queue = within(queue, 0, check.MaxQueue)
		maxDelay = within(maxDelay, 0, millis.MaxScale)
		den = within(den, 1, check.MaxLimit)
		num = within(num, 0, den-1)
		ahead = within(ahead, -scale, min(scale*(queue+2), 1<<50))
		now := int64(t0)
		s := newSim(t)
		s.recs[0] = *tat(now+ahead, num, den)
		r := millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Leaky, Queue: queue, MaxDelayMS: maxDelay}
		before := s.clone()
		d := s.check(now, r)
		if den == limit {
			g := leakyModel{tat: new(big.Rat).Add(rat(now+ahead), big.NewRat(num, den))}
			allowed, count, reset, delay := g.check(now, r)
			if d.Allowed != allowed || d.Count != count || d.ResetMS != reset || d.DelayMS != delay {
				t.Fatalf("%+v TAT=%d+%d/%d: got %+v, the exact model says allowed=%v count=%d reset=%d delay=%d",
					r, now+ahead, num, den, d, allowed, count, reset, delay)
			}
		}
		if d.Remaining != max(0, limit-d.Count) || d.ResetMS < 0 || d.DelayMS < 0 || (!d.Allowed && d.DelayMS != 0) {
			t.Fatalf("%+v: %+v", r, d)
		}
		if maxDelay > 0 && d.DelayMS > maxDelay {
			t.Fatalf("%+v: a delay of %d past the bound", r, d.DelayMS)
		}
		checkRetry(t, before, now, r, d)
	})
}
