package buckets

import (
	"hash/maphash"
	"math/bits"
)

// cache is a direct-mapped cache of records by (id, scale, algo): the hot
// path's shortcut past the tree search. A slot holds the record last used
// for its key's hash; a hit is confirmed against the full key. Every record
// leaving the tree is forgotten first, so a slot never points outside it.
type cache struct {
	slots []*rec
	mask  uint64
	max   int
	seed  maphash.Seed
}

const minCacheSlots = 1 << 10

func newCache(n int) cache {
	if n < 0 {
		return cache{}
	}
	if n == 0 {
		n = defaultCacheSlots
	}
	n = max(1<<bits.Len(uint(n-1)), minCacheSlots)
	c := cache{max: n, seed: maphash.MakeSeed()}
	c.resize(minCacheSlots)
	return c
}

func (c *cache) resize(n int) {
	c.slots, c.mask = make([]*rec, n), uint64(n-1)
}

// grow doubles the cache, emptying it, while it has fewer than four slots a
// record and is below its largest size.
func (c *cache) grow(records int) {
	if c.slots != nil && len(c.slots) < c.max && len(c.slots) < 4*records {
		c.resize(len(c.slots) * 2)
	}
}

func (c *cache) slot(id string, meta uint64) uint64 {
	if c.slots == nil {
		return 0
	}
	return (maphash.String(c.seed, id) ^ meta*0x9e3779b97f4a7c15) & c.mask
}

func (c *cache) at(slot uint64) *rec {
	if c.slots == nil {
		return nil
	}
	return c.slots[slot]
}

func (c *cache) put(slot uint64, p *rec) {
	if c.slots != nil {
		c.slots[slot] = p
	}
}

func (c *cache) forget(p *rec) {
	if c.slots == nil {
		return
	}
	if i := c.slot(p.id(), p.cacheMeta()); c.slots[i] == p {
		c.slots[i] = nil
	}
}
