package redisbackend

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// slicesOf reads the slices record at key, of n slices: base, m, cur and
// the n-1 older slices, oldest first.
func slicesOf(t *testing.T, b *Backend, key string, n int64) (base, m, cur int64, older []int64) {
	t.Helper()
	s, err := b.conn().Do(context.Background(), b.conn().B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	require.Len(t, s, int(slicesHeader+4*(n-1)), "a header and n-1 slices")
	v, ok := unpack(s[:slicesHeader], 3)
	require.True(t, ok)
	for i := range n - 1 {
		older = append(older, int64(binary.LittleEndian.Uint32([]byte(s[slicesHeader+4*i:]))))
	}
	return v[0], v[1], v[2], older
}

// TestSlicesRecord: one string per (id, scale, slice count) under the id's
// hash tag, of a fixed size whatever the hits; base, the window's running
// sum, always equals the sum of the older slices it keeps, cur is the
// newest slice's, so that a check reads no slice but those that left; the
// record lives until its newest slice leaves the window. Seeded random
// checks with the clock moving by less than a slice, by slices, and by
// more than a window.
func TestSlicesRecord(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 1))
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.T0)
	b, err := newBackend(Config{URL: srv.URL(), Prefix: "sr", Clock: clock.Now, Timeout: 5 * time.Second, DenyCache: -1}, 0)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	const n, scale = 10, 10_000 // slices of 1 s
	r := millis.Request{ID: "u{1}", Scale: scale, Limit: 50, Algo: rl.Slices, Slices: n}
	key := checkCall(b, r, 0, 0, -1).key
	assert.Equal(t, "sr:{dXsxfQ}:n:10000:10", key)
	var list []algo.Slice // the reference: the allowed hits per slice
	for i := range 400 {
		switch rnd.IntN(6) {
		case 0:
			clock.Advance(millis.Duration(rnd.Int64N(1000)))
		case 1:
			clock.Advance(millis.Duration(1000 * (1 + rnd.Int64N(3))))
		case 2:
			if rnd.IntN(10) == 0 {
				clock.Advance(millis.Duration(scale + rnd.Int64N(3*scale)))
			}
		}
		r.Hits = rnd.Int64N(8)
		r.Peek = r.Hits == 0
		d, err := b.checkMS(ctx, r)
		require.NoError(t, err)
		want := algo.SlicesCheck(list, clock.Now().UnixMilli(), r)
		require.Equal(t, want, d, "check %d", i)
		_, w, k := algo.SliceOf(clock.Now().UnixMilli(), r)
		if d.Allowed && r.Hits > 0 {
			if len(list) > 0 && list[len(list)-1].Num == k {
				list[len(list)-1].Hits += r.Hits
			} else {
				list = append(list, algo.Slice{Num: k, Hits: r.Hits})
			}
		}
		if !exists(t, b, key) {
			continue
		}
		base, m, cur, older := slicesOf(t, b, key, n)
		var sum int64
		for _, h := range older {
			sum += h
		}
		require.Equal(t, sum, base, "check %d: base is the older slices' sum", i)
		// The record holds the slices of the window at m, as the
		// reference does.
		km := algo.Bucket(m, w)
		for j, h := range append(older, cur) {
			num := km - (n - 1) + int64(j)
			var ref int64
			for _, x := range list {
				if x.Num == num {
					ref = x.Hits
				}
			}
			require.Equal(t, ref, h, "check %d: slice %d", i, num)
		}
		pttl, err := b.conn().Do(ctx, b.conn().B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		// Set at the last change (on the test's clock; Redis's runs on in
		// real time, a little): until the newest slice leaves the window.
		end := (km + n) * w
		assert.InDelta(t, end-m+clockSlack.Milliseconds(), pttl, 1000, "check %d: the TTL", i)
	}
}

// TestSlicesNeverRewind: a clock behind the last change decides at that
// change: the window does not slide back, nothing is lost. Then the admin
// API lists the window's slices and Reset deletes the record.
func TestSlicesNeverRewind(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.T0)
	b, err := New(Config{URL: srv.URL(), Prefix: "sl", Clock: clock.Now, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	r := millis.Request{ID: "u{1}", Scale: 10_000, Limit: 1000, Hits: 1, Algo: rl.Slices, Slices: 10} // 1 s slices
	var last int64
	for i := range 25 {
		_, err := b.checkMS(ctx, r)
		require.NoError(t, err)
		last = clock.Now().UnixMilli()
		clock.Advance(millis.Duration(500 + int64(i%2)*500))
	}
	peek := r
	peek.Hits, peek.Peek = 0, true
	want, err := b.checkMS(ctx, peek)
	require.NoError(t, err)
	behind := limitertest.NewClock(clock.Now().Add(-time.Minute))
	b2, err := New(Config{URL: srv.URL(), Prefix: "sl", Clock: behind.Now, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b2.Close()
	got, err := b2.checkMS(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, want.Count+1, got.Count, "counted on the window of the last change")
	assert.Equal(t, last, got.Now, "decided at the last change, not a minute back")

	bs, err := b.Buckets(ctx, r.ID)
	require.NoError(t, err)
	require.NotEmpty(t, bs)
	var sum int64
	for _, x := range bs {
		assert.Equal(t, rl.Slices, x.Algo)
		assert.Equal(t, int64(10), x.Slices)
		sum += x.Count
	}
	assert.Equal(t, got.Count, sum, "the listing's slices are the window's")
	n, err := b.Reset(ctx, r.ID, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, len(bs), n)
	assert.False(t, exists(t, b, checkCall(b, r, 0, 0, -1).key))
	bs, err = b.Buckets(ctx, r.ID)
	require.NoError(t, err)
	assert.Empty(t, bs)
}

// TestCheapScripts counts what each script asks of Redis per check, from
// Redis's own command statistics: a check in the steady state (its record
// exists) is one GET and one write at most, for every script that answers
// its record; a new slice or window costs no more calls than one within it.
func TestCheapScripts(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.T0)
	b, err := newBackend(Config{URL: srv.URL(), Prefix: "cs", Clock: clock.Now, Timeout: 5 * time.Second, DenyCache: -1}, 0)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	for _, r := range []millis.Request{
		{ID: "s", Scale: 60_000, Limit: 1 << 30, Hits: 1, Algo: rl.Sliding},
		{ID: "t", Scale: 60_000, Limit: 1 << 30, Hits: 1, Algo: rl.Token},
		{ID: "n", Scale: 60_000, Limit: 1 << 30, Hits: 1, Algo: rl.Slices},
		{ID: "n600", Scale: 60_000, Limit: 1 << 30, Hits: 1, Algo: rl.Slices, Slices: 600},
		{ID: "k", Scale: 60_000, Limit: 1 << 30, Hits: 1, Algo: rl.Leaky, Queue: 1000},
	} {
		t.Run(r.Algo.String()+"/"+r.ID, func(t *testing.T) {
			_, err := b.checkMS(ctx, r) // the record exists
			require.NoError(t, err)
			_, err = srv.Do("CONFIG", "RESETSTAT")
			require.NoError(t, err)
			const checks = 200
			for range checks {
				clock.Advance(millis.Duration(150)) // slices of 1 s and 100 ms: new ones often
				d, err := b.checkMS(ctx, r)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			stats, err := srv.CLI("INFO", "commandstats")
			require.NoError(t, err)
			calls := commandCalls(stats)
			t.Logf("%v", calls)
			assert.Equal(t, int64(checks), calls["evalsha"]-calls["pexpire"], "one script per check, and the index's (index.lua: HSET, PEXPIRE)")
			assert.Equal(t, int64(checks), calls["get"], "one read per check")
			assert.Equal(t, int64(checks), calls["setrange"]+calls["set"], "one write per allowed check")
			assert.Zero(t, calls["hgetall"]+calls["hget"]+calls["hmget"]+calls["hincrby"]+calls["hdel"])
			assert.LessOrEqual(t, calls["hset"], int64(2), "the index, off the hot path")
			assert.LessOrEqual(t, calls["pexpire"], int64(2), "the index's TTL only")
		})
	}
}

var callsRE = regexp.MustCompile(`cmdstat_(\w+):calls=(\d+)`)

// commandCalls reads the calls of every command from INFO commandstats.
func commandCalls(info string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range callsRE.FindAllStringSubmatch(info, -1) {
		out[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	return out
}
