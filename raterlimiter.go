// Package raterlimiter is the shared vocabulary of the raterlimiter rate limiter:
// the request a caller makes, the decision it gets back, the bounds a request
// must keep, the errors every backend returns, and the Limiter interface that the
// embedded limiter (package memory), the sidecar client (package client) and the
// Redis backend all implement, so an application can switch between them by
// changing one line.
//
// The package holds no state and starts no goroutines.
package raterlimiter

import (
	"context"
	"fmt"
	"time"
)

// Algo names the algorithm that decides a check.
// The zero value is Fixed, the raterlimiter-compatible fixed window.
type Algo uint8

const (
	// Fixed counts every hit (denied ones too, as the Erlang original) in windows
	// of Scale aligned to the Unix epoch; a hit is allowed while the
	// window's count stays within the limit.
	Fixed Algo = iota
	// Sliding estimates the hits of the last Scale from the current
	// and the previous window (Cloudflare's weighted two-window estimate) and
	// counts allowed hits only.
	Sliding
	// Token is GCRA: limit hits per scale with a burst of limit; it counts
	// allowed hits only.
	Token
	// Log is the sliding window log: every allowed hit is remembered with
	// its time until it leaves the window, and a check is allowed iff the
	// hits of the last scale milliseconds plus its own stay within the
	// limit. Exact, with no boundary burst and no estimate; its memory
	// grows with the limit, which is at most 65,536.
	Log
	// Slices is the sliding window counters (Figma's hourly limit counted
	// in minute counters): the window is cut into Request.Slices slices of
	// ceil(scale/slices) ms aligned to the epoch, and a check is allowed
	// iff the allowed hits of the current slice and the slices-1 before
	// it, plus its own, stay within the limit. It counts allowed hits
	// only, one counter per slice: its memory grows with the slices in
	// use, never with the hits.
	Slices
	// Leaky is the leaky bucket as a queue: one hit leaves every
	// Scale/Limit, a check that finds room in the queue
	// (Request.Queue may wait) is allowed with Decision.Delay, the wait
	// until its turn, and a full queue denies. It is GCRA with a queue,
	// as nginx's limit_req without nodelay; it counts allowed hits only.
	Leaky

	numAlgos
)

var algoNames = [numAlgos]string{Fixed: "fixed", Sliding: "sliding", Token: "token", Log: "log", Slices: "slices", Leaky: "leaky"}

// String returns the algorithm's name as the HTTP API spells it.
func (a Algo) String() string {
	if a < numAlgos {
		return algoNames[a]
	}
	return fmt.Sprintf("algo(%d)", uint8(a))
}

// Request is one check_rate call: may ID make Hits more requests against Limit
// per Scale?
//
// Request has no JSON form of its own (its durations are marked "-"): the
// HTTP API's, in milliseconds, is the sidecar's and the client's.
//
// The zero Hits counts one hit, as an absent hits does on the HTTP wire. A
// peek, which reports the state and changes nothing, is said with Peek.
type Request struct {
	// ID identifies who is limited: a peer IP, a user, an API key. Any bytes,
	// 1 to the backend's MaxIDBytes of them (1024 unless configured).
	ID string
	// Scale is the window's length: a whole number of milliseconds, from
	// one millisecond to ten years (315,360,000,000 ms). A Scale that is not a whole number of
	// milliseconds is refused (a *FieldError of "scale"): every backend,
	// and the HTTP wire, counts in milliseconds.
	Scale time.Duration `json:"-"`
	// Limit is the most hits allowed per window, 0 to 4,294,967,295. 0 denies all.
	Limit int64
	// Hits is how many requests this check counts, 0 to 4,294,967,295; 0 counts
	// one.
	Hits int64
	// Peek reports the state and counts nothing, as hits=0 on the HTTP
	// wire. Hits must then be 0.
	Peek bool
	// Algo is the algorithm; the zero value is Fixed.
	Algo Algo
	// Slices is how many slices the window is cut into, with Algo Slices
	// only: 2 to 600, 0 meaning 60. Like Scale it
	// is part of what is counted: two slice counts of one id and scale
	// never share a counter.
	Slices int64
	// Queue is how many hits may wait their turn, with Algo Leaky only: 0
	// to 65,536, default 0 (a check passes only when the previous one
	// has left; nginx's limit_req burst=).
	Queue int64
	// MaxDelay, when positive, is the longest Decision.Delay the check
	// accepts: a Leaky check whose wait would be longer is denied and
	// takes no place in the queue (Wait sets it from its context's
	// deadline). 0 means no bound; at most ten years, a whole number of
	// milliseconds as Scale. Other algorithms never delay, so it changes
	// nothing for them.
	MaxDelay time.Duration `json:"-"`
}

// Decision is the answer to a Request. Its durations are whole
// milliseconds.
type Decision struct {
	// Allowed reports whether the hits may go ahead.
	Allowed bool
	// Count is what the algorithm counts in the current window: for Fixed the
	// bucket's counter (denied hits included), for Sliding the weighted
	// estimate rounded up (so Remaining is exactly the hits that would pass
	// now), for Token limit minus the whole tokens left, for Log and Slices
	// the allowed hits in the window, for Leaky the hits queued (waiting or
	// leaving), ceil((TAT-now)*limit/scale).
	Count int64
	// Limit echoes the request's limit.
	Limit int64
	// Remaining is max(0, Limit-Count).
	Remaining int64
	// Reset is the time until the current window ends (Token: until the
	// bucket is full again; Leaky: until the queue has drained; Log and
	// Slices: until the oldest counted hit, or slice, leaves the window, 0
	// when none is counted).
	Reset time.Duration `json:"-"`
	// RetryAfter is 0 when allowed; otherwise the time after which the same
	// request, with no other traffic, is allowed, at least a millisecond. A
	// request with Hits greater than Limit is never allowed; its RetryAfter
	// is then the larger of Reset and a millisecond.
	RetryAfter time.Duration `json:"-"`
	// Delay is how long the caller waits before going on, when allowed:
	// for Leaky the time until its turn in the queue (rounded up to a whole
	// millisecond); 0 for every other algorithm, and when denied. Wait
	// sleeps it.
	Delay time.Duration `json:"-"`
	// Now is the instant of the decision, to the millisecond, by the clock
	// of whoever decided (the limiter's clock, or Redis's). It is not part
	// of the HTTP body; the client fills it from its own clock.
	Now time.Time `json:"-"`
	// FailMode is the fail mode that decided, when the backend could not
	// (Redis or the sidecar did not answer): FailOpen or FailLocal. It is
	// FailClosed, the zero value, for every decision the backend made
	// itself, since a closed fail mode decides nothing (its check fails
	// with an error matching ErrUnavailable). See Degraded.
	FailMode FailMode `json:"-"`
}

// Degraded reports whether the decision was made by the fail mode rather
// than by the backend (FailMode is FailOpen or FailLocal).
func (d Decision) Degraded() bool { return d.FailMode != FailClosed }

// Bucket is one stored record of an id, as the admin API shows it.
type Bucket struct {
	// Scale and Algo are those of the checks that made the record.
	Scale time.Duration
	Algo  Algo
	// Bucket is floor(time/scale) of the window the record counts (Fixed and
	// Sliding), floor(time/ceil(scale/slices)) of its slice (Slices); 0 for
	// Token, Leaky and Log, whose single record is their state.
	Bucket int64
	// Slices is the slice count of a Slices record; 0 for the others.
	Slices int64
	// Count is the record's counter (Token and Leaky: the theoretical
	// arrival time, Unix milliseconds, rounded up).
	Count int64
	// Created and Modified are the times of the record's first and last
	// change, to the millisecond.
	Created  time.Time
	Modified time.Time
}

// Limiter is what every backend implements: the embedded limiter, the client
// of the sidecar and the Redis backend. Each also has Buckets and Reset (an
// operator's view of an id's records, apart from the checks), and a Wait
// method that is the function Wait, which waits for capacity on any
// Limiter.
type Limiter interface {
	// CheckRate decides one request. A request outside the bounds fails with
	// an error that matches ErrInvalid and changes nothing.
	CheckRate(ctx context.Context, r Request) (Decision, error)
	// CheckRates decides a batch in order. If any request is invalid nothing is
	// counted and the error (an *ItemError) names the first bad index.
	CheckRates(ctx context.Context, rs []Request) ([]Decision, error)
}
