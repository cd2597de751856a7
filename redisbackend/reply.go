package redisbackend

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

var errParse = errors.New("redisbackend: unexpected reply")

// raw is one record as the scripts return it; ok is false when absent.
type raw struct {
	rec algo.Record
	ok  bool
}

func parseInt(m rueidis.RedisMessage) (int64, bool, error) {
	if m.IsNil() {
		return 0, false, nil
	}
	s, err := m.ToString()
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", errParse, err)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %q", errParse, s)
	}
	return v, true, nil
}

// parseRecords reads a record hash's fields c, cr, m, pc, pcr, pm, d as the
// scripts return them (see check.lua) into the current and previous records
// of algorithm a. A token record's Count packs its fraction as algo.Record
// says: the denominator d in the high 32 bits, the numerator c in the low.
func parseRecords(a rl.Algo, ms []rueidis.RedisMessage) (cur, prev raw, err error) {
	var v [7]int64
	var ok [7]bool
	for i := range 7 {
		if v[i], ok[i], err = parseInt(ms[i]); err != nil {
			return cur, prev, err
		}
	}
	cur = raw{algo.Record{Count: v[0], Created: v[1], Modified: v[2]}, ok[0] && ok[1]}
	if a == rl.Token || a == rl.Leaky {
		cur.rec.Count = int64(uint64(v[6])<<32 | uint64(uint32(v[0])))
		return cur, prev, nil
	}
	prev = raw{algo.Record{Count: v[3], Created: v[4], Modified: v[5]}, ok[3] && ok[4]}
	return cur, prev, nil
}

// decision computes the decision from the state the check script read, with
// the same function as the embedded limiter.
func decision(r rueidis.RedisResult, req rl.Request) (rl.Decision, error) {
	ms, err := r.ToArray()
	if err != nil || len(ms) != 8 {
		return rl.Decision{}, fmt.Errorf("%w: %v (%d elements)", errParse, err, len(ms))
	}
	now, _, err := parseInt(ms[0])
	if err != nil {
		return rl.Decision{}, err
	}
	if req.Algo == rl.Log {
		return logDecision(now, req, ms[1:5])
	}
	c, p, err := parseRecords(req.Algo, ms[1:])
	if err != nil {
		return rl.Decision{}, err
	}
	cur, ok, prev, prevOK := current(req.Algo, req.Scale, now, c, p)
	d, _, _ := algo.Check(cur, ok, prev, prevOK, now, req)
	return d, nil
}

// logDecision reads the decision the check script made for a Log request:
// allowed (1 or 0), count, reset and retry-after.
func logDecision(now int64, req rl.Request, ms []rueidis.RedisMessage) (rl.Decision, error) {
	var v [4]int64
	for i := range v {
		var ok bool
		var err error
		if v[i], ok, err = parseInt(ms[i]); err != nil || !ok {
			return rl.Decision{}, fmt.Errorf("%w: log decision field %d: %v", errParse, i, err)
		}
	}
	d := rl.Decision{Allowed: v[0] == 1, Count: v[1], Limit: req.Limit, ResetMS: v[2], RetryAfterMS: v[3], Now: now}
	d.Remaining = max(0, req.Limit-d.Count)
	return d, nil
}

// current picks, from a record hash read at now, the records the algorithm
// reads, exactly as check.lua does: the current window's and (sliding) the
// previous one's.
func current(a rl.Algo, scale, now int64, c, p raw) (cur algo.Record, ok bool, prev algo.Record, prevOK bool) {
	if a == rl.Token || a == rl.Leaky {
		return c.rec, c.ok, prev, false
	}
	bk := algo.Bucket(now, scale)
	if c.ok && algo.Bucket(c.rec.Created, scale) == bk {
		cur, ok = c.rec, true
		if p.ok && algo.Bucket(p.rec.Created, scale) == bk-1 {
			prev, prevOK = p.rec, true
		}
	} else if c.ok && algo.Bucket(c.rec.Created, scale) == bk-1 {
		prev, prevOK = c.rec, true
	}
	if a != rl.Sliding {
		prev, prevOK = algo.Record{}, false
	}
	return cur, ok, prev, prevOK
}
