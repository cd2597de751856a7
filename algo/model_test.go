package algo_test

import (
	"math/big"
	"testing"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
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

func (s *sim) check(now int64, r rl.Request) rl.Decision {
	s.t.Helper()
	var b int64
	if r.Algo != rl.Token {
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
