package algo_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func slicesReq(scale, limit, hits, n int64) millis.Request {
	return millis.Request{ID: "u", Scale: scale, Limit: limit, Hits: hits, Algo: rl.Slices, Slices: n}
}

// slicesFast is algo.SlicesFast with the slice it is given worked out from
// now, as the store does.
func slicesFast(sum uint64, oldest, now int64, r millis.Request) (millis.Decision, bool) {
	n, w, k := algo.SliceOf(now, r)
	return algo.SlicesFast(sum, oldest, n, w, k, now, r)
}

func TestSliceWidth(t *testing.T) {
	for _, tt := range []struct{ scale, n, w int64 }{
		{3_600_000, 60, 60_000}, // Figma's hourly limit in minutes
		{60_000, 60, 1000},
		{1000, 60, 17}, // the window is 1020 ms: never shorter than the scale
		{1000, 600, 2},
		{10, 60, 1}, // fewer ms than slices: the window is 60 ms
		{1, 2, 1},
		{millis.MaxScale, 600, millis.MaxScale / 600},
	} {
		assert.Equal(t, tt.w, algo.SliceWidth(tt.scale, tt.n), "%+v", tt)
		assert.GreaterOrEqual(t, tt.n*tt.w, tt.scale, "the window covers the scale")
		assert.Less(t, tt.n*tt.w-tt.scale, tt.n, "by less than one ms a slice")
	}
}

func TestSlicesRecordRoundTrip(t *testing.T) {
	for _, tt := range []struct{ n, hits int64 }{{2, 0}, {60, 1}, {600, check.MaxLimit}} {
		rec := algo.SlicesRecord(tt.n, tt.hits, t0, t0+5)
		n, hits := algo.SlicesOfRecord(rec)
		assert.Equal(t, tt.n, n)
		assert.Equal(t, tt.hits, hits)
		assert.Equal(t, algo.Bucket(t0, algo.SliceWidth(60_000, tt.n)), algo.BucketOf(rl.Slices, 60_000, rec))
	}
}

func TestSlicesCheck(t *testing.T) {
	// An hourly limit of 10 in minute slices: slice k is minute k.
	const h, m = 3_600_000, 60_000
	k := algo.Bucket(t0, m)
	at := func(slice, ms int64) int64 { return slice*m + ms }
	tests := []struct {
		name   string
		slices []algo.Slice
		now    int64
		r      millis.Request
		want   millis.Decision
	}{
		{"an empty window", nil, at(k, 500), slicesReq(h, 10, 1, 60),
			millis.Decision{Allowed: true, Count: 1, Limit: 10, Remaining: 9, ResetMS: h - 500}},
		{"hits across the hour add up", []algo.Slice{{k - 59, 4}, {k - 30, 3}, {k, 2}}, at(k, 0), slicesReq(h, 10, 1, 60),
			millis.Decision{Allowed: true, Count: 10, Limit: 10, ResetMS: m}},
		{"full: retry when the oldest slice leaves", []algo.Slice{{k - 59, 4}, {k - 30, 3}, {k, 3}}, at(k, 100), slicesReq(h, 10, 1, 60),
			millis.Decision{Count: 10, Limit: 10, ResetMS: m - 100, RetryAfterMS: m - 100}},
		{"five more need two slices gone", []algo.Slice{{k - 59, 4}, {k - 30, 3}, {k, 3}}, at(k, 100), slicesReq(h, 10, 5, 60),
			millis.Decision{Count: 10, Limit: 10, ResetMS: m - 100, RetryAfterMS: 30*m - 100}},
		{"a slice 60 back has left", []algo.Slice{{k - 60, 10}, {k - 1, 1}}, at(k, 0), slicesReq(h, 10, 9, 60),
			millis.Decision{Allowed: true, Count: 10, Limit: 10, ResetMS: 59 * m}},
		{"slices after now are not read", []algo.Slice{{k + 1, 10}}, at(k, 0), slicesReq(h, 10, 10, 60),
			millis.Decision{Allowed: true, Count: 10, Limit: 10, ResetMS: h}},
		{"a peek over the limit is denied", []algo.Slice{{k - 2, 8}}, at(k, 0), slicesReq(h, 5, 0, 60),
			millis.Decision{Count: 8, Limit: 5, ResetMS: 58 * m, RetryAfterMS: 58 * m}},
		{"a peek of an empty window", nil, at(k, 0), slicesReq(h, 5, 0, 60),
			millis.Decision{Allowed: true, Limit: 5, Remaining: 5}},
		{"hits above the limit never pass", nil, at(k, 7), slicesReq(h, 5, 6, 60),
			millis.Decision{Limit: 5, Remaining: 5, RetryAfterMS: 1}},
		{"limit 0", []algo.Slice{}, at(k, 7), slicesReq(h, 0, 1, 60),
			millis.Decision{Limit: 0, RetryAfterMS: 1}},
		{"the default is 60 slices", []algo.Slice{{k - 59, 1}}, at(k, 0), slicesReq(h, 1, 1, 0),
			millis.Decision{Count: 1, Limit: 1, ResetMS: m, RetryAfterMS: m}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Now = tt.now
			assert.Equal(t, tt.want, algo.SlicesCheck(tt.slices, tt.now, tt.r))
		})
	}
}

// TestSlicesFastAgrees: with a summary of the window, an allowed check is
// decided as SlicesCheck decides it, and a denied one is left to it.
func TestSlicesFastAgrees(t *testing.T) {
	rng := newRand(t)
	agreed := 0
	for trial := 0; trial < 20000; trial++ {
		n := []int64{2, 3, 10, 60, 600}[rng.IntN(5)]
		scale := []int64{1, 7, 1000, 60_000, 3_600_000, millis.MaxScale}[rng.IntN(6)]
		r := slicesReq(scale, rng.Int64N(40), rng.Int64N(8), n)
		now := t0 + rng.Int64N(10*scale)
		_, _, k := algo.SliceOf(now, r)
		var list []algo.Slice
		var sum uint64
		oldest := int64(0)
		for j := k - n - 2; j <= k; j++ {
			if rng.IntN(3) == 0 {
				c := rng.Int64N(6)
				list = append(list, algo.Slice{Num: j, Hits: c})
				if j > k-n && c > 0 {
					if sum == 0 {
						oldest = j
					}
					sum += uint64(c)
				}
			}
		}
		want := algo.SlicesCheck(list, now, r)
		got, ok := slicesFast(sum, oldest, now, r)
		require.Equal(t, want.Allowed, ok, "trial %d: %+v %v", trial, r, list)
		if ok {
			agreed++
			require.Equal(t, want, got, "trial %d: %+v %v", trial, r, list)
		}
	}
	assert.Greater(t, agreed, 5000)
}

// TestPropertySlicesModel: SlicesCheck over the records a store would keep
// decides as the brute-force model over every allowed hit, and never lets
// more than the limit into the slices of any window.
func TestPropertySlicesModel(t *testing.T) {
	rng := newRand(t)
	for trial := 0; trial < 400; trial++ {
		n := []int64{2, 3, 10, 60, 1 + rng.Int64N(600)}[rng.IntN(5)]
		n = max(n, 2)
		scale := []int64{1, 10, 1000, 60_000, 1 + rng.Int64N(5000)}[rng.IntN(5)]
		limit := []int64{0, 1, 3, 1 + rng.Int64N(50)}[rng.IntN(4)]
		s := newSim(t)
		var m slicesModel
		now := t0 + rng.Int64N(scale)
		w := algo.SliceWidth(scale, n)
		perSlice := map[int64]int64{}
		for range 300 {
			now += randStep(rng, scale)
			r := slicesReq(scale, limit, randHits(rng, limit), n)
			d := s.check(now, r)
			allowed, count, reset := m.check(now, r)
			require.Equal(t, allowed, d.Allowed, "trial %d: %+v at %d", trial, r, now)
			require.Equal(t, count, d.Count, "trial %d: %+v", trial, r)
			require.Equal(t, reset, d.ResetMS, "trial %d: %+v", trial, r)
			require.Equal(t, max(0, limit-count), d.Remaining)
			require.Zero(t, d.DelayMS)
			if d.Allowed {
				perSlice[algo.Bucket(now, w)] += r.Hits
			}
		}
		for k := range perSlice {
			var sum int64
			for j := k - n + 1; j <= k; j++ {
				sum += perSlice[j]
			}
			require.LessOrEqual(t, sum, limit, "trial %d: slices %d..%d", trial, k-n+1, k)
		}
	}
}

// Figma's limit: 10 an hour, counted in minutes. Four hits at minute 0,
// three at minute 30 and three at minute 59 fill it; the next hit waits
// for minute 0 to leave, at minute 60.
func ExampleSlicesCheck() {
	const m, start = 60_000, 1_700_000_040_000 - 1_700_000_040_000%3_600_000
	r := millis.Request{ID: "u", Scale: 3_600_000, Limit: 10, Hits: 1, Algo: rl.Slices, Slices: 60}
	k := algo.Bucket(start, m)
	window := []algo.Slice{{Num: k, Hits: 4}, {Num: k + 30, Hits: 3}, {Num: k + 59, Hits: 3}}
	d := algo.SlicesCheck(window, start+59*m+30_000, r)
	fmt.Println(d.Allowed, d.Count, d.RetryAfterMS)
	d = algo.SlicesCheck(window, start+60*m, r)
	fmt.Println(d.Allowed, d.Count, d.ResetMS)
	// Output:
	// false 10 30000
	// true 7 1800000
}
