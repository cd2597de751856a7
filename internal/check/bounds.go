package check

import "time"

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
	// MinSlices and MaxSlices bound raterlimiter.Request.Slices: at least two slices,
	// or the window would be a fixed one; at most 600, which bounds the
	// records (one per slice) one window of an id can hold.
	MinSlices int64 = 2
	MaxSlices int64 = 600
	// DefaultSlices is the slice count of a raterlimiter.Request whose Slices is 0.
	DefaultSlices int64 = 60
	// MaxQueue is the largest raterlimiter.Request.Queue. A queue must also drain in at
	// most MaxScale: Queue × Scale / Limit ≤ MaxScale (with Limit > 0), so
	// that every time a leaky bucket holds stays within ten years of now.
	MaxQueue int64 = 65536
)
