// Package algo holds the rate-limiting algorithms as pure functions of a
// stored record, the request and the time: no state, no clock, no goroutines.
// The store (package buckets) keeps the records; these functions decide. Being
// pure, they are also the reference that other backends are tested against.
//
// Times are Unix milliseconds. Requests must be valid (millis.Request.Validate).
package algo

import (
	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Record is what one bucket holds. Its meaning depends on the algorithm:
//
//   - Fixed and Sliding: Count is the bucket's counter; Created and Modified
//     are the times of its first and last change. Created lies in the bucket's
//     window, so the bucket number is Created/scale (see BucketOf).
//   - Token: Modified is the integer part of the theoretical arrival time
//     (TAT, Unix ms), and Count holds its fraction exactly: the numerator in
//     the low 32 bits over the limit it was computed with in the high 32 bits
//     (so Count may read as negative), TAT = Modified + num/den. A check with
//     another limit converts the fraction, rounding up. A TAT at or before now
//     reads as a fresh (full) bucket. Created is the record's creation time.
//   - Log: the hits live in a Log kept beside the record (the store's);
//     Modified is the time of the newest hit, Created the record's creation
//     time, and Count whatever the store uses to find the Log.
//   - Slices: one record per slice; Count packs the slice count and the
//     slice's hits, Created lies in the slice (see SlicesRecord).
//   - Leaky: as Token, the TAT being the time the queue drains.
type Record struct {
	Count    int64
	Created  int64
	Modified int64
}

// Bucket returns the window number floor(now/scale).
func Bucket(now, scale int64) int64 {
	b := now / scale
	if now%scale < 0 {
		b--
	}
	return b
}

// BucketOf returns the bucket number of a stored record: the window its
// Created falls in for Fixed and Sliding, its slice for Slices, 0 for
// Token, Leaky and Log (one record per id and scale).
func BucketOf(a rl.Algo, scale int64, rec Record) int64 {
	switch a {
	case rl.Token, rl.Log, rl.Leaky:
		return 0
	case rl.Slices:
		n, _ := SlicesOfRecord(rec)
		return Bucket(rec.Created, SliceWidth(scale, max(n, 1)))
	}
	return Bucket(rec.Created, scale)
}

// Expired reports whether no decision at now or later can read rec again, so
// a sweep may delete it: Fixed once its window has ended, Sliding one window
// later (the next window still weighs it), Token once its state equals a
// fresh one (the theoretical arrival time has passed; Leaky: the queue has
// drained), Log once its newest hit has left the window, a Slices record
// once its slice has.
func Expired(a rl.Algo, scale int64, rec Record, now int64) bool {
	switch a {
	case rl.Fixed:
		return now >= (Bucket(rec.Created, scale)+1)*scale
	case rl.Sliding:
		return now >= (Bucket(rec.Created, scale)+2)*scale
	case rl.Token, rl.Leaky:
		return tokenExpired(rec, now)
	case rl.Log:
		return now-scale >= rec.Modified
	case rl.Slices:
		return slicesExpired(scale, rec, now)
	}
	return false
}

// Check dispatches r to its algorithm. cur is the record of the current window
// (for Token the id's single record), ok whether it exists; prev and prevOK
// the previous window's record, read by Sliding only. It returns the decision,
// and the record to store when write is true. Log keeps its hits outside a
// Record: decide it with LogCheck; Slices reads many records: decide it
// with SlicesCheck.
func Check(cur Record, ok bool, prev Record, prevOK bool, now int64, r millis.Request) (d millis.Decision, next Record, write bool) {
	switch r.Algo {
	case rl.Sliding:
		return Sliding(cur, ok, prev, prevOK, now, r)
	case rl.Token:
		return Token(cur, ok, now, r)
	case rl.Leaky:
		return Leaky(cur, ok, now, r)
	case rl.Log:
		panic("algo: Check cannot decide Log, whose hits are not in a Record; use LogCheck")
	case rl.Slices:
		panic("algo: Check cannot decide Slices, which reads one record per slice; use SlicesCheck")
	}
	return Fixed(cur, ok, now, r)
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// View presents a stored record as the admin API shows it: Count is the
// record's counter (Log: the hits in the log; Slices: the slice's hits),
// but for Token and Leaky, whose Count is the TAT rounded up to whole ms
// (Modified being its integer part, as stored).
func View(a rl.Algo, scale int64, rec Record) millis.Bucket {
	b := millis.Bucket{Scale: scale, Algo: check.AlgoName(a), Bucket: BucketOf(a, scale, rec),
		Count: rec.Count, Created: rec.Created, Modified: rec.Modified}
	switch a {
	case rl.Token, rl.Leaky:
		b.Count = rec.Modified
		if uint32(rec.Count) != 0 {
			b.Count++
		}
	case rl.Slices:
		b.Slices, b.Count = SlicesOfRecord(rec)
	}
	return b
}
