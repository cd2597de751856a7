package redisbackend

import (
	"context"
	_ "embed"
	"strconv"
	"sync"
)

// The admin API (Buckets, Reset) finds an id's records by their kinds: an
// algorithm, a scale, and a slice count for the sliding window counters,
// named by an index field "A:SCALE[:SUB]" (field). A record's key is the
// id's tag followed by its field (a fixed window's, by ":WINDOW" too), so
// knowing the kinds in use is knowing where every id's records are.
//
// The kinds are listed once per prefix, in the registry PREFIX:kinds, a hash
// from field to the time until which records of that kind may live, rather
// than once per id: the first check of an id then costs Redis what any
// check costs (an index per id cost a write per new record, which was most
// of what a new id's check cost). Each backend remembers which kinds it has
// listed, and until when, and lists a kind again (kinds.lua) only when a
// record it writes may outlive that: once, then about every kindsEpoch.
//
// The registry holds at most maxKinds kinds, as a client chooses its
// scales: past that, kinds whose records have all expired are forgotten,
// and if none has, a record of a new kind is listed in its id's index,
// PREFIX:{ID}:i, as every record was before the registry (index.lua). The
// admin API reads both, so records an older version listed are found too.

// maxKinds bounds the registry: what Buckets reads per id.
const maxKinds = 256

// kindsEpoch is how much longer than its record needs a kind is listed, so
// that a backend lists each kind about once per kindsEpoch, in ms.
const kindsEpoch = 10 * 60_000

//go:embed kinds.lua
var kindsLua string

var kindsScript = newScript(kindsLua)

// kinds is what a backend knows it has listed in the registry: field →
// until when (client's clock); and until when it takes the registry for
// full (a minute after it last refused a kind), sending a record of a kind
// it has not listed to its id's index without asking: a full registry
// costs a look at every kind (kinds.lua), which a client choosing a new
// scale for every check must not make Redis pay each time.
type kinds struct {
	mu       sync.RWMutex
	until    map[string]int64
	fullTill int64
}

// kindsKey is the registry's key.
func (b *Backend) kindsKey() string { return b.cfg.Prefix + ":kinds" }

// appendIndex appends to calls what lists the record of id that field names
// for the admin API, when a check at now has written it to live ttl ms more
// (engine.decide's index TTL): nothing when the registry already lists its
// kind for that long; else the call that lists the kind in the registry
// (if the registry is full, sendAfter sends the id's index instead), or
// while the registry is full, the id's index directly.
func (b *Backend) appendIndex(calls []call, id, field string, now, ttl int64) []call {
	need := now + ttl
	b.kinds.mu.RLock()
	u, ok := b.kinds.until[field]
	full := now < b.kinds.fullTill
	b.kinds.mu.RUnlock()
	if ok && u >= need {
		return calls // listed
	}
	idx := call{op: opScript, s: indexScript, key: b.tag(id) + "i", // the id's index
		args: []string{field, strconv.FormatInt(now, 10), strconv.FormatInt(ttl, 10)}}
	if full {
		return append(calls, idx) // the registry was full not long ago
	}
	until := need + kindsEpoch
	return append(calls, call{op: opScript, s: kindsScript, key: b.kindsKey(), fallback: []call{idx},
		args: []string{field, strconv.FormatInt(until, 10), strconv.FormatInt(now-b.windowSlack, 10), strconv.Itoa(maxKinds)}})
}

// sendAfter sends the calls a batch's checks leave (appendIndex's, a
// saturated counter), one listing per kind (until the latest any check
// needs), and reads the listings' answers: a kind listed is remembered;
// one the registry refused has its records listed in their ids' indexes
// instead, and the registry is taken for full for a minute.
func (b *Backend) sendAfter(ctx context.Context, calls []call) {
	kept := calls[:0]
	at := map[string]int{} // a kind's listing in kept
	for _, c := range calls {
		if c.s == kindsScript {
			if i, ok := at[c.args[0]]; ok {
				k := &kept[i]
				u, _ := strconv.ParseInt(k.args[1], 10, 64)
				if v, _ := strconv.ParseInt(c.args[1], 10, 64); v > u {
					k.args[1] = c.args[1]
				}
				k.fallback = append(k.fallback, c.fallback...)
				continue
			}
			at[c.args[0]] = len(kept)
		}
		kept = append(kept, c)
	}
	calls = kept
	res := b.run(ctx, calls, false)
	var more []call
	for i := range calls {
		c := &calls[i]
		if c.s != kindsScript {
			continue
		}
		n, err := res[i].AsInt64()
		if err != nil {
			more = append(more, c.fallback...) // to be safe
			continue
		}
		f := c.args[0]
		until, _ := strconv.ParseInt(c.args[1], 10, 64)
		b.kinds.mu.Lock()
		switch u, ok := b.kinds.until[f]; {
		case n != 1:
			b.kinds.fullTill = b.clock() + 60_000
			more = append(more, c.fallback...)
		case !ok || u < until:
			if b.kinds.until == nil || len(b.kinds.until) >= maxKinds {
				// New, or as many kinds as the registry holds: start
				// again, bounded as the registry is.
				b.kinds.until = map[string]int64{}
			}
			b.kinds.until[f] = until
		}
		b.kinds.mu.Unlock()
	}
	if len(more) > 0 {
		b.run(ctx, more, false)
	}
}
