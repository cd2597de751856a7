package check

import (
	"strconv"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/bounds"
)

// maxScaleMS is bounds.MaxScale in milliseconds.
const maxScaleMS = int64(bounds.MaxScale / time.Millisecond)

// The errors of a field out of its bounds, shared: refusing a request
// allocates nothing.
var (
	errEmptyID  = &rl.FieldError{Field: "id", Rule: "must not be empty"}
	errScale    = &rl.FieldError{Field: "scale", Rule: "must be an integer from 1 to " + strconv.FormatInt(maxScaleMS, 10) + " (milliseconds)"}
	errLimit    = &rl.FieldError{Field: "limit", Rule: "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxLimit, 10)}
	errHits     = &rl.FieldError{Field: "hits", Rule: "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxHits, 10)}
	errPeekHits = &rl.FieldError{Field: "hits", Rule: "must be 0 in a peek, which counts nothing"}
	errAlgo     = &rl.FieldError{Field: "algo", Rule: "must be one of fixed, sliding, token, log, slices, leaky"}
	errLogLimit = &rl.FieldError{Field: "limit", Rule: "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxLogLimit, 10) + " with algo=log"}
	errSlices   = &rl.FieldError{Field: "slices", Rule: "must be an integer from " + strconv.FormatInt(bounds.MinSlices, 10) + " to " + strconv.FormatInt(bounds.MaxSlices, 10) + " (default " + strconv.FormatInt(bounds.DefaultSlices, 10) + ")"}
	errSlicesOf = &rl.FieldError{Field: "slices", Rule: "is for algo=slices only"}
	errQueue    = &rl.FieldError{Field: "queue", Rule: "must be an integer from 0 to " + strconv.FormatInt(bounds.MaxQueue, 10)}
	errQueueOf  = &rl.FieldError{Field: "queue", Rule: "is for algo=leaky only"}
	errQueueLen = &rl.FieldError{Field: "queue", Rule: "must drain in at most ten years: queue × scale / limit ≤ " + strconv.FormatInt(maxScaleMS, 10) + " ms"}
	errMaxDelay = &rl.FieldError{Field: "max_delay_ms", Rule: "must be an integer from 0 (no bound) to " + strconv.FormatInt(maxScaleMS, 10)}
)

// idTooLong is the error of an id longer than maxIDBytes.
func idTooLong(maxIDBytes int) *rl.FieldError {
	return &rl.FieldError{Field: "id", Rule: "must be at most " + strconv.Itoa(maxIDBytes) + " bytes"}
}

// Validate checks r against the bounds, with ids up to maxIDBytes long
// (bounds.DefaultMaxIDBytes, 1024, when maxIDBytes <= 0). The error is a
// *rl.FieldError naming the first field out of bounds. Every Limiter
// validates with it before it counts.
func Validate(r rl.Request, maxIDBytes int) error {
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
	case !ValidAlgo(r.Algo):
		return errAlgo
	case r.Algo == rl.Log && r.Limit > bounds.MaxLogLimit:
		return errLogLimit
	case r.Slices != 0 && r.Algo != rl.Slices:
		return errSlicesOf
	case r.Slices != 0 && (r.Slices < bounds.MinSlices || r.Slices > bounds.MaxSlices):
		return errSlices
	case r.Queue != 0 && r.Algo != rl.Leaky:
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

// ParseAlgo returns the algorithm named s ("fixed", "sliding", "token",
// "log", "slices" or "leaky"), as the HTTP API, JSON and the policy file
// spell it. The empty string means rl.Fixed, the default. An unknown name
// is the *rl.FieldError of "algo" that Validate gives.
func ParseAlgo(s string) (rl.Algo, error) {
	switch s {
	case "", "fixed":
		return rl.Fixed, nil
	case "sliding":
		return rl.Sliding, nil
	case "token":
		return rl.Token, nil
	case "log":
		return rl.Log, nil
	case "slices":
		return rl.Slices, nil
	case "leaky":
		return rl.Leaky, nil
	}
	return 0, errAlgo
}

// AlgoName is an rl.Algo that encoding (JSON, text) spells by name, as
// the HTTP API does: "fixed", "sliding", "token", "log", "slices",
// "leaky". A struct decoded from or encoded to the wire holds its
// algorithm as an AlgoName.
type AlgoName rl.Algo

// MarshalText implements encoding.TextMarshaler; an unknown algorithm is
// an error.
func (a AlgoName) MarshalText() ([]byte, error) {
	if !ValidAlgo(rl.Algo(a)) {
		return nil, errAlgo
	}
	return []byte(rl.Algo(a).String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseAlgo.
func (a *AlgoName) UnmarshalText(b []byte) error {
	v, err := ParseAlgo(string(b))
	if err != nil {
		return err
	}
	*a = AlgoName(v)
	return nil
}
