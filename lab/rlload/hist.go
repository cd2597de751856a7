package main

import (
	"math/bits"
	"time"
)

// histogram counts latencies in log-linear buckets: 16 buckets per power of
// two, so a quantile is read within about 6 % of the true value. It is not
// safe for concurrent use: each caller records into its own and the
// histograms are merged at the end. Recording neither allocates nor locks,
// which matters at a million checks a second; a histogram is 2.4 KB.
type histogram struct {
	counts [histBuckets]uint32
	n      uint64
}

const (
	histSubBits = 4
	histSub     = 1 << histSubBits
	// histBuckets covers 0 .. 2^40 ns (18 minutes); longer waits land in
	// the last bucket.
	histBuckets = (40-histSubBits+1)*histSub + histSub
)

// histIndex returns the bucket of ns nanoseconds.
func histIndex(ns int64) int {
	if ns < histSub {
		return int(max(ns, 0))
	}
	shift := bits.Len64(uint64(ns)) - histSubBits - 1
	i := (shift+1)*histSub + int(uint64(ns)>>shift) - histSub
	return min(i, histBuckets-1)
}

// histValue returns the middle of bucket i, in nanoseconds.
func histValue(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	shift := i/histSub - 1
	lo := int64(histSub+i%histSub) << shift
	return lo + (int64(1)<<shift)/2
}

// record counts one latency.
func (h *histogram) record(d time.Duration) {
	h.counts[histIndex(int64(d))]++
	h.n++
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the latency below which a fraction q of the recorded
// ones lie, or 0 when none were recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(histBuckets - 1))
}
