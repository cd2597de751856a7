package check

import (
	"strconv"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// maxScaleMS is MaxScale in milliseconds.
const maxScaleMS = int64(MaxScale / time.Millisecond)

// idTooLong is the error of an id longer than maxIDBytes.
func idTooLong(maxIDBytes int) *rl.FieldError {
	return &rl.FieldError{Field: "id", Rule: "must be at most " + strconv.Itoa(maxIDBytes) + " bytes"}
}

// fault names the first bound a request breaks.
type fault uint8

const (
	noFault fault = iota
	emptyID
	longID
	badScale
	badLimit
	badHits
	peekHits
	badAlgo
	logLimit
	slicesOf
	badSlices
	queueOf
	badQueue
	queueLen
	badMaxDelay
)

// idBound is the longest id a limiter configured with maxIDBytes accepts:
// maxIDBytes, or DefaultMaxIDBytes (1024) when maxIDBytes <= 0.
func idBound(maxIDBytes int) int {
	if maxIDBytes <= 0 {
		return DefaultMaxIDBytes
	}
	return maxIDBytes
}

// faultOf returns the first bound r breaks with ids up to maxIDBytes long
// (idBound's), or noFault.
func faultOf(r rl.Request, maxIDBytes int) fault {
	switch {
	case len(r.ID) == 0:
		return emptyID
	case len(r.ID) > maxIDBytes:
		return longID
	case r.Scale < time.Millisecond || r.Scale > MaxScale || r.Scale%time.Millisecond != 0:
		return badScale
	case r.Limit < 0 || r.Limit > MaxLimit:
		return badLimit
	case r.Hits < 0 || r.Hits > MaxHits:
		return badHits
	case r.Peek && r.Hits != 0:
		return peekHits
	case !ValidAlgo(r.Algo):
		return badAlgo
	case r.Algo == rl.Log && r.Limit > MaxLogLimit:
		return logLimit
	case r.Slices != 0 && r.Algo != rl.Slices:
		return slicesOf
	case r.Slices != 0 && (r.Slices < MinSlices || r.Slices > MaxSlices):
		return badSlices
	case r.Queue != 0 && r.Algo != rl.Leaky:
		return queueOf
	case r.Queue < 0 || r.Queue > MaxQueue:
		return badQueue
	case r.Queue > 0 && r.Limit > 0 && queueTooLong(r.Queue, int64(r.Scale/time.Millisecond), r.Limit):
		return queueLen
	case r.MaxDelay < 0 || r.MaxDelay > MaxScale || r.MaxDelay%time.Millisecond != 0:
		return badMaxDelay
	}
	return noFault
}

// Validate checks r against the bounds for a Go caller, with ids up to
// maxIDBytes long (DefaultMaxIDBytes, 1024, when maxIDBytes <= 0).
// The error is a *rl.FieldError naming the first field out of bounds as Go
// spells it (ID, Scale, ...), with its value and the rule in Go's terms
// (durations, not milliseconds). Every Limiter validates with it before it
// counts.
func Validate(r rl.Request, maxIDBytes int) error {
	maxIDBytes = idBound(maxIDBytes)
	if f := faultOf(r, maxIDBytes); f != noFault {
		return goError(f, r, maxIDBytes)
	}
	return nil
}

// ValidateWire is Validate in the HTTP API's words: the field as the wire
// names it (id, scale, ...) and its rule in milliseconds, as a parser that
// refuses a value it cannot read gives it (OutOfBounds). The errors are
// shared: refusing a request allocates nothing (but for a long id).
func ValidateWire(r rl.Request, maxIDBytes int) error {
	maxIDBytes = idBound(maxIDBytes)
	switch f := faultOf(r, maxIDBytes); f {
	case noFault:
		return nil
	case longID:
		return idTooLong(maxIDBytes)
	default:
		return wireErrors[f]
	}
}

// wireErrors are ValidateWire's errors, but for a long id's, shared:
// refusing a request allocates nothing.
var wireErrors = [...]*rl.FieldError{
	emptyID:     {Field: "id", Rule: "must not be empty"},
	badScale:    {Field: "scale", Rule: "must be an integer from 1 to " + strconv.FormatInt(maxScaleMS, 10) + " (milliseconds)"},
	badLimit:    {Field: "limit", Rule: "must be an integer from 0 to " + strconv.FormatInt(MaxLimit, 10)},
	badHits:     {Field: "hits", Rule: "must be an integer from 0 to " + strconv.FormatInt(MaxHits, 10)},
	peekHits:    {Field: "hits", Rule: "must be 0 in a peek, which counts nothing"},
	badAlgo:     {Field: "algo", Rule: "must be one of fixed, sliding, token, log, slices, leaky"},
	logLimit:    {Field: "limit", Rule: "must be an integer from 0 to " + strconv.FormatInt(MaxLogLimit, 10) + " with algo=log"},
	slicesOf:    {Field: "slices", Rule: "is for algo=slices only"},
	badSlices:   {Field: "slices", Rule: "must be an integer from " + strconv.FormatInt(MinSlices, 10) + " to " + strconv.FormatInt(MaxSlices, 10) + " (default " + strconv.FormatInt(DefaultSlices, 10) + ")"},
	queueOf:     {Field: "queue", Rule: "is for algo=leaky only"},
	badQueue:    {Field: "queue", Rule: "must be an integer from 0 to " + strconv.FormatInt(MaxQueue, 10)},
	queueLen:    {Field: "queue", Rule: "must drain in at most ten years: queue × scale / limit ≤ " + strconv.FormatInt(maxScaleMS, 10) + " ms"},
	badMaxDelay: {Field: "max_delay_ms", Rule: "must be an integer from 0 (no bound) to " + strconv.FormatInt(maxScaleMS, 10)},
}

// errAlgo is the error of an unknown algorithm.
var errAlgo = wireErrors[badAlgo]

// tenYears is MaxScale as a Go caller reads it.
const tenYears = "ten years (87600h)"

// goError is the error of fault f of r for a Go caller.
func goError(f fault, r rl.Request, maxIDBytes int) *rl.FieldError {
	i := strconv.FormatInt
	switch f {
	case emptyID:
		return &rl.FieldError{Field: "ID", Rule: "must not be empty"}
	case longID:
		return &rl.FieldError{Field: "ID", Rule: "is " + strconv.Itoa(len(r.ID)) + " bytes, more than the limiter's MaxIDBytes (" + strconv.Itoa(maxIDBytes) + ")"}
	case badScale:
		if r.Scale%time.Millisecond != 0 && r.Scale > 0 && r.Scale <= MaxScale {
			return &rl.FieldError{Field: "Scale", Rule: r.Scale.String() + " is not a whole number of milliseconds"}
		}
		return &rl.FieldError{Field: "Scale", Rule: r.Scale.String() + " is outside 1ms to " + tenYears}
	case badLimit:
		return &rl.FieldError{Field: "Limit", Rule: i(r.Limit, 10) + " is outside 0 to " + i(MaxLimit, 10)}
	case badHits:
		return &rl.FieldError{Field: "Hits", Rule: i(r.Hits, 10) + " is outside 0 to " + i(MaxHits, 10)}
	case peekHits:
		return &rl.FieldError{Field: "Hits", Rule: "must be 0 with Peek, which counts nothing, not " + i(r.Hits, 10)}
	case badAlgo:
		return &rl.FieldError{Field: "Algo", Rule: r.Algo.String() + " is none of Fixed, Sliding, Token, Log, Slices, Leaky"}
	case logLimit:
		return &rl.FieldError{Field: "Limit", Rule: i(r.Limit, 10) + " is more than Algo Log allows (" + i(MaxLogLimit, 10) + ")"}
	case slicesOf:
		return &rl.FieldError{Field: "Slices", Rule: "is for Algo Slices only, not " + r.Algo.String()}
	case badSlices:
		return &rl.FieldError{Field: "Slices", Rule: i(r.Slices, 10) + " is outside " + i(MinSlices, 10) + " to " + i(MaxSlices, 10) + " (0 means " + i(DefaultSlices, 10) + ")"}
	case queueOf:
		return &rl.FieldError{Field: "Queue", Rule: "is for Algo Leaky only, not " + r.Algo.String()}
	case badQueue:
		return &rl.FieldError{Field: "Queue", Rule: i(r.Queue, 10) + " is outside 0 to " + i(MaxQueue, 10)}
	case queueLen:
		return &rl.FieldError{Field: "Queue", Rule: i(r.Queue, 10) + " waiting, one every Scale/Limit (" + (r.Scale / time.Duration(r.Limit)).String() + "), take more than " + tenYears + " to drain"}
	case badMaxDelay:
		if r.MaxDelay%time.Millisecond != 0 && r.MaxDelay > 0 && r.MaxDelay <= MaxScale {
			return &rl.FieldError{Field: "MaxDelay", Rule: r.MaxDelay.String() + " is not a whole number of milliseconds"}
		}
		return &rl.FieldError{Field: "MaxDelay", Rule: r.MaxDelay.String() + " is outside 0 (no bound) to " + tenYears}
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

// ParseAlgo returns the algorithm named s ("fixed", "sliding", "token",
// "log", "slices" or "leaky"), as the HTTP API, JSON and the policy file
// spell it. The empty string means rl.Fixed, the default. An unknown name
// is the *rl.FieldError of "algo" that Validate gives.
func ParseAlgo(s string) (rl.Algo, error) {
	if s == "" {
		return rl.Fixed, nil
	}
	for _, a := range Algos {
		if a.String() == s {
			return a, nil
		}
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
