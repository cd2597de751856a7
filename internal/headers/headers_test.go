package headers_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

func collect(r rl.Request, d rl.Decision) map[string]string {
	got := map[string]string{}
	headers.Set(func(k, v string) { got[k] = v }, headers.PolicyName, r, d)
	return got
}

func TestSet(t *testing.T) {
	tests := []struct {
		name string
		r    rl.Request
		d    rl.Decision
		want map[string]string
	}{
		{
			name: "allowed, whole seconds",
			r:    rl.Request{ID: "u1", Scale: time.Minute, Limit: 10, Hits: 1},
			d:    rl.Decision{Allowed: true, Count: 3, Limit: 10, Remaining: 7, Reset: 42 * time.Second, Now: time.UnixMilli(1_700_000_000_000)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=10;w=60`,
				"RateLimit":             `"default";r=7;t=42`,
				"X-RateLimit-Limit":     "10",
				"X-RateLimit-Remaining": "7",
				"X-RateLimit-Reset":     "1700000042",
			},
		},
		{
			name: "allowed, fractions round up",
			r:    rl.Request{ID: "u1", Scale: 1500 * time.Millisecond, Limit: 3, Hits: 1},
			d:    rl.Decision{Allowed: true, Count: 1, Limit: 3, Remaining: 2, Reset: time.Millisecond, Now: time.UnixMilli(1_700_000_000_999)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=3;w=2`,
				"RateLimit":             `"default";r=2;t=1`,
				"X-RateLimit-Limit":     "3",
				"X-RateLimit-Remaining": "2",
				"X-RateLimit-Reset":     "1700000001",
			},
		},
		{
			name: "window shorter than a second is at least 1",
			r:    rl.Request{ID: "u1", Scale: time.Millisecond, Limit: 1, Hits: 1},
			d:    rl.Decision{Allowed: false, Count: 2, Limit: 1, Remaining: 0, Reset: time.Millisecond, RetryAfter: time.Millisecond, Now: time.UnixMilli(5)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=1;w=1`,
				"RateLimit":             `"default";r=0;t=1`,
				"X-RateLimit-Limit":     "1",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     "1",
				"Retry-After":           "1",
			},
		},
		{
			name: "denied: Retry-After rounds up",
			r:    rl.Request{ID: "u1", Scale: 30 * time.Second, Limit: 500, Hits: 1},
			d:    rl.Decision{Allowed: false, Count: 501, Limit: 500, Remaining: 0, Reset: 12001 * time.Millisecond, RetryAfter: 12001 * time.Millisecond, Now: time.UnixMilli(1_700_000_018_000)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=500;w=30`,
				"RateLimit":             `"default";r=0;t=13`,
				"X-RateLimit-Limit":     "500",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     "1700000031",
				"Retry-After":           "13",
			},
		},
		{
			name: "denied with zero retry still says at least 1",
			r:    rl.Request{ID: "u1", Scale: time.Second, Limit: 1, Hits: 1},
			d:    rl.Decision{Allowed: false, Count: 2, Limit: 1, Reset: 0, RetryAfter: 0, Now: time.UnixMilli(1000)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=1;w=1`,
				"RateLimit":             `"default";r=0;t=1`,
				"X-RateLimit-Limit":     "1",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     "2",
				"Retry-After":           "1",
			},
		},
		{
			// The sliding window's minute ends in 9 s, but the minute
			// before still weighs: the request may pass in 29 s. A client
			// that waited t= seconds must not be denied for it.
			name: "denied: t and X-RateLimit-Reset never before Retry-After",
			r:    rl.Request{ID: "u1", Scale: time.Minute, Limit: 3, Hits: 1, Algo: rl.Sliding},
			d:    rl.Decision{Allowed: false, Count: 3, Limit: 3, Reset: 8200 * time.Millisecond, RetryAfter: 28500 * time.Millisecond, Now: time.UnixMilli(1_700_000_051_800)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=3;w=60`,
				"RateLimit":             `"default";r=0;t=29`,
				"X-RateLimit-Limit":     "3",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     "1700000081",
				"Retry-After":           "29",
			},
		},
		{
			name: "allowed: t is the window's end",
			r:    rl.Request{ID: "u1", Scale: time.Minute, Limit: 3, Hits: 1, Algo: rl.Sliding},
			d:    rl.Decision{Allowed: true, Count: 2, Limit: 3, Remaining: 1, Reset: 8200 * time.Millisecond, Now: time.UnixMilli(1_700_000_051_800)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=3;w=60`,
				"RateLimit":             `"default";r=1;t=9`,
				"X-RateLimit-Limit":     "3",
				"X-RateLimit-Remaining": "1",
				"X-RateLimit-Reset":     "1700000060",
			},
		},
		{
			name: "largest bounds",
			r:    rl.Request{ID: "u1", Scale: check.MaxScale, Limit: check.MaxLimit, Hits: 1},
			d:    rl.Decision{Allowed: true, Count: 1, Limit: check.MaxLimit, Remaining: check.MaxLimit - 1, Reset: check.MaxScale, Now: time.UnixMilli(1_700_000_000_000)},
			want: map[string]string{
				"RateLimit-Policy":      `"default";q=4294967295;w=315360000`,
				"RateLimit":             `"default";r=4294967294;t=315360000`,
				"X-RateLimit-Limit":     "4294967295",
				"X-RateLimit-Remaining": "4294967294",
				"X-RateLimit-Reset":     "2015360000",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, collect(tt.r, tt.d))
		})
	}
}

func TestSetBytesMatchesSet(t *testing.T) {
	r := rl.Request{ID: "x", Scale: 2500 * time.Millisecond, Limit: 7, Hits: 2}
	d := rl.Decision{Allowed: false, Count: 8, Limit: 7, Reset: 1200 * time.Millisecond, RetryAfter: 2400 * time.Millisecond, Now: time.UnixMilli(1_700_000_000_100)}
	viaBytes := map[string]string{}
	buf := headers.SetBytes(func(k string, v []byte) { viaBytes[k] = string(v) }, nil, headers.PolicyName, r, d)
	assert.Equal(t, collect(r, d), viaBytes)
	assert.NotNil(t, buf, "SetBytes returns its buffer for reuse")
}

func TestSetBytesDoesNotAllocate(t *testing.T) {
	r := rl.Request{ID: "x", Scale: time.Minute, Limit: 100, Hits: 1}
	d := rl.Decision{Allowed: false, Count: 101, Limit: 100, Reset: 1200 * time.Millisecond, RetryAfter: 1200 * time.Millisecond, Now: time.UnixMilli(1_700_000_000_100)}
	buf := make([]byte, 0, 64)
	n := 0
	set := func(string, []byte) { n++ }
	allocs := testing.AllocsPerRun(100, func() { buf = headers.SetBytes(set, buf, headers.PolicyName, r, d) })
	assert.Zero(t, allocs)
	require.Positive(t, n)
}

func TestSetNetHTTPKeepsNames(t *testing.T) {
	h := http.Header{}
	headers.Set(h.Set, headers.PolicyName, rl.Request{Scale: time.Second, Limit: 1}, rl.Decision{Limit: 1, Reset: 500 * time.Millisecond, RetryAfter: 500 * time.Millisecond, Now: time.UnixMilli(1000)})
	// net/http canonicalises names; lookups are case-insensitive either way.
	assert.Equal(t, `"default";q=1;w=1`, h.Get("RateLimit-Policy"))
	assert.Equal(t, "1", h.Get("Retry-After"))
	assert.Len(t, h, 6)
}

func ExampleSet() {
	r := rl.Request{ID: "u1", Scale: time.Minute, Limit: 10, Hits: 1}
	d := rl.Decision{Allowed: false, Count: 11, Limit: 10, Remaining: 0, Reset: 41500 * time.Millisecond, RetryAfter: 41500 * time.Millisecond, Now: time.UnixMilli(1_700_000_000_000)}
	headers.Set(func(k, v string) { fmt.Printf("%s: %s\n", k, v) }, headers.PolicyName, r, d)
	// Output:
	// RateLimit-Policy: "default";q=10;w=60
	// RateLimit: "default";r=0;t=42
	// X-RateLimit-Limit: 10
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 1700000042
	// Retry-After: 42
}

var seedFlag = flag.Uint64("headers.seed", 20261125, "seed of TestResetNeverBeforeRetryAfter")

// TestResetNeverBeforeRetryAfter drives every algorithm with seeded random
// traffic on the embedded limiter and reads each denial's headers: the
// RateLimit item's t= and X-RateLimit-Reset never name an earlier moment
// than Retry-After does.
func TestResetNeverBeforeRetryAfter(t *testing.T) {
	t.Logf("seed %d (rerun with -headers.seed=%d)", *seedFlag, *seedFlag)
	rng := rand.New(rand.NewPCG(*seedFlag, 0x4ead))
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, Shards: 1})
	t.Cleanup(func() { lim.Close() })
	denials := map[rl.Algo]int{}
	for _, a := range check.Algos {
		for round := range 20 {
			scale := []int64{1000, 1500, 60_000, 3_600_000}[rng.IntN(4)]
			r := rl.Request{ID: fmt.Sprintf("%v-%d", a, round), Scale: time.Duration(scale) * time.Millisecond, Limit: 1 + rng.Int64N(5), Algo: a}
			for range 40 {
				clock.Advance(time.Duration(rng.Int64N(scale/4)) * time.Millisecond)
				r.Hits = 1 + rng.Int64N(2)
				d, err := lim.CheckRate(context.Background(), r)
				if errors.Is(err, rl.ErrInvalid) {
					break // an algorithm's own bound (a request field it needs)
				}
				require.NoError(t, err)
				h := collect(r, d)
				retry, ok := h["Retry-After"]
				if !ok {
					continue
				}
				denials[a]++
				ra, err := strconv.ParseInt(retry, 10, 64)
				require.NoError(t, err)
				var rem, tsec int64
				_, err = fmt.Sscanf(h["RateLimit"], `"default";r=%d;t=%d`, &rem, &tsec)
				require.NoError(t, err, h["RateLimit"])
				assert.GreaterOrEqual(t, tsec, ra, "%v: %+v: RateLimit %s, Retry-After %s", a, d, h["RateLimit"], retry)
				reset, err := strconv.ParseInt(h["X-RateLimit-Reset"], 10, 64)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, reset*1000, d.Now.Add(d.RetryAfter).UnixMilli(), "%v: %+v: X-RateLimit-Reset %d", a, d, reset)
			}
		}
	}
	for _, a := range check.Algos {
		t.Logf("%v: %d denials read", a, denials[a])
	}
	assert.Positive(t, denials[rl.Sliding], "the traffic reaches denials")
}
