package redisbackend

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The admin API reads an id's records through the registry of kinds,
// PREFIX:kinds (kinds.go), and the id's own index, PREFIX:{ID}:i, a hash
// with one field "A:SCALE" per record (a slices record's is "A:SCALE:N"),
// which holds the kinds a full registry refused and what older versions
// listed; so it needs no SCAN, and the checks keep both off their hot path
// (docs/redis.md). Every command here names one key, so on a Cluster each
// goes to its slot's node, and a slot migrating meanwhile only redirects
// them.

// listed is one record of an id (an algorithm, a scale, and a slice count
// for the sliding window counters), as read for the admin API.
type listed struct {
	algo       rl.Algo
	scale, sub int64
	field      string
	keys       []string      // what Reset deletes
	recs       []algo.Record // as package algo keeps them
}

// records reads the records of id (b usable), and with reset deletes those
// of scale (0: every scale). It returns the client's time it read them at.
func (b *Backend) records(ctx context.Context, op, id string, scale int64, reset bool) (int64, []listed, error) {
	if !b.br.allow() {
		return 0, nil, &unavailableError{cause: errCircuitOpen}
	}
	c := b.conn()
	if c == nil {
		return 0, nil, &unavailableError{cause: errNotConnected}
	}
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	start := time.Now()
	now, ls, err := b.readRecords(cctx, c, id, scale, reset)
	b.observe(op, start, err)
	if err != nil {
		if b.unavailable(ctx, err) {
			b.fail(err)
			return 0, nil, &unavailableError{cause: err}
		}
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("redisbackend: %w", ctx.Err())
		}
		return 0, nil, fmt.Errorf("redisbackend: %s: %w", op, err)
	}
	b.succeed(ctx)
	return now, ls, nil
}

func (b *Backend) readRecords(ctx context.Context, c rueidis.Client, id string, scale int64, reset bool) (int64, []listed, error) {
	tag := b.tag(id)
	index := tag + "i"
	// The registry of kinds (kinds.go), and the id's own index: the kinds
	// the registry could not list, and what older versions listed.
	rs := c.DoMulti(ctx, c.B().Hgetall().Key(index).Build(), c.B().Hgetall().Key(b.kindsKey()).Build())
	idx, err := rs[0].AsStrMap()
	if err != nil {
		return 0, nil, err
	}
	registry, err := rs[1].AsStrMap()
	if err != nil {
		return 0, nil, err
	}
	if idx == nil {
		idx = map[string]string{}
	}
	now := b.clock()
	for f, v := range registry {
		if _, ok := idx[f]; ok {
			continue
		}
		// A kind whose records have all expired has none of id's.
		if until, err := strconv.ParseInt(v, 10, 64); err == nil && until >= now-b.windowSlack {
			idx[f] = ""
		}
	}
	var ls []listed
	var reads rueidis.Commands
	for f, v := range idx {
		a, s, sub, ok := parseField(f)
		if !ok {
			continue // not ours
		}
		if reset && scale != 0 && s != scale {
			continue
		}
		l := listed{algo: a, scale: s, sub: sub, field: f}
		if a == rl.Fixed {
			// The counter of the window at now; Reset also deletes the
			// windows beside it, where sidecars whose clocks disagree
			// with this one's may count.
			w := algo.Bucket(now, s)
			l.keys = []string{b.fixedKey(id, s, w), b.fixedKey(id, s, w-1), b.fixedKey(id, s, w+1)}
			reads = append(reads, c.B().Get().Key(l.keys[0]).Build())
			// The id's index holds when the window's counter was
			// created, if it was written for this window; else its
			// start stands for it.
			created := w * s
			if t, err := strconv.ParseInt(v, 10, 64); err == nil && algo.Bucket(t, s) == w {
				created = t
			}
			l.recs = []algo.Record{{Created: created}}
		} else {
			l.keys = []string{tag + f}
			reads = append(reads, engines[a].read(c, l.keys[0]))
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return now, nil, nil
	}
	for i, r := range c.DoMulti(ctx, reads...) {
		l := &ls[i]
		m, err := r.ToMessage()
		if err != nil && !rueidis.IsRedisNil(err) {
			return 0, nil, err
		}
		if l.algo != rl.Fixed {
			if l.recs, err = engines[l.algo].view(m, l.scale, l.sub); err != nil {
				return 0, nil, err
			}
			continue
		}
		if m.IsNil() {
			l.recs = nil
			continue
		}
		rec := &l.recs[0]
		if rec.Count, err = m.AsInt64(); err != nil {
			return 0, nil, fmt.Errorf("%w: fixed window count: %v", errParse, err)
		}
		// A counter keeps no time of its last change.
		rec.Modified = rec.Created
	}
	if !reset {
		return now, ls, nil
	}
	var dels rueidis.Commands
	fields := make([]string, 0, len(ls))
	for _, l := range ls {
		for _, k := range l.keys {
			dels = append(dels, c.B().Del().Key(k).Build())
		}
		fields = append(fields, l.field)
	}
	dels = append(dels, c.B().Hdel().Key(index).Field(fields...).Build())
	for _, r := range c.DoMulti(ctx, dels...) {
		if err := r.Error(); err != nil {
			return 0, nil, err
		}
	}
	return now, ls, nil
}

// parseField reads an index field: the algorithm, the scale and the sub
// (subOf; 0 when the algorithm has none) of the record it lists; ok is
// false for a field that is not one of ours.
func parseField(f string) (a rl.Algo, scale, sub int64, ok bool) {
	code, rest, found := strings.Cut(f, ":")
	if a, ok = algoOfCode(code); !found || !ok {
		return 0, 0, 0, false
	}
	sc, subText, hasSub := strings.Cut(rest, ":")
	scale, err := strconv.ParseInt(sc, 10, 64)
	if err != nil || scale <= 0 {
		return 0, 0, 0, false
	}
	if hasSub != (a == rl.Slices) {
		return 0, 0, 0, false
	}
	if hasSub {
		if sub, err = strconv.ParseInt(subText, 10, 64); err != nil || sub < check.MinSlices || sub > check.MaxSlices {
			return 0, 0, 0, false
		}
	}
	if field(code, scale, sub) != f {
		return 0, 0, 0, false // not as a check writes it ("01", "+1")
	}
	return a, scale, sub, true
}

// live returns the records of ls that a decision at now can still read, as
// the admin API shows them, ordered by scale, algo, slice count and bucket.
func live(now int64, ls []listed) []millis.Bucket {
	var out []millis.Bucket
	for _, l := range ls {
		for _, rec := range l.recs {
			if !algo.Expired(l.algo, l.scale, rec, now) {
				out = append(out, algo.View(l.algo, l.scale, rec))
			}
		}
	}
	slices.SortFunc(out, func(x, y millis.Bucket) int {
		return cmp.Or(cmp.Compare(x.Scale, y.Scale), cmp.Compare(x.Algo, y.Algo),
			cmp.Compare(x.Slices, y.Slices), cmp.Compare(x.Bucket, y.Bucket))
	})
	return out
}

// Buckets lists the live records of id. It needs Redis: with the circuit
// open it fails with an error matching raterlimiter.ErrUnavailable whatever
// the fail mode.
func (b *Backend) Buckets(ctx context.Context, id string) ([]rl.Bucket, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if err := (millis.Request{ID: id, Scale: 1}).Validate(b.cfg.MaxIDBytes); err != nil {
		return nil, err
	}
	now, ls, err := b.records(ctx, "buckets", id, 0, false)
	if err != nil {
		return nil, err
	}
	return millis.Buckets(live(now, ls)), nil
}

// Reset deletes the records of id, of every scale when scale is 0, and
// returns how many live ones it deleted. It needs Redis, like Buckets. This
// backend's cache of denials forgets the id; other sidecars' keep their
// denials of it until each ends (docs/redis.md).
func (b *Backend) Reset(ctx context.Context, id string, scale time.Duration) (int, error) {
	if err := b.usable(); err != nil {
		return 0, err
	}
	if err := check.Reset(id, scale, b.cfg.MaxIDBytes); err != nil {
		return 0, err
	}
	b.denials.forget(id)
	now, ls, err := b.records(ctx, "reset", id, scale.Milliseconds(), true)
	if err != nil {
		return 0, err
	}
	return len(live(now, ls)), nil
}
