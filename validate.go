package raterlimiter

import (
	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"strconv"
	"time"
)

// maxScaleMS is bounds.MaxScale in milliseconds.
const maxScaleMS = int64(bounds.MaxScale / time.Millisecond)

// The errors of a field out of its bounds, shared: refusing a request
// allocates nothing.
var (
	errEmptyID  = &FieldError{"id", "must not be empty"}
	errScale    = &FieldError{"scale", "must be an integer from 1 to " + strconv.FormatInt(maxScaleMS, 10) + " (milliseconds)"}
	errLimit    = &FieldError{"limit", "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxLimit, 10)}
	errHits     = &FieldError{"hits", "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxHits, 10)}
	errPeekHits = &FieldError{"hits", "must be 0 in a peek, which counts nothing"}
	errLogLimit = &FieldError{"limit", "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxLogLimit, 10) + " with algo=log"}
	errSlices   = &FieldError{"slices", "must be an integer from " + strconv.FormatInt(bounds.MinSlices, 10) + " to " + strconv.FormatInt(bounds.MaxSlices, 10) + " (default " + strconv.FormatInt(bounds.DefaultSlices, 10) + ")"}
	errSlicesOf = &FieldError{"slices", "is for algo=slices only"}
	errQueue    = &FieldError{"queue", "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxQueue, 10)}
	errQueueOf  = &FieldError{"queue", "is for algo=leaky only"}
	errQueueLen = &FieldError{"queue", "must drain in at most ten years: queue × scale / limit ≤ " + strconv.FormatInt(maxScaleMS, 10) + " ms"}
	errMaxDelay = &FieldError{"max_delay_ms", "must be an integer from 0 (no bound) to " + strconv.FormatInt(maxScaleMS, 10)}
)

// idTooLong is the error of an id longer than maxIDBytes.
func idTooLong(maxIDBytes int) *FieldError {
	return &FieldError{"id", "must be at most " + strconv.Itoa(maxIDBytes) + " bytes"}
}

// Validate checks r against the bounds, with ids up to maxIDBytes long
// (1024 when maxIDBytes <= 0). The error is a *FieldError naming
// the first field out of bounds.
func (r Request) Validate(maxIDBytes int) error {
	if maxIDBytes <= 0 {
		maxIDBytes = bounds.DefaultMaxIDBytes
	}
	switch {
	case len(r.ID) == 0:
		return errEmptyID
	case len(r.ID) > maxIDBytes:
		return idTooLong(maxIDBytes)
	case r.Scale < time.Millisecond || r.Scale > bounds.MaxScale || r.Scale%time.Millisecond != 0:
		return errScale
	case r.Limit < 0 || r.Limit > bounds.MaxLimit:
		return errLimit
	case r.Hits < 0 || r.Hits > bounds.MaxHits:
		return errHits
	case r.Peek && r.Hits != 0:
		return errPeekHits
	case r.Algo >= numAlgos:
		return errAlgo
	case r.Algo == Log && r.Limit > bounds.MaxLogLimit:
		return errLogLimit
	case r.Slices != 0 && r.Algo != Slices:
		return errSlicesOf
	case r.Slices != 0 && (r.Slices < bounds.MinSlices || r.Slices > bounds.MaxSlices):
		return errSlices
	case r.Queue != 0 && r.Algo != Leaky:
		return errQueueOf
	case r.Queue < 0 || r.Queue > bounds.MaxQueue:
		return errQueue
	case r.Queue > 0 && r.Limit > 0 && queueTooLong(r.Queue, int64(r.Scale/time.Millisecond), r.Limit):
		return errQueueLen
	case r.MaxDelay < 0 || r.MaxDelay > bounds.MaxScale || r.MaxDelay%time.Millisecond != 0:
		return errMaxDelay
	}
	return nil
}

// queueTooLong reports whether queue intervals of scale/limit ms pass
// bounds.MaxScale: queue × scale > bounds.MaxScale × limit, without overflow (queue ×
// scale is below 2^55).
func queueTooLong(queue, scale, limit int64) bool {
	q, rem := queue*scale/limit, queue*scale%limit
	return q > maxScaleMS || q == maxScaleMS && rem > 0
}
