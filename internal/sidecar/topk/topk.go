// Package topk finds the heaviest keys of a stream: a Space-Saving sketch
// (Metwally, Agrawal, El Abbadi, 2005) of fixed size, fed on a hot path.
//
// Add never waits: it takes the sketch's lock only if it is free (TryLock),
// otherwise the count is dropped, so callers never wait for one another.
// Callers sample what they add themselves. Counts are estimates, each with
// the sketch's error bound.
package topk

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// DefaultSize is a sketch's size for callers without a reason to choose.
const DefaultSize = 64

// Item is one key and its estimated weight.
type Item struct {
	Key string
	// Count is the estimated weight of Key; it overestimates by at most
	// Err (plus the caller's sampling's own error).
	Count uint64
	// Err bounds Count's overestimate.
	Err uint64
}

// Sketch is a Space-Saving sketch. It is safe for concurrent use.
type Sketch struct {
	size  int
	mu    sync.Mutex
	items []Item
	index map[string]int // key -> position in items
}

// New returns an empty sketch that tracks size keys; the size/2 heaviest
// are reliable.
func New(size int) *Sketch {
	return &Sketch{size: size, items: make([]Item, 0, size), index: make(map[string]int, size)}
}

// Add counts w occurrences of key. key may alias a buffer the caller
// reuses: the sketch copies the keys it keeps. When another call holds the
// sketch, Add drops the count rather than wait.
func (s *Sketch) Add(key string, w uint64) {
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
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
