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
	"github.com/raterlimiter/raterlimiter/algo"
)

// listed is a record hash as records.lua returns it.
type listed struct {
	algo  rl.Algo
	scale int64
	cur   raw
	prev  raw
}

// recordsCall runs records.lua for id.
func (b *Backend) recordsCall(ctx context.Context, op, id string, scale int64) (int64, []listed, error) {
	if b.closed.Load() {
		return 0, nil, errClosed
	}
	if !b.br.allow() {
		return 0, nil, &unavailableError{cause: ErrCircuitOpen}
	}
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	mode := "list"
	if op == "reset" {
		mode = "reset"
	}
	tag := b.tag(id)
	start := time.Now()
	res := b.run(cctx, b.records, 1, func(int) ([]string, []string) {
		return []string{tag + "i"}, []string{mode, tag, strconv.FormatInt(scale, 10), b.now()}
	})[0]
	err := res.Error()
	var ms []rueidis.RedisMessage
	if err == nil {
		if ms, err = res.ToArray(); err != nil || len(ms) == 0 || (len(ms)-1)%8 != 0 {
			err = fmt.Errorf("%w: %v (%d elements)", errParse, err, len(ms))
		}
	}
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
	b.succeed()
	now, _, err := parseInt(ms[0])
	if err != nil {
		return 0, nil, err
	}
	var out []listed
	for g := ms[1:]; len(g) > 0; g = g[8:] {
		f, err := g[0].ToString()
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %v", errParse, err)
		}
		code, sc, found := strings.Cut(f, ":")
		a, okA := parseAlgoCode(code)
		s, errS := strconv.ParseInt(sc, 10, 64)
		if !found || !okA || errS != nil {
			continue // not ours
		}
		c, p, err := parseRecords(a, g[1:])
		if err != nil {
			return 0, nil, err
		}
		out = append(out, listed{algo: a, scale: s, cur: c, prev: p})
	}
	return now, out, nil
}

// live returns the records of ls that a decision at now can still read, as
// the admin API shows them, ordered by scale, algo and bucket.
func live(now int64, ls []listed) []rl.Bucket {
	var out []rl.Bucket
	for _, l := range ls {
		for _, r := range []raw{l.prev, l.cur} {
			if r.ok && (l.algo == rl.Sliding || r == l.cur) && !algo.Expired(l.algo, l.scale, r.rec, now) {
				out = append(out, algo.View(l.algo, l.scale, r.rec))
			}
		}
	}
	slices.SortFunc(out, func(x, y rl.Bucket) int {
		if x.Scale != y.Scale {
			return cmp.Compare(x.Scale, y.Scale)
		}
		if x.Algo != y.Algo {
			return cmp.Compare(x.Algo, y.Algo)
		}
		return cmp.Compare(x.Bucket, y.Bucket)
	})
	return out
}

// Buckets lists the live records of id. It needs Redis: with the circuit
// open it fails with an error matching raterlimiter.ErrUnavailable whatever
// the fail mode.
func (b *Backend) Buckets(ctx context.Context, id string) ([]rl.Bucket, error) {
	if err := (rl.Request{ID: id, Scale: 1}).Validate(b.cfg.MaxIDBytes); err != nil {
		return nil, err
	}
	now, ls, err := b.recordsCall(ctx, "buckets", id, 0)
	if err != nil {
		return nil, err
	}
	return b.withSlices(ctx, "list", id, 0, live(now, ls))
}

// Reset deletes the records of id, of every scale when scale is 0, and
// returns how many live ones it deleted. It needs Redis, like Buckets.
func (b *Backend) Reset(ctx context.Context, id string, scale int64) (int, error) {
	if err := rl.ValidateReset(id, scale, b.cfg.MaxIDBytes); err != nil {
		return 0, err
	}
	now, ls, err := b.recordsCall(ctx, "reset", id, scale)
	if err != nil {
		return 0, err
	}
	bs, err := b.withSlices(ctx, "reset", id, scale, live(now, ls))
	return len(bs), err
}
