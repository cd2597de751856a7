package redisbackend

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

// The sliding window counters and the leaky bucket each have a script of
// their own (slices.lua, leaky.lua), beside check.lua's fixed, sliding,
// token and log. Their keys follow the same layout, PREFIX:{base64url(id)}:
// then the algorithm's code and the scale, under the id's hash tag:
//
//	PREFIX:{ID}:q:SCALE      leaky: the TAT, as token's hash (c, d, m, cr)
//	PREFIX:{ID}:w:SCALE:N    slices, N the slice count: a field per slice
//
// and both are listed in the id's index under the same field (q:SCALE,
// w:SCALE:N), which Buckets and Reset read.

//go:embed slices.lua
var slicesLua string

//go:embed leaky.lua
var leakyLua string

//go:embed slicesrecords.lua
var slicesRecordsLua string

var (
	slicesScript        = newScript(slicesLua)
	leakyScript         = newScript(leakyLua)
	slicesRecordsScript = newScript(slicesRecordsLua)
)

// scriptOf returns the script that decides algorithm a, by its place in
// scripts (check.lua, slices.lua, leaky.lua).
func scriptOf(a rl.Algo) int {
	switch a {
	case rl.Slices:
		return 1
	case rl.Leaky:
		return 2
	}
	return 0
}

// runChecks runs the script of each request of rs (valid, non-empty), as
// run does, one pipeline per script; requests of one id and algorithm keep
// their order. Requests of different algorithms never share a key, so their
// order between pipelines does not matter.
func (b *Backend) runChecks(ctx context.Context, rs []rl.Request, now, deadline string) []rueidis.RedisResult {
	scripts := [...]script{b.check, slicesScript, leakyScript}
	kv := func(r rl.Request) ([]string, []string) {
		if scriptOf(r.Algo) != 0 {
			return b.queueSlicesArgs(r, now, deadline)
		}
		return b.checkArgs(r, now, deadline)
	}
	first := scriptOf(rs[0].Algo)
	if !slices.ContainsFunc(rs, func(r rl.Request) bool { return scriptOf(r.Algo) != first }) {
		return b.run(ctx, scripts[first], len(rs), func(i int) ([]string, []string) { return kv(rs[i]) })
	}
	res := make([]rueidis.RedisResult, len(rs))
	for s := range scripts {
		var at []int
		for i := range rs {
			if scriptOf(rs[i].Algo) == s {
				at = append(at, i)
			}
		}
		if len(at) == 0 {
			continue
		}
		for j, r := range b.run(ctx, scripts[s], len(at), func(j int) ([]string, []string) { return kv(rs[at[j]]) }) {
			res[at[j]] = r
		}
	}
	return res
}

// queueSlicesArgs returns the keys and arguments of slices.lua or leaky.lua
// for r.
func (b *Backend) queueSlicesArgs(r rl.Request, now, deadline string) (keys, args []string) {
	var stack [128]byte
	buf := append(stack[:0], b.cfg.Prefix...)
	buf = append(buf, ":{"...)
	buf = base64.RawURLEncoding.AppendEncode(buf, []byte(r.ID))
	buf = append(buf, "}:"...)
	tagLen := len(buf)
	var extra string
	if r.Algo == rl.Slices {
		extra = strconv.FormatInt(r.SlicesOrDefault(), 10)
		buf = append(buf, "w:"...)
		buf = strconv.AppendInt(buf, r.Scale, 10)
		buf = append(buf, ':')
		buf = append(buf, extra...)
	} else {
		buf = append(buf, "q:"...)
		buf = strconv.AppendInt(buf, r.Scale, 10)
	}
	key := string(buf)
	index := string(append(buf[:tagLen], 'i'))
	args = []string{strconv.FormatInt(r.Scale, 10), strconv.FormatInt(r.Limit, 10),
		strconv.FormatInt(r.Hits, 10), now, key[tagLen:], b.slack, deadline}
	if r.Algo == rl.Slices {
		args = append(args, extra)
	} else {
		args = append(args, strconv.FormatInt(r.Queue, 10), strconv.FormatInt(r.MaxDelayMS, 10))
	}
	return []string{key, index}, args
}

// decisionOf computes the decision from what r's script returned, with the
// same function as the embedded limiter.
func decisionOf(res rueidis.RedisResult, req rl.Request) (rl.Decision, error) {
	if req.Algo != rl.Slices {
		return decision(res, req) // leaky answers as token's state
	}
	ms, err := res.ToArray()
	if err != nil || len(ms)%2 != 1 {
		return rl.Decision{}, fmt.Errorf("%w: %v (%d elements)", errParse, err, len(ms))
	}
	now, _, err := parseInt(ms[0])
	if err != nil {
		return rl.Decision{}, err
	}
	list := make([]algo.Slice, 0, (len(ms)-1)/2)
	for p := ms[1:]; len(p) > 0; p = p[2:] {
		num, ok1, err1 := parseInt(p[0])
		hits, ok2, err2 := parseInt(p[1])
		if err1 != nil || err2 != nil || !ok1 || !ok2 {
			return rl.Decision{}, fmt.Errorf("%w: a slice of %q", errParse, req.ID)
		}
		list = append(list, algo.Slice{Num: num, Hits: hits})
	}
	slices.SortFunc(list, func(a, b algo.Slice) int { return cmp.Compare(a.Num, b.Num) })
	return algo.SlicesCheck(list, now, req), nil
}

// slicesRecords lists (mode "list") or deletes (mode "reset", of scale, 0
// for every scale) the slices hashes of id, and returns their live slices
// as the admin API shows them. On Redis a slice keeps no times of its own:
// Created and Modified are its start, and the newest slice's Modified is
// its hash's last change.
func (b *Backend) slicesRecords(ctx context.Context, mode, id string, scale int64) ([]rl.Bucket, error) {
	tag := b.tag(id)
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	res := b.run(cctx, slicesRecordsScript, 1, func(int) ([]string, []string) {
		return []string{tag + "i"}, []string{mode, tag, strconv.FormatInt(scale, 10), b.now()}
	})[0]
	ms, err := res.ToArray()
	if err != nil || len(ms) == 0 {
		if err == nil {
			err = fmt.Errorf("%w: no time", errParse)
		}
		if b.unavailable(ctx, err) {
			b.fail(err)
			return nil, &unavailableError{cause: err}
		}
		return nil, fmt.Errorf("redisbackend: %s: %w", mode, err)
	}
	now, _, err := parseInt(ms[0])
	if err != nil {
		return nil, err
	}
	var out []rl.Bucket
	for g := ms[1:]; len(g) >= 2; {
		f, err := g[0].ToString()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errParse, err)
		}
		cnt, err := g[1].AsInt64()
		if err != nil || cnt < 0 || int64(len(g)-2) < cnt {
			return nil, fmt.Errorf("%w: fields of %q", errParse, f)
		}
		fields := g[2 : 2+cnt]
		g = g[2+cnt:]
		sc, ns, _ := strings.Cut(strings.TrimPrefix(f, "w:"), ":")
		s, errS := strconv.ParseInt(sc, 10, 64)
		n, errN := strconv.ParseInt(ns, 10, 64)
		if errS != nil || errN != nil || n < rl.MinSlices || n > rl.MaxSlices || s < 1 {
			continue // not ours
		}
		w := algo.SliceWidth(s, n)
		var last int64
		var list []rl.Bucket
		for p := fields; len(p) >= 2; p = p[2:] {
			k, _ := p[0].ToString()
			v, _ := p[1].ToString()
			val, errV := strconv.ParseInt(v, 10, 64)
			if k == "m" {
				last = val
				continue
			}
			num, errK := strconv.ParseInt(k, 10, 64)
			if errK != nil || errV != nil || now >= (num+n)*w {
				continue // gone, or not a slice
			}
			list = append(list, rl.Bucket{Scale: s, Algo: rl.Slices, Bucket: num, Slices: n, Count: val, Created: num * w, Modified: num * w})
		}
		slices.SortFunc(list, func(x, y rl.Bucket) int { return cmp.Compare(x.Bucket, y.Bucket) })
		if len(list) > 0 {
			list[len(list)-1].Modified = max(last, list[len(list)-1].Created)
		}
		out = append(out, list...)
	}
	return out, nil
}

// withSlices adds the live slices of id (and for a reset deletes them) to
// bs, the other records, and orders them as Limiter.Buckets does: scale,
// algorithm, slice count, bucket.
func (b *Backend) withSlices(ctx context.Context, mode, id string, scale int64, bs []rl.Bucket) ([]rl.Bucket, error) {
	sl, err := b.slicesRecords(ctx, mode, id, scale)
	if err != nil {
		return nil, err
	}
	bs = append(bs, sl...)
	slices.SortStableFunc(bs, func(x, y rl.Bucket) int {
		return cmp.Or(cmp.Compare(x.Scale, y.Scale), cmp.Compare(x.Algo, y.Algo), cmp.Compare(x.Slices, y.Slices), cmp.Compare(x.Bucket, y.Bucket))
	})
	return bs, nil
}

// Wait decides r and, when it is allowed with a delay (algo Leaky), sleeps
// until its turn (raterlimiter.Wait): a delay that would outlast ctx's
// deadline is refused before it takes a place in the queue.
func (b *Backend) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Wait(ctx, b, r)
}

var _ rl.Waiter = (*Backend)(nil)
