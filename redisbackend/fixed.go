package redisbackend

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Fixed windows are plain counters, one key per window:
// tag + "f:" + scale + ":" + window, the window being floor(now/scale) by the
// client's clock. A check is two commands, pipelined:
//
//	SET key 0 NX PX ttl   creates the window's counter with its expiry
//	INCRBY key hits       counts, atomically, and answers the new count
//
// which cost Redis about what the two commands cost, against several times
// that for a script. INCRBY is atomic, so counts stay exact across sidecars;
// what a plain command cannot do is refuse to count past the caller's
// deadline, which Config.Deadlines keeps (fixed.lua), at a script's cost
// (docs/redis.md, "What a check counts").

// fixedKey returns the counter of (id, scale)'s window w.
func (b *Backend) fixedKey(id string, scale, w int64) string {
	var stack [160]byte
	buf := appendField(appendTag(stack[:0], b.cfg.Prefix, id), fixedCode, scale, 0)
	buf = append(buf, ':')
	return string(strconv.AppendInt(buf, w, 10))
}

// fixedCalls appends the calls of a fixed-window check of r at now (the
// client's clock), which also counts pending hits (denied by the cache of
// denials, not yet counted on Redis), and returns them with the index of the
// one whose answer is the count.
func (b *Backend) fixedCalls(calls []call, r millis.Request, pending, now, nowArg, deadline int64) ([]call, int) {
	w := algo.Bucket(now, r.Scale)
	key := b.fixedKey(r.ID, r.Scale, w)
	ttl := (w+1)*r.Scale - now + b.windowSlack
	hits := r.Hits + pending
	switch {
	case hits == 0:
		calls = append(calls, call{op: opGet, key: key})
	case b.cfg.Deadlines:
		calls = append(calls, call{op: opScript, s: fixedScript, key: key,
			args: []string{strconv.FormatInt(hits, 10), strconv.FormatInt(ttl, 10), optional(nowArg), optional(deadline)}})
	default:
		calls = append(calls, call{op: opCreate, key: key, ttl: ttl}, call{op: opIncr, key: key, n: hits})
	}
	return calls, len(calls) - 1
}

// isOverflow reports whether err is INCRBY refusing to pass 2^63-1.
func isOverflow(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "overflow")
}

// fixedDecision is the decision of r at now from the counter's answer: the
// count after the check (INCRBY, fixed.lua), or for a peek the count (GET,
// nil when absent); and the count, for the cache of denials. created reports
// a new window's counter; saturate, that INCRBY refused to pass 2^63-1, so
// the decision saturates as algo.Fixed does and the counter should be set to
// 2^63-1.
func fixedDecision(r millis.Request, pending, now int64, res rueidis.RedisResult) (d millis.Decision, st state, created, saturate bool, err error) {
	var count int64
	if err = res.Error(); err != nil {
		switch {
		case r.Hits+pending == 0 && rueidis.IsRedisNil(err):
			err = nil
		case isOverflow(err):
			count, saturate, err = 1<<63-1, true, nil
		default:
			return d, st, false, false, err
		}
	} else {
		m, _ := res.ToMessage()
		if count, err = m.AsInt64(); err != nil {
			return d, st, false, false, fmt.Errorf("%w: fixed window count: %v", errParse, err)
		}
	}
	before := count - r.Hits
	if saturate {
		before = count
	}
	d, _, _ = algo.Fixed(algo.Record{Count: before}, true, now, r)
	st = state{w: algo.Bucket(now, r.Scale), cur: d.Count}
	return d, st, r.Hits+pending > 0 && count == r.Hits+pending, saturate, nil
}

// optional is x in decimal, or "" for -1 (none).
func optional(x int64) string {
	if x < 0 {
		return ""
	}
	return strconv.FormatInt(x, 10)
}
