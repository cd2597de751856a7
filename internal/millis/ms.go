// Package millis is the millisecond form of the root package's Request,
// Decision and Bucket: what the HTTP wire, JSON and the engines (algo,
// buckets, actor, the Redis scripts) count in. A Go caller holds
// time.Duration and time.Time; each Limiter converts once, at its own
// methods, with Of and Public, so the engines never see a Duration.
//
// A Request converted by Of must be valid (its durations are whole
// milliseconds, which Validate requires).
package millis

import (
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

// Request is rl.Request with its durations in milliseconds.
type Request struct {
	ID         string
	Scale      int64
	Limit      int64
	Hits       int64
	Peek       bool
	Algo       rl.Algo
	Slices     int64
	Queue      int64
	MaxDelayMS int64
}

// Of returns r in milliseconds.
func Of(r rl.Request) Request {
	return Request{
		ID: r.ID, Scale: r.Scale.Milliseconds(), Limit: r.Limit, Hits: r.Hits, Peek: r.Peek,
		Algo: r.Algo, Slices: r.Slices, Queue: r.Queue, MaxDelayMS: r.MaxDelay.Milliseconds(),
	}
}

// Public returns r as a Go caller holds it.
func (r Request) Public() rl.Request {
	return rl.Request{
		ID: r.ID, Scale: Duration(r.Scale), Limit: r.Limit, Hits: r.Hits, Peek: r.Peek,
		Algo: r.Algo, Slices: r.Slices, Queue: r.Queue, MaxDelay: Duration(r.MaxDelayMS),
	}
}

// Validate validates r as check.Validate does.
func (r Request) Validate(maxIDBytes int) error { return check.Validate(r.Public(), maxIDBytes) }

// SlicesOrDefault returns r.Slices, or check.DefaultSlices when it is 0.
func (r Request) SlicesOrDefault() int64 {
	if r.Slices == 0 {
		return check.DefaultSlices
	}
	return r.Slices
}

// Decision is rl.Decision in milliseconds; Now is Unix milliseconds.
type Decision struct {
	Allowed      bool
	Count        int64
	Limit        int64
	Remaining    int64
	ResetMS      int64
	RetryAfterMS int64
	DelayMS      int64
	Now          int64
	// FailMode is the fail mode that decided, when the backend could not
	// (rl.Decision.FailMode).
	FailMode rl.FailMode
}

// ResetAt returns the Unix millisecond at which the current window ends.
func (d Decision) ResetAt() int64 { return d.Now + d.ResetMS }

// Public returns d as a Go caller holds it.
func (d Decision) Public() rl.Decision {
	return rl.Decision{
		Allowed: d.Allowed, Count: d.Count, Limit: d.Limit, Remaining: d.Remaining,
		Reset: Duration(d.ResetMS), RetryAfter: Duration(d.RetryAfterMS), Delay: Duration(d.DelayMS),
		Now: time.UnixMilli(d.Now), FailMode: d.FailMode,
	}
}

// OfDecision returns d in milliseconds, rounding each duration up to a
// whole millisecond (every backend's are whole already).
func OfDecision(d rl.Decision) Decision {
	return Decision{
		Allowed: d.Allowed, Count: d.Count, Limit: d.Limit, Remaining: d.Remaining,
		ResetMS: Ceil(d.Reset), RetryAfterMS: Ceil(d.RetryAfter), DelayMS: Ceil(d.Delay),
		Now: d.Now.UnixMilli(), FailMode: d.FailMode,
	}
}

// Bucket is rl.Bucket in milliseconds, as the admin API's JSON spells it:
// {"scale":…,"algo":"fixed","bucket":…,"slices":… (when not 0),"count":…,
// "created":…,"modified":…}.
type Bucket struct {
	Scale    int64          `json:"scale"`
	Algo     check.AlgoName `json:"algo"`
	Bucket   int64          `json:"bucket"`
	Slices   int64          `json:"slices,omitempty"`
	Count    int64          `json:"count"`
	Created  int64          `json:"created"`
	Modified int64          `json:"modified"`
}

// Public returns b as a Go caller holds it.
func (b Bucket) Public() rl.Bucket {
	return rl.Bucket{
		Scale: Duration(b.Scale), Algo: rl.Algo(b.Algo), Bucket: b.Bucket, Slices: b.Slices, Count: b.Count,
		Created: time.UnixMilli(b.Created), Modified: time.UnixMilli(b.Modified),
	}
}

// OfBucket returns b in milliseconds.
func OfBucket(b rl.Bucket) Bucket {
	return Bucket{
		Scale: b.Scale.Milliseconds(), Algo: check.AlgoName(b.Algo), Bucket: b.Bucket, Slices: b.Slices, Count: b.Count,
		Created: b.Created.UnixMilli(), Modified: b.Modified.UnixMilli(),
	}
}

// Buckets returns bs as a Go caller holds them.
func Buckets(bs []Bucket) []rl.Bucket {
	if bs == nil {
		return nil
	}
	out := make([]rl.Bucket, len(bs))
	for i, b := range bs {
		out[i] = b.Public()
	}
	return out
}

// Duration returns n milliseconds as a time.Duration, saturating.
func Duration(n int64) time.Duration {
	const most = int64(1<<63-1) / int64(time.Millisecond)
	switch {
	case n > most:
		return 1<<63 - 1
	case n < -most:
		return -1 << 63
	}
	return time.Duration(n) * time.Millisecond
}

// Ceil returns d in whole milliseconds, rounded up.
func Ceil(d time.Duration) int64 {
	n := d.Milliseconds()
	if time.Duration(n)*time.Millisecond < d {
		n++
	}
	return n
}

// MaxScale is check.MaxScale in milliseconds: ten years.
const MaxScale = int64(check.MaxScale / time.Millisecond)
