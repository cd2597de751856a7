package redisbackend

import (
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

// An engine keeps one algorithm's records on Redis, each (id, scale) in one
// key, tag + code + ":" + scale, decided by one small script of its own. The
// scripts share a calling convention (docs/redis.md):
//
//	KEYS[1]  the record
//	ARGV[1]  scale, limit, hits, now (-1: Redis's TIME), deadline (-1:
//	         none), TTL slack in ms, then the algorithm's own (extra),
//	         packed (packArgs)
//	returns  {now, index, state...}, integers: the time decided at, the TTL
//	         the id's index must be given (0: none), and what decide reads
//
// Fixed windows are not here: they are counters without a script (fixed.go).
// A new algorithm is a script and one entry in engines.
type engine struct {
	// code names the algorithm in its keys and index fields: one letter.
	code string
	// script is the check script.
	script *script
	// extra, if set, returns the request's own parameters (a number of
	// slices, a queue), packed after the six every script takes.
	extra func(r rl.Request) []int64
	// decide is the decision of r at now from the state the script returned
	// after now and index, and that state for the cache of denials.
	decide func(r rl.Request, now int64, st []rueidis.RedisMessage) (rl.Decision, state, error)
	// read builds the command that reads a record for the admin API, and
	// view turns its answer into the stored records, as algo.Record.
	read func(c rueidis.Client, key string) rueidis.Completed
	view func(m rueidis.RedisMessage) (cur, prev raw, err error)
}

var (
	//go:embed sliding.lua
	slidingLua string
	//go:embed token.lua
	tokenLua string
	//go:embed log.lua
	logLua string
	//go:embed fixed.lua
	fixedLua string
	//go:embed index.lua
	indexLua string
)

// The scripts, loaded once per server (EVALSHA; EVAL after NOSCRIPT).
var (
	slidingScript = newScript(slidingLua)
	tokenScript   = newScript(tokenLua)
	logScript     = newScript(logLua)
	fixedScript   = newScript(fixedLua)
	indexScript   = newScript(indexLua)
)

// engines are the algorithms decided by a script of their own.
var engines = map[rl.Algo]*engine{
	rl.Sliding: {code: "w", script: slidingScript, decide: slidingDecide, read: getRecord, view: slidingView},
	rl.Token:   {code: "g", script: tokenScript, decide: tokenDecide, read: getRecord, view: tokenView},
	rl.Log:     {code: "l", script: logScript, decide: logDecide, read: logRead, view: logView},
}

// fixedCode names fixed windows in keys and index fields.
const fixedCode = "f"

// algoOfCode returns the algorithm whose records an index field of code
// names.
func algoOfCode(code string) (rl.Algo, bool) {
	if code == fixedCode {
		return rl.Fixed, true
	}
	for a, e := range engines {
		if e.code == code {
			return a, true
		}
	}
	return 0, false
}

// codeOf returns the code of algorithm a.
func codeOf(a rl.Algo) string {
	if e := engines[a]; e != nil {
		return e.code
	}
	return fixedCode
}

// raw is one stored record; ok is false when absent.
type raw struct {
	rec algo.Record
	ok  bool
}

var errParse = fmt.Errorf("redisbackend: unexpected reply")

// ints reads n integers from ms.
func ints(ms []rueidis.RedisMessage, n int) ([]int64, error) {
	if len(ms) < n {
		return nil, fmt.Errorf("%w: %d elements, want %d", errParse, len(ms), n)
	}
	out := make([]int64, n)
	for i := range out {
		v, err := ms[i].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("%w: element %d: %v", errParse, i, err)
		}
		out[i] = v
	}
	return out, nil
}

// slidingDecide: the state is {cur, prev}, the counts of the current and
// previous windows at now.
func slidingDecide(r rl.Request, now int64, st []rueidis.RedisMessage) (rl.Decision, state, error) {
	v, err := ints(st, 2)
	if err != nil {
		return rl.Decision{}, state{}, err
	}
	d, _, _ := algo.Sliding(algo.Record{Count: v[0]}, v[0] > 0, algo.Record{Count: v[1]}, v[1] > 0, now, r)
	return d, state{w: algo.Bucket(now, r.Scale), cur: v[0], prev: v[1]}, nil
}

// tokenDecide: the state is {m, n, d}, the stored TAT m + n/d (m = 0: no
// record).
func tokenDecide(r rl.Request, now int64, st []rueidis.RedisMessage) (rl.Decision, state, error) {
	v, err := ints(st, 3)
	if err != nil {
		return rl.Decision{}, state{}, err
	}
	rec := algo.Record{Count: int64(uint64(v[2])<<32 | uint64(uint32(v[1]))), Modified: v[0]}
	d, _, _ := algo.Token(rec, v[0] != 0, now, r)
	return d, state{rec: rec, ok: v[0] != 0}, nil
}

// logDecide: the script decided; the state is {allowed, count, reset,
// retry}.
func logDecide(r rl.Request, now int64, st []rueidis.RedisMessage) (rl.Decision, state, error) {
	v, err := ints(st, 4)
	if err != nil {
		return rl.Decision{}, state{}, err
	}
	d := rl.Decision{Allowed: v[0] == 1, Count: v[1], Limit: r.Limit, ResetMS: v[2], RetryAfterMS: v[3], Now: now}
	d.Remaining = max(0, r.Limit-d.Count)
	return d, state{}, nil
}

func getRecord(c rueidis.Client, key string) rueidis.Completed { return c.B().Get().Key(key).Build() }

// packed reads a record of n packed doubles (unpack); absent (nil) is ok =
// false.
func packed(m rueidis.RedisMessage, n int) ([]int64, bool, error) {
	if m.IsNil() {
		return nil, false, nil
	}
	s, err := m.ToString()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", errParse, err)
	}
	v, ok := unpack(s, n)
	if !ok {
		return nil, false, fmt.Errorf("%w: a record of %d bytes, want %d", errParse, len(s), 8*n)
	}
	return v, true, nil
}

// slidingView reads a sliding window's record: count, modified, created of
// the current window, then of the previous one.
func slidingView(m rueidis.RedisMessage) (cur, prev raw, err error) {
	v, ok, err := packed(m, 6)
	if err != nil || !ok {
		return cur, prev, err
	}
	cur = raw{algo.Record{Count: v[0], Modified: v[1], Created: v[2]}, true}
	prev = raw{algo.Record{Count: v[3], Modified: v[4], Created: v[5]}, v[3] > 0}
	return cur, prev, nil
}

// tokenView reads a token bucket's record: m, n, d, created (the TAT is
// m + n/d).
func tokenView(m rueidis.RedisMessage) (cur, prev raw, err error) {
	v, ok, err := packed(m, 4)
	if err != nil || !ok {
		return cur, prev, err
	}
	return raw{algo.Record{Count: int64(uint64(v[2])<<32 | uint64(uint32(v[1]))), Created: v[3], Modified: v[0]}, true}, prev, nil
}

func logRead(c rueidis.Client, key string) rueidis.Completed {
	return c.B().Hmget().Key(key).Field("c", "cr", "m").Build()
}

// logView reads the log's c, cr, m.
func logView(m rueidis.RedisMessage) (cur, prev raw, err error) {
	ms, err := m.ToArray()
	if err != nil || len(ms) != 3 {
		return cur, prev, fmt.Errorf("%w: %v", errParse, err)
	}
	var v [3]int64
	for i := range v {
		if ms[i].IsNil() {
			return cur, prev, nil
		}
		s, err := ms[i].ToString()
		if err != nil {
			return cur, prev, fmt.Errorf("%w: %v", errParse, err)
		}
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return cur, prev, fmt.Errorf("%w: %q", errParse, s)
		}
	}
	return raw{algo.Record{Count: v[0], Created: v[1], Modified: v[2]}, true}, prev, nil
}
