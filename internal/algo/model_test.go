package algo_test

import (
	"cmp"
	"math/big"
	"slices"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// sim is one id's records, kept as the store keeps them: by bucket number
// (0 for Token), the previous bucket handed to Sliding.
type sim struct {
	t    *testing.T
	recs map[int64]algo.Record
}

func newSim(t *testing.T) *sim { return &sim{t: t, recs: map[int64]algo.Record{}} }

func (s *sim) clone() *sim {
	c := newSim(s.t)
	for k, v := range s.recs {
		c.recs[k] = v
	}
	return c
}

func (s *sim) check(now int64, r millis.Request) millis.Decision {
	s.t.Helper()
	if r.Algo == rl.Slices {
		return s.checkSlices(now, r)
	}
	var b int64
	if r.Algo != rl.Token && r.Algo != rl.Leaky {
		b = algo.Bucket(now, r.Scale)
	}
	cur, ok := s.recs[b]
	var prev algo.Record
	var prevOK bool
	if r.Algo == rl.Sliding {
		prev, prevOK = s.recs[b-1]
	}
	d, next, write := algo.Check(cur, ok, prev, prevOK, now, r)
	if write {
		if got := algo.BucketOf(r.Algo, r.Scale, next); got != b {
			s.t.Fatalf("record %+v is in bucket %d, stored under %d", next, got, b)
		}
		s.recs[b] = next
	}
	return d
}

// checkSlices keeps a Slices limit's records by slice number, one slice
// count per sim, as the store does, and decides with SlicesCheck.
func (s *sim) checkSlices(now int64, r millis.Request) millis.Decision {
	s.t.Helper()
	var list []algo.Slice
	for num, rec := range s.recs {
		_, hits := algo.SlicesOfRecord(rec)
		list = append(list, algo.Slice{Num: num, Hits: hits})
	}
	slices.SortFunc(list, func(a, b algo.Slice) int { return cmp.Compare(a.Num, b.Num) })
	d := algo.SlicesCheck(list, now, r)
	if d.Allowed && r.Hits > 0 {
		n, _, k := algo.SliceOf(now, r)
		rec, ok := s.recs[k]
		_, hits := algo.SlicesOfRecord(rec)
		if !ok {
			rec.Created = now
		}
		rec = algo.SlicesRecord(n, hits+r.Hits, rec.Created, now)
		if got := algo.BucketOf(rl.Slices, r.Scale, rec); got != k {
			s.t.Fatalf("record %+v is in slice %d, stored under %d", rec, got, k)
		}
		s.recs[k] = rec
	}
	return d
}

func rat(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

// ceilRat returns ceil(x) for x >= 0.
func ceilRat(x *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// slidingModel is the sliding formula of docs/algorithms.md in exact rationals: the estimate
// p*(1-e/S)+c, allowed iff est+hits <= limit, the count after the decision
// rounded up.
func slidingModel(p, c, e, scale, limit, hits int64) (allowed bool, count int64) {
	est := new(big.Rat).Mul(rat(p), big.NewRat(scale-e, scale))
	est.Add(est, rat(c))
	after := new(big.Rat).Add(est, rat(hits))
	allowed = after.Cmp(rat(limit)) <= 0
	if allowed {
		est = after
	}
	return allowed, ceilRat(est)
}

// gcraModel is GCRA with a rational theoretical arrival time.
type gcraModel struct {
	tat *big.Rat // nil: fresh
}

// check decides hits at now for limit per scale, burst limit, and returns
// the decision's allowed, count and reset.
func (g *gcraModel) check(now, scale, limit, hits int64) (allowed bool, count, reset int64) {
	base := rat(now)
	if g.tat != nil && g.tat.Cmp(base) > 0 {
		base = new(big.Rat).Set(g.tat)
	}
	dist := new(big.Rat).Sub(base, rat(now)) // D: how far from full, ms
	if limit == 0 {
		allowed = hits == 0
	} else {
		cost := new(big.Rat).Mul(rat(hits), big.NewRat(scale, limit))
		allowed = new(big.Rat).Add(dist, cost).Cmp(rat(scale)) <= 0
		if allowed && hits > 0 {
			base.Add(base, cost)
			g.tat = base
			dist = new(big.Rat).Sub(base, rat(now))
		}
	}
	// count = limit - floor((S-D)*limit/S) = ceil(D*limit/S)
	used := new(big.Rat).Mul(dist, big.NewRat(limit, scale))
	return allowed, ceilRat(used), ceilRat(dist)
}

// slicesModel is the sliding window counters by brute force: every allowed
// hit with its time, summed by the slice its time falls in.
type slicesModel struct {
	hits []struct{ at, n int64 }
}

// check decides r at now and returns the decision's allowed, count and
// reset.
func (m *slicesModel) check(now int64, r millis.Request) (allowed bool, count, reset int64) {
	n := r.SlicesOrDefault()
	w := (r.Scale + n - 1) / n
	k := floorDiv(now, w)
	oldest := int64(-1)
	for _, h := range m.hits {
		if s := floorDiv(h.at, w); s > k-n && s <= k {
			count += h.n
			if oldest < 0 {
				oldest = s
			}
		}
	}
	allowed = count+r.Hits <= r.Limit
	if allowed && r.Hits > 0 {
		m.hits = append(m.hits, struct{ at, n int64 }{now, r.Hits})
		count += r.Hits
		if oldest < 0 {
			oldest = k
		}
	}
	if oldest >= 0 {
		reset = (oldest+n)*w - now
	}
	return allowed, count, reset
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// leakyModel is the leaky bucket as a queue with a rational TAT: a check
// waits D = max(TAT, now) - now, is let in iff D <= queue*T (and the bound
// on the delay), and moves the TAT by hits*T.
type leakyModel struct {
	tat *big.Rat // nil: empty
}

// check returns the decision's allowed, count, reset and delay.
func (g *leakyModel) check(now int64, r millis.Request) (allowed bool, count, reset, delay int64) {
	base := rat(now)
	if g.tat != nil && g.tat.Cmp(base) > 0 {
		base = new(big.Rat).Set(g.tat)
	}
	dist := new(big.Rat).Sub(base, rat(now))
	if r.Limit == 0 {
		allowed = r.Hits == 0
	} else {
		room := new(big.Rat).Mul(rat(r.Queue), big.NewRat(r.Scale, r.Limit))
		if r.MaxDelayMS > 0 && rat(r.MaxDelayMS).Cmp(room) < 0 {
			room = rat(r.MaxDelayMS)
		}
		allowed = r.Hits <= r.Limit && dist.Cmp(room) <= 0
		if allowed && r.Hits > 0 {
			delay = ceilRat(dist)
			base.Add(base, new(big.Rat).Mul(rat(r.Hits), big.NewRat(r.Scale, r.Limit)))
			g.tat = base
			dist = new(big.Rat).Sub(base, rat(now))
		}
	}
	used := new(big.Rat).Mul(dist, big.NewRat(r.Limit, r.Scale))
	return allowed, ceilRat(used), ceilRat(dist), delay
}
