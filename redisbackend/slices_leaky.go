package redisbackend

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The sliding window counters and the leaky bucket, as engines:
//
//	PREFIX:{ID}:n:SCALE:N   slices (N the slice count): one string, the
//	                        window's running sum, the last change, the
//	                        newest slice's hits, then the N-1 slices before
//	                        it (slices.lua)
//	PREFIX:{ID}:k:SCALE     leaky: a token bucket's record, the TAT being
//	                        when the queue drains (gcra.lua)
//
// Both are listed in the id's index under the same field (n:SCALE:N,
// k:SCALE), which Buckets and Reset read.

// slicesHeader is the bytes before a slices record's older slices: base, m
// and cur as doubles.
const slicesHeader = 24

// slicesExtra is slices.lua's own argument: the slice count.
func slicesExtra(r millis.Request) ([2]int64, int) { return [2]int64{r.SlicesOrDefault()}, 1 }

// leakyExtra is gcra.lua's own arguments for a queue: its length and the
// bound on the delay.
func leakyExtra(r millis.Request) ([2]int64, int) { return [2]int64{r.Queue, r.MaxDelayMS}, 2 }

// slicesRecord reads a slices record s of n slices: the time of its last
// change and the window's slices as of then, oldest first, those holding
// hits only.
func slicesRecord(s string, n, w int64) (m int64, list []algo.Slice, err error) {
	if int64(len(s)) != slicesHeader+4*(n-1) {
		return 0, nil, fmt.Errorf("%w: a record of %d slices of %d bytes", errParse, n, len(s))
	}
	v, _ := unpack(s[:slicesHeader], 3)
	m, cur := v[1], v[2]
	k := algo.Bucket(m, w)
	list = make([]algo.Slice, 0, 8)
	for i := range n - 1 {
		off := slicesHeader + 4*i
		if h := int64(binary.LittleEndian.Uint32([]byte(s[off : off+4]))); h > 0 {
			list = append(list, algo.Slice{Num: k - (n - 1) + i, Hits: h})
		}
	}
	if cur > 0 {
		list = append(list, algo.Slice{Num: k, Hits: cur})
	}
	return m, list, nil
}

// slicesDecide reads the record slices.lua answered and decides as the
// script did, with algo.SlicesCheck.
func slicesDecide(r millis.Request, a answer) (millis.Decision, state, int64, error) {
	now, s, ok, err := a.raw()
	if err != nil {
		return millis.Decision{}, state{}, 0, err
	}
	n, w, _ := algo.SliceOf(now, r)
	var list []algo.Slice
	var m int64
	if ok {
		if m, list, err = slicesRecord(s, n, w); err != nil {
			return millis.Decision{}, state{}, 0, err
		}
		now = max(now, m) // never rewind
	}
	d := algo.SlicesCheck(list, now, r)
	var st state
	if !d.Allowed {
		// For the cache of denials; nil, and not cached, when too long.
		st.w, st.slices = packSlices(list)
	}
	k := algo.Bucket(now, w)
	if !d.Allowed || r.Hits == 0 || (ok && algo.Bucket(m, w) == k) {
		return d, st, 0, nil // nothing written, or within the slice: the same expiry
	}
	// The record lives until its newest slice leaves the window.
	return d, st, indexTTL(r.Scale, now, (algo.Bucket(m, w)+n)*w, (k+n)*w, a.slack, !ok), nil
}

// slicesView reads a slices record of scale and slice count n as the
// records of its slices. On Redis a slice keeps no times of its own:
// Created and Modified are its start, and the newest slice's Modified is
// the record's last change.
func slicesView(msg rueidis.RedisMessage, scale, n int64) ([]algo.Record, error) {
	_, s, ok, err := answer{msg: msg}.raw()
	if err != nil || !ok {
		return nil, err
	}
	w := algo.SliceWidth(scale, n)
	m, list, err := slicesRecord(s, n, w)
	if err != nil {
		return nil, err
	}
	out := make([]algo.Record, len(list))
	for i, x := range list {
		out[i] = algo.SlicesRecord(n, x.Hits, x.Num*w, x.Num*w)
	}
	if len(out) > 0 && list[len(list)-1].Num == algo.Bucket(m, w) {
		out[len(out)-1].Modified = m
	}
	return out, nil
}

// Wait waits for capacity: it returns once r is allowed (after its delay,
// with algo Leaky), checking again after each denial's RetryAfter, or with
// an error once ctx ends. It is raterlimiter.Wait(ctx, b, r); see there.
func (b *Backend) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Wait(ctx, b, r)
}
