package algo

import (
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Slice is one slice counter of the sliding window counters: the slice's
// number, floor(t/w) for the slice width w (SliceWidth), and the allowed
// hits counted in it.
type Slice struct {
	Num  int64
	Hits int64
}

// SliceWidth returns the width w of one slice in ms: ceil(scale/slices).
// The counted window, slices*w ms, is scale when slices divides it, and
// less than slices ms longer otherwise.
func SliceWidth(scale, slices int64) int64 { return (scale + slices - 1) / slices }

// SliceOf returns, for r (Algo Slices) at now, the slice count N, the width
// w and the number of the current slice, floor(now/w).
func SliceOf(now int64, r millis.Request) (n, w, num int64) {
	n = r.SlicesOrDefault()
	w = SliceWidth(r.Scale, n)
	return n, w, Bucket(now, w)
}

// SlicesRecord packs one slice's counter into a Record, as the store keeps
// it: Count holds the slice count N in its high 32 bits and the slice's
// hits in its low 32 (hits never exceed a limit, below 2^32); Created is
// the time of the slice's first check, in the slice, so the slice's number
// is Created/w; Modified the time of its last change.
func SlicesRecord(slices, hits, created, modified int64) Record {
	return Record{Count: slices<<32 | int64(uint32(hits)), Created: created, Modified: modified}
}

// SlicesOfRecord unpacks what SlicesRecord packed: the slice count and the
// hits.
func SlicesOfRecord(rec Record) (slices, hits int64) {
	return int64(uint64(rec.Count) >> 32), int64(uint32(rec.Count))
}

// sliceCount reads a stored slice's hits, kept within [0, 2^40] so the sum
// of MaxSlices of them cannot overflow.
func sliceCount(n int64) uint64 { return uint64(min(max(n, 0), 1<<40)) }

// SlicesCheck decides r (Algo Slices) at now from an id's slice counters of
// its scale and slice count, in ascending order of Num: the sliding window
// counters. The window is cut into N = r.Slices slices of w =
// ceil(scale/N) ms aligned to the epoch; with k the current slice, hits are
// allowed iff
//
//	(the hits of slices k-N+1 .. k) + hits <= limit
//
// Slices before k-N+1 have left the window and are not read, nor are
// slices after k. Only allowed hits are counted: the caller adds r.Hits to
// slice k when the decision allows and r.Hits > 0. A peek (hits = 0) is
// allowed iff the window is within the limit. A limit of 0 denies every
// hit.
//
// The decision reports:
//
//   - Count: the allowed hits in the window after the decision, and
//     Remaining = max(0, limit-Count), exactly the hits that would pass now.
//   - ResetMS: the time until the oldest slice counted (holding hits)
//     leaves the window, (j+N)*w - now for that slice j; 0 when none is.
//   - RetryAfterMS (when denied): the time until enough of the oldest
//     slices have left for hits to fit: waiting exactly RetryAfterMS
//     passes, 1 ms less fails. Hits above the limit never pass:
//     RetryAfterMS is then max(ResetMS, 1).
func SlicesCheck(slices []Slice, now int64, r millis.Request) millis.Decision {
	n, w, k := SliceOf(now, r)
	lo := k - n + 1
	var sum uint64
	oldest, counted := int64(0), false
	for _, s := range slices {
		if s.Num < lo || s.Num > k || s.Hits <= 0 {
			continue
		}
		sum += sliceCount(s.Hits)
		if !counted {
			oldest, counted = s.Num, true
		}
	}
	lim, h := uint64(r.Limit), uint64(r.Hits)
	allowed := sum+h <= lim
	if allowed && h > 0 {
		sum += h
		if !counted {
			oldest, counted = k, true
		}
	}
	d := slicesDecision(allowed, sum, oldest, counted, n, w, now, r)
	if !allowed && h <= lim {
		need := sum + h - lim
		var acc uint64
		for _, s := range slices {
			if s.Num < lo || s.Num > k || s.Hits <= 0 {
				continue
			}
			if acc += sliceCount(s.Hits); acc >= need {
				d.RetryAfterMS = (s.Num+n)*w - now
				break
			}
		}
	}
	return d
}

// SlicesFast is SlicesCheck for a caller that keeps a summary of the window
// beside its counters instead of reading them all: sum, the allowed hits
// in the window (the current slice's included), and oldest, the oldest
// slice of the window holding counted (read only when sum > 0); n, w and k
// are SliceOf(now, r). When r is allowed it returns the decision
// SlicesCheck would and true: the caller adds r.Hits to the current slice
// and to sum. When r would be denied it returns false, since RetryAfterMS
// needs every slice: decide with SlicesCheck then.
func SlicesFast(sum uint64, oldest, n, w, k, now int64, r millis.Request) (millis.Decision, bool) {
	lim, h := uint64(r.Limit), uint64(r.Hits)
	if sum+h > lim {
		return millis.Decision{}, false
	}
	counted := sum > 0
	if h > 0 {
		sum += h
		if !counted {
			oldest, counted = k, true
		}
	}
	return slicesDecision(true, sum, oldest, counted, n, w, now, r), true
}

// slicesDecision is the decision of the sliding window counters with sum
// hits in the window after it, the oldest counted slice being oldest (if
// counted).
func slicesDecision(allowed bool, sum uint64, oldest int64, counted bool, n, w, now int64, r millis.Request) millis.Decision {
	d := millis.Decision{Allowed: allowed, Count: int64(sum), Limit: r.Limit, Now: now}
	if lim := uint64(r.Limit); sum < lim {
		d.Remaining = int64(lim - sum)
	}
	if counted {
		d.ResetMS = (oldest+n)*w - now
	}
	if !allowed {
		d.RetryAfterMS = max(d.ResetMS, 1) // hits above the limit: never
	}
	return d
}

// slicesExpired reports whether a slice record has left the window of
// every check at now or later: now >= (j+N)*w for its slice j.
func slicesExpired(scale int64, rec Record, now int64) bool {
	n, _ := SlicesOfRecord(rec)
	if n < 1 {
		return true // not a record a check makes
	}
	w := SliceWidth(scale, n)
	end := satAdd(Bucket(rec.Created, w)*w, satMul(n, w))
	return now >= end
}

// satMul returns a*b for a, b >= 0, saturating at 2^63-1.
func satMul(a, b int64) int64 {
	if a != 0 && b > (1<<63-1)/a {
		return 1<<63 - 1
	}
	return a * b
}
