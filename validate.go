package raterlimiter

import (
	"strconv"
	"time"
)

// Bounds on a request, from the contract.
const (
	// DefaultMaxIDBytes is the longest id accepted unless configured.
	DefaultMaxIDBytes = 1024
	// MaxScale is the longest Scale: ten years (of 365 days).
	MaxScale = 315360000000 * time.Millisecond
	// MaxLimit is the largest limit.
	MaxLimit int64 = 4294967295
	// MaxHits is the largest number of hits one check may count.
	MaxHits int64 = 4294967295
	// MaxLogLimit is the largest limit of the Log algorithm, which keeps up
	// to one entry per allowed hit.
	MaxLogLimit int64 = 65536
	// MinSlices and MaxSlices bound Request.Slices: at least two slices,
	// or the window would be a fixed one; at most 600, which bounds the
	// records (one per slice) one window of an id can hold.
	MinSlices int64 = 2
	MaxSlices int64 = 600
	// DefaultSlices is the slice count of a Request whose Slices is 0.
	DefaultSlices int64 = 60
	// MaxQueue is the largest Request.Queue. A queue must also drain in at
	// most MaxScale: Queue × Scale / Limit ≤ MaxScale (with Limit > 0), so
	// that every time a leaky bucket holds stays within ten years of now.
	MaxQueue int64 = 65536
)

// maxScaleMS is MaxScale in milliseconds.
const maxScaleMS = int64(MaxScale / time.Millisecond)

// The errors of a field out of its bounds, shared: refusing a request
// allocates nothing.
var (
	errEmptyID  = &FieldError{"id", "must not be empty"}
	errScale    = &FieldError{"scale", "must be an integer from 1 to " + strconv.FormatInt(maxScaleMS, 10) + " (milliseconds)"}
	errLimit    = &FieldError{"limit", "must be an integer from 0 to " + strconv.FormatInt(MaxLimit, 10)}
	errHits     = &FieldError{"hits", "must be an integer from 0 to " + strconv.FormatInt(MaxHits, 10)}
	errPeekHits = &FieldError{"hits", "must be 0 in a peek, which counts nothing"}
	errLogLimit = &FieldError{"limit", "must be an integer from 0 to " + strconv.FormatInt(MaxLogLimit, 10) + " with algo=log"}
	errSlices   = &FieldError{"slices", "must be an integer from " + strconv.FormatInt(MinSlices, 10) + " to " + strconv.FormatInt(MaxSlices, 10) + " (default " + strconv.FormatInt(DefaultSlices, 10) + ")"}
	errSlicesOf = &FieldError{"slices", "is for algo=slices only"}
	errQueue    = &FieldError{"queue", "must be an integer from 0 to " + strconv.FormatInt(MaxQueue, 10)}
	errQueueOf  = &FieldError{"queue", "is for algo=leaky only"}
	errQueueLen = &FieldError{"queue", "must drain in at most ten years: queue × scale / limit ≤ " + strconv.FormatInt(maxScaleMS, 10) + " ms"}
	errMaxDelay = &FieldError{"max_delay_ms", "must be an integer from 0 (no bound) to " + strconv.FormatInt(maxScaleMS, 10)}
)

// idTooLong is the error of an id longer than maxIDBytes.
func idTooLong(maxIDBytes int) *FieldError {
	return &FieldError{"id", "must be at most " + strconv.Itoa(maxIDBytes) + " bytes"}
}

// Validate checks r against the bounds, with ids up to maxIDBytes long
// (DefaultMaxIDBytes when maxIDBytes <= 0). The error is a *FieldError naming
// the first field out of bounds.
func (r Request) Validate(maxIDBytes int) error {
	if maxIDBytes <= 0 {
		maxIDBytes = DefaultMaxIDBytes
	}
	switch {
	case len(r.ID) == 0:
		return errEmptyID
	case len(r.ID) > maxIDBytes:
		return idTooLong(maxIDBytes)
	case r.Scale < time.Millisecond || r.Scale > MaxScale || r.Scale%time.Millisecond != 0:
		return errScale
	case r.Limit < 0 || r.Limit > MaxLimit:
		return errLimit
	case r.Hits < 0 || r.Hits > MaxHits:
		return errHits
	case r.Peek && r.Hits != 0:
		return errPeekHits
	case r.Algo >= numAlgos:
		return errAlgo
	case r.Algo == Log && r.Limit > MaxLogLimit:
		return errLogLimit
	case r.Slices != 0 && r.Algo != Slices:
		return errSlicesOf
	case r.Slices != 0 && (r.Slices < MinSlices || r.Slices > MaxSlices):
		return errSlices
	case r.Queue != 0 && r.Algo != Leaky:
		return errQueueOf
	case r.Queue < 0 || r.Queue > MaxQueue:
		return errQueue
	case r.Queue > 0 && r.Limit > 0 && queueTooLong(r.Queue, int64(r.Scale/time.Millisecond), r.Limit):
		return errQueueLen
	case r.MaxDelay < 0 || r.MaxDelay > MaxScale || r.MaxDelay%time.Millisecond != 0:
		return errMaxDelay
	}
	return nil
}

// queueTooLong reports whether queue intervals of scale/limit ms pass
// MaxScale: queue × scale > MaxScale × limit, without overflow (queue ×
// scale is below 2^55).
func queueTooLong(queue, scale, limit int64) bool {
	q, rem := queue*scale/limit, queue*scale%limit
	return q > maxScaleMS || q == maxScaleMS && rem > 0
}
