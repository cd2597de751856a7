// Package topk finds the heaviest keys of a stream: a Space-Saving sketch
// (Metwally, Agrawal, El Abbadi, 2005) of fixed size, fed on a hot path.
//
// Offer is cheap enough for every check a server answers: it samples one
// offer in Sample with the runtime's per-thread random source, and a sampled
// offer takes the sketch's lock only if it is free (TryLock), otherwise it is
// dropped. So the common path is one random number and no lock, and callers
// never wait for one another. Counts are estimates: sampled counts times
// Sample, each with the sketch's error bound.
package topk

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Defaults of Config's zero fields.
const (
	DefaultSize   = 64
	DefaultSample = 16
)

// Config configures a Sketch; zero fields mean the defaults.
type Config struct {
	// Size is the number of keys the sketch tracks; the Size/2 heaviest are
	// reliable. Default DefaultSize.
	Size int
	// Sample keeps one offer in Sample, rounded up to a power of two; 1
	// keeps every offer. Default DefaultSample.
	Sample int
}

// Item is one key and its estimated weight.
type Item struct {
	Key string
	// Count is the estimated number of offers of Key; it overestimates by
	// at most Err (plus the sampling's own error).
	Count uint64
	// Err bounds Count's overestimate.
	Err uint64
}

// Sketch is a Space-Saving sketch. It is safe for concurrent use.
type Sketch struct {
	mask    uint32 // offers with rand&mask != 0 are skipped
	weight  uint64 // Sample
	size    int
	mu      sync.Mutex
	items   []Item
	index   map[string]int // key -> position in items
	dropped atomic.Uint64  // sampled offers that met a busy lock
}

// New returns an empty sketch.
func New(cfg Config) *Sketch {
	if cfg.Size <= 0 {
		cfg.Size = DefaultSize
	}
	if cfg.Sample <= 0 {
		cfg.Sample = DefaultSample
	}
	w := 1
	for w < cfg.Sample {
		w <<= 1
	}
	return &Sketch{
		mask:   uint32(w - 1),
		weight: uint64(w),
		size:   cfg.Size,
		items:  make([]Item, 0, cfg.Size),
		index:  make(map[string]int, cfg.Size),
	}
}

// Offer counts one occurrence of key. key may alias a buffer the caller
// reuses: the sketch copies the keys it keeps.
func (s *Sketch) Offer(key string) {
	if s.mask != 0 && rand.Uint32()&s.mask != 0 {
		return
	}
	s.Add(key, s.weight)
}

// Add counts w occurrences of key, unsampled: for a caller that samples
// offers itself (one random draw for several sketches). Like Offer it drops
// the count rather than wait when another call holds the sketch.
func (s *Sketch) Add(key string, w uint64) {
	if !s.mu.TryLock() {
		s.dropped.Add(1)
		return
	}
	s.add(key, w)
	s.mu.Unlock()
}

// add counts w more for key; s.mu is held.
func (s *Sketch) add(key string, w uint64) {
	if i, ok := s.index[key]; ok {
		s.items[i].Count += w
		return
	}
	if len(s.items) < s.size {
		k := strings.Clone(key)
		s.index[k] = len(s.items)
		s.items = append(s.items, Item{Key: k, Count: w})
		return
	}
	// Replace the lightest key: the newcomer inherits its count as error.
	low := 0
	for i := 1; i < len(s.items); i++ {
		if s.items[i].Count < s.items[low].Count {
			low = i
		}
	}
	delete(s.index, s.items[low].Key)
	k := strings.Clone(key)
	s.index[k] = low
	floor := s.items[low].Count
	s.items[low] = Item{Key: k, Count: floor + w, Err: floor}
}

// Top returns the n heaviest keys, heaviest first (ties by key).
func (s *Sketch) Top(n int) []Item {
	s.mu.Lock()
	out := slices.Clone(s.items)
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Item) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Reset empties the sketch.
func (s *Sketch) Reset() {
	s.mu.Lock()
	s.items = s.items[:0]
	clear(s.index)
	s.mu.Unlock()
}

// Dropped is the number of sampled offers (and Add calls) dropped because another offer
// held the lock.
func (s *Sketch) Dropped() uint64 { return s.dropped.Load() }
