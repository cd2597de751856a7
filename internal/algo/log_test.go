package algo_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// naiveLog is the reference: one timestamp per allowed hit.
type naiveLog struct{ ts []int64 }

func (n *naiveLog) check(now int64, r millis.Request) millis.Decision {
	if len(n.ts) > 0 && now < n.ts[len(n.ts)-1] {
		now = n.ts[len(n.ts)-1]
	}
	i := 0
	for i < len(n.ts) && n.ts[i] <= now-r.Scale {
		i++
	}
	n.ts = n.ts[i:]
	total := int64(len(n.ts))
	allowed := total+r.Hits <= r.Limit
	if allowed {
		for range r.Hits {
			n.ts = append(n.ts, now)
		}
		total += r.Hits
	}
	d := millis.Decision{Allowed: allowed, Count: total, Limit: r.Limit, Remaining: max(0, r.Limit-total), Now: now}
	if len(n.ts) > 0 {
		d.ResetMS = n.ts[0] + r.Scale - now
	}
	if !allowed {
		if r.Hits > r.Limit {
			d.RetryAfterMS = max(d.ResetMS, 1)
		} else {
			need := total + r.Hits - r.Limit
			d.RetryAfterMS = max(n.ts[need-1]+r.Scale-now, 1)
		}
	}
	return d
}

func logReq(scale, limit, hits int64) millis.Request {
	return millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits}
}

func TestLogRolls(t *testing.T) {
	var l algo.Log
	r := logReq(1000, 2, 1)
	assert.True(t, algo.LogCheck(&l, t0, r).Allowed)
	assert.True(t, algo.LogCheck(&l, t0+400, r).Allowed)
	d := algo.LogCheck(&l, t0+999, r)
	assert.False(t, d.Allowed, "both hits still within (now-1000, now]")
	assert.Equal(t, int64(1), d.RetryAfterMS, "the first hit leaves exactly 1000 ms after it was allowed")
	assert.Equal(t, int64(1), d.ResetMS)
	d = algo.LogCheck(&l, t0+1000, r)
	assert.True(t, d.Allowed, "the first hit has left at t0+1000")
	assert.Equal(t, int64(2), d.Count)
	assert.Equal(t, int64(0), d.Remaining)
	assert.Equal(t, int64(400), d.ResetMS, "the oldest hit, at t0+400, leaves at t0+1400")
}

func TestLogNoBoundaryBurst(t *testing.T) {
	// A fixed window lets 2*limit through around a window's edge; the log
	// lets exactly limit through in any scale-long span.
	var l algo.Log
	r := logReq(1000, 10, 1)
	allowed := 0
	for ms := int64(900); ms < 1100; ms++ {
		if algo.LogCheck(&l, t0+ms, r).Allowed {
			allowed++
		}
	}
	assert.Equal(t, 10, allowed)
}

func TestLogHitsAndPeek(t *testing.T) {
	var l algo.Log
	d := algo.LogCheck(&l, t0, logReq(1000, 5, 3))
	require.True(t, d.Allowed)
	assert.Equal(t, int64(3), d.Count)

	d = algo.LogCheck(&l, t0+10, logReq(1000, 5, 3))
	assert.False(t, d.Allowed, "3+3 > 5")
	assert.Equal(t, int64(3), d.Count, "a denied check is not remembered")
	assert.Equal(t, int64(990), d.RetryAfterMS)

	d = algo.LogCheck(&l, t0+10, logReq(1000, 5, 0))
	assert.True(t, d.Allowed, "a peek")
	assert.Equal(t, int64(2), d.Remaining)
	assert.Equal(t, uint64(3), l.Hits(), "a peek changes nothing")

	d = algo.LogCheck(&l, t0+10, logReq(1000, 5, 6))
	assert.False(t, d.Allowed, "hits above the limit never pass")
	assert.Equal(t, d.ResetMS, d.RetryAfterMS)

	d = algo.LogCheck(&l, t0+20, logReq(1000, 0, 1))
	assert.False(t, d.Allowed, "limit 0 denies")
	assert.Equal(t, int64(980), d.RetryAfterMS)
}

func TestLogClockBack(t *testing.T) {
	var l algo.Log
	r := logReq(1000, 1, 1)
	require.True(t, algo.LogCheck(&l, t0+500, r).Allowed)
	d := algo.LogCheck(&l, t0-10_000, r)
	assert.False(t, d.Allowed, "a clock that stepped back does not rewind the log")
	assert.Equal(t, int64(t0+500), d.Now)
	assert.Equal(t, int64(1000), d.RetryAfterMS)
}

func TestLogExpired(t *testing.T) {
	rec := algo.Record{Created: t0, Modified: t0 + 300} // a Log record: Modified is its newest hit
	assert.False(t, algo.Expired(rl.Log, 1000, rec, t0+1299), "the newest hit is still in the window")
	assert.True(t, algo.Expired(rl.Log, 1000, rec, t0+1300), "the newest hit has left: no check can read the log again")
}

func TestLogCompact(t *testing.T) {
	// Hits 10 ms apart take two bytes each in the ring.
	var l algo.Log
	r := logReq(60_000, 1000, 1)
	for i := range int64(1000) {
		require.True(t, algo.LogCheck(&l, t0+10*i, r).Allowed)
	}
	assert.LessOrEqual(t, l.Bytes(), 2*1000*2, "about two bytes an entry, with append's slack")
	t.Logf("limit 1000, hits 10 ms apart: %d bytes in the ring", l.Bytes())
}

func TestLogBinaryRoundTrip(t *testing.T) {
	var l algo.Log
	r := logReq(1000, 100, 1)
	for i := range int64(50) {
		algo.LogCheck(&l, t0+i*7, r)
	}
	b, err := l.AppendBinary(nil)
	require.NoError(t, err)
	var back algo.Log
	require.NoError(t, back.UnmarshalBinary(b))
	for i := range int64(300) {
		now := t0 + 350 + i*5
		assert.Equal(t, algo.LogCheck(&l, now, r), algo.LogCheck(&back, now, r))
	}
	for _, bad := range [][]byte{nil, {0}, {2, 0}, b[:len(b)-1], append(slices.Clone(b), 0)} {
		assert.ErrorIs(t, new(algo.Log).UnmarshalBinary(bad), algo.ErrLogCorrupt, "%x", bad)
	}
}

// TestLogAgainstReference replays seeded random traffic through the log and
// the one-timestamp-per-hit reference.
func TestLogAgainstReference(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	for range 200 {
		scale := 1 + rnd.Int64N(2000)
		var l algo.Log
		var n naiveLog
		now := int64(t0)
		for range 300 {
			now += rnd.Int64N(scale/3 + 2)
			if rnd.IntN(20) == 0 {
				now -= rnd.Int64N(100) // a clock that steps back
			}
			r := logReq(scale, rnd.Int64N(40), rnd.Int64N(4))
			want := n.check(now, r)
			got := algo.LogCheck(&l, now, r)
			require.Equal(t, want, got, "seed %d scale %d now %d %+v", seed, scale, now, r)
		}
	}
}

func FuzzLog(f *testing.F) {
	f.Add(int64(1000), []byte{0, 1, 1, 5, 200, 3, 0, 2, 2})
	f.Add(int64(1), []byte{1, 1, 1, 1, 1, 1})
	f.Add(int64(60000), []byte{255, 255, 3, 0, 0, 10, 128, 7, 1})
	f.Fuzz(func(t *testing.T, scale int64, ops []byte) {
		scale = within(scale, 1, millis.MaxScale)
		var l algo.Log
		var n naiveLog
		now := int64(t0)
		for i := 0; i+2 < len(ops); i += 3 {
			now += int64(ops[i]) * int64(ops[i]) // steps of 0 to 65025 ms
			r := logReq(scale, int64(ops[i+1]%64), int64(ops[i+2]%8))
			want := n.check(now, r)
			got := algo.LogCheck(&l, now, r)
			if want != got {
				t.Fatalf("op %d now %d %+v: log %+v, reference %+v", i/3, now, r, got, want)
			}
			b, err := l.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			var back algo.Log
			if err := back.UnmarshalBinary(b); err != nil {
				t.Fatalf("op %d: a marshalled log does not read back: %v", i/3, err)
			}
			l = back
		}
	})
}

func BenchmarkLogCheck(b *testing.B) {
	for _, limit := range []int64{10, 100, 1000} {
		b.Run("limit="+itoa(limit), func(b *testing.B) {
			b.ReportAllocs()
			var l algo.Log
			r := logReq(60_000, limit, 1)
			now := int64(t0)
			step := 60_000 / limit // the log stays full: each hit replaces the oldest
			for b.Loop() {
				now += step
				algo.LogCheck(&l, now, r)
			}
			b.ReportMetric(float64(l.Bytes()), "ring-bytes")
		})
	}
}

func itoa(v int64) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		if v /= 10; v == 0 {
			return string(b)
		}
	}
}
