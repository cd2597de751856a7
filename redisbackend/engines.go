package redisbackend

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// An engine keeps one algorithm's records on Redis, each (id, scale) in one
// key, tag + code + ":" + scale (and ":" + the slice count for the sliding
// window counters, subOf), decided by one small script (the token and
// the leaky bucket share gcra.lua). The scripts share a calling convention:
//
//	KEYS[1]  the record: one key, so a migrating slot never splits a check
//	ARGV[1]  scale, limit, hits, now (-1: Redis's TIME), deadline (-1:
//	         none; past it, change nothing and answer an error starting
//	         with DEADLINE), TTL slack in ms, then the algorithm's own
//	         (extra), packed (packArgs)
//
// and answer what their engine's decide reads: the sliding window, the
// token bucket, the sliding window counters and the leaky bucket the record
// as it was (a string is the cheapest answer a script gives), led by the
// time decided at when the script read TIME; the log its decision. A script
// never rewinds (a now behind the record's last change decides at that
// change), sets the record's TTL to the end of the last window that can read
// it plus the slack, and keeps to two redis.calls where it can (a GET, then
// a SETRANGE that keeps the TTL or a SET with it). TestCheapScripts counts
// the commands a check sends.
//
// Fixed windows are not here: they are counters without a script (fixed.go).
// A new algorithm is a script and one entry in engines, and, for its
// denials to be cached, a state in denycache.go.
type engine struct {
	// code names the algorithm in its keys and index fields: one letter.
	code string
	// script is the check script.
	script *script
	// extra, if set, returns the request's own parameters (a number of
	// slices, a queue; n of them, at most 2), packed after the six every
	// script takes. An array, not a slice: the arguments stay on the
	// caller's stack.
	extra func(r millis.Request) (x [2]int64, n int)
	// decide is the decision of r from the script's answer, the state it
	// was decided from (for the cache of denials), and how long the
	// record's kind must now stay listed, in ms (0: no longer than before;
	// kinds.go, docs/redis.md).
	decide func(r millis.Request, a answer) (millis.Decision, state, int64, error)
	// read builds the command that reads a record for the admin API, and
	// view turns its answer into the stored records, as package algo keeps
	// them (algo.View shows them), given the record's scale and sub.
	read func(c rueidis.Client, key string) rueidis.Completed
	view func(m rueidis.RedisMessage, scale, sub int64) ([]algo.Record, error)
}

// subOf is the number that names r's record beside its scale, following
// it in the record's key and index field: its slice count for the sliding
// window counters (of one scale, two slice counts never share a record),
// else 0 (none).
func subOf(r millis.Request) int64 {
	if r.Algo == rl.Slices {
		return r.SlicesOrDefault()
	}
	return 0
}

// answer is a check script's answer and what the client sent it.
type answer struct {
	msg rueidis.RedisMessage
	// now is the client's time the check was sent at; timed, that the
	// script read Redis's TIME instead, which its answer then leads with.
	now   int64
	timed bool
	slack int64 // the TTL slack the script was given
}

// raw reads an answer that is a record (packed numbers), led by the time
// decided at when timed: the time, the record's bytes, and whether there is
// one.
func (a answer) raw() (int64, string, bool, error) {
	now := a.now
	if a.msg.IsNil() {
		if a.timed {
			return 0, "", false, fmt.Errorf("%w: no time in a timed answer", errParse)
		}
		return now, "", false, nil
	}
	s, err := a.msg.ToString()
	if err != nil {
		return 0, "", false, fmt.Errorf("%w: %v", errParse, err)
	}
	if a.timed {
		t, ok := unpack(s[:min(len(s), 8)], 1)
		if !ok {
			return 0, "", false, fmt.Errorf("%w: an answer of %d bytes", errParse, len(s))
		}
		now, s = t[0], s[8:]
		if s == "" {
			return now, "", false, nil
		}
	}
	return now, s, true, nil
}

// record reads an answer that is a record of n packed numbers, led by the
// time decided at when timed: the time, the record, and whether there is
// one.
func (a answer) record(n int) (int64, []int64, bool, error) {
	now, s, ok, err := a.raw()
	if err != nil || !ok {
		return now, nil, false, err
	}
	v, ok := unpack(s, n)
	if !ok {
		return 0, nil, false, fmt.Errorf("%w: a record of %d bytes, want %d", errParse, len(s), 8*n)
	}
	return now, v, true, nil
}

// indexTTL is the TTL the id's index must be given when a record's expiry
// moves from was to expires (was ignored for a new record, isNew), at now:
// none while the expiry stays in its index epoch (a minute, or the scale
// when longer); else until the end of the expiry's epoch.
func indexTTL(scale, now, was, expires, slack int64, isNew bool) int64 {
	e := max(scale, 60_000)
	k := expires / e
	if !isNew && was/e == k {
		return 0
	}
	return (k+1)*e - now + slack
}

var (
	//go:embed start.lua
	startLua string
	//go:embed sliding.lua
	slidingLua string
	//go:embed gcra.lua
	gcraLua string
	//go:embed log.lua
	logLua string
	//go:embed fixed.lua
	fixedLua string
	//go:embed index.lua
	indexLua string
	//go:embed slices.lua
	slicesLua string
)

// The scripts, loaded once per server (EVALSHA; EVAL after NOSCRIPT). The
// check scripts but fixed.lua begin with start.lua.
var (
	slidingScript = newScript(startLua + slidingLua)
	gcraScript    = newScript(startLua + gcraLua)
	logScript     = newScript(startLua + logLua)
	fixedScript   = newScript(fixedLua)
	indexScript   = newScript(indexLua)
	slicesScript  = newScript(startLua + slicesLua)
)

// engines are the algorithms decided by a script of their own.
var engines = map[rl.Algo]*engine{
	rl.Sliding: {code: "w", script: slidingScript, decide: slidingDecide, read: getRecord, view: slidingView},
	rl.Token:   {code: "g", script: gcraScript, decide: gcraDecide, read: getRecord, view: tokenView, extra: tokenExtra},
	rl.Log:     {code: "l", script: logScript, decide: logDecide, read: logRead, view: logView},
	rl.Slices: {code: "n", script: slicesScript, decide: slicesDecide, read: getRecord, view: slicesView,
		extra: slicesExtra},
	rl.Leaky: {code: "k", script: gcraScript, decide: gcraDecide, read: getRecord, view: tokenView,
		extra: leakyExtra},
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

var errParse = fmt.Errorf("redisbackend: unexpected reply")

// slidingDecide reads the record "c m cr pc pm pcr" (sliding.lua) and
// decides as the script did.
func slidingDecide(r millis.Request, a answer) (millis.Decision, state, int64, error) {
	now, v, ok, err := a.record(6)
	if err != nil {
		return millis.Decision{}, state{}, 0, err
	}
	var c, m, cr, pc, pcr int64
	if ok {
		c, m, cr, pc, pcr = v[0], v[1], v[2], v[3], v[5]
		now = max(now, m) // never rewind
	}
	b := algo.Bucket(now, r.Scale)
	cb := algo.Bucket(cr, r.Scale)
	var cur, prev int64
	switch {
	case ok && cb == b:
		cur = c
		if pc > 0 && algo.Bucket(pcr, r.Scale) == b-1 {
			prev = pc
		}
	case ok && cb == b-1:
		prev = c
	}
	d, _, write := algo.Sliding(algo.Record{Count: cur}, cur > 0, algo.Record{Count: prev}, prev > 0, now, r)
	st := state{w: b, cur: cur, prev: prev}
	if !write || (ok && cb == b) {
		return d, st, 0, nil // nothing written, or within the window: the same expiry
	}
	return d, st, indexTTL(r.Scale, now, (cb+2)*r.Scale, (b+2)*r.Scale, a.slack, !ok), nil
}

// tokenExtra is gcra.lua's own arguments for a token bucket: no queue.
func tokenExtra(millis.Request) ([2]int64, int) { return [2]int64{-1, 0}, 2 }

// gcraDecide reads a token bucket's or a leaky bucket's record "m n d cr",
// the TAT m + n/d (gcra.lua; a leaky bucket's queue drains at its TAT), and
// decides as the script did, with algo.Token or algo.Leaky.
func gcraDecide(r millis.Request, a answer) (millis.Decision, state, int64, error) {
	f := algo.Token
	if r.Algo == rl.Leaky {
		f = algo.Leaky
	}
	now, v, ok, err := a.record(4)
	if err != nil {
		return millis.Decision{}, state{}, 0, err
	}
	var rec algo.Record
	if ok {
		rec = algo.Record{Count: int64(uint64(v[2])<<32 | uint64(uint32(v[1]))), Modified: v[0]}
	}
	d, next, write := f(rec, ok, now, r)
	st := state{rec: rec, ok: ok}
	if !write {
		return d, st, 0, nil
	}
	// The record expires at its TAT rounded up to a step of g ms; its TTL
	// is set again only when that moves (or the limit does).
	g := max(r.Scale/8, 1000)
	expires := (next.Modified/g + 1) * g
	was := (rec.Modified/g + 1) * g
	if ok && v[2] == r.Limit && was == expires {
		return d, st, 0, nil
	}
	return d, st, indexTTL(r.Scale, now, was, expires, a.slack, !ok), nil
}

// logDecide: the script decided and answered {now, index, allowed, count,
// reset, retry}.
func logDecide(r millis.Request, a answer) (millis.Decision, state, int64, error) {
	v, err := a.msg.AsIntSlice()
	if err == nil && len(v) < 6 {
		err = fmt.Errorf("%d elements, want 6", len(v))
	}
	if err != nil {
		return millis.Decision{}, state{}, 0, fmt.Errorf("%w: %v", errParse, err)
	}
	d := millis.Decision{Allowed: v[2] == 1, Count: v[3], Limit: r.Limit, ResetMS: v[4], RetryAfterMS: v[5], Now: v[0]}
	d.Remaining = max(0, r.Limit-d.Count)
	return d, state{}, v[1], nil
}

func getRecord(c rueidis.Client, key string) rueidis.Completed { return c.B().Get().Key(key).Build() }

// slidingView reads a sliding window's record: count, modified, created of
// the current window, then of the previous one (none when its count is 0).
func slidingView(m rueidis.RedisMessage, _, _ int64) ([]algo.Record, error) {
	_, v, ok, err := answer{msg: m}.record(6)
	if err != nil || !ok {
		return nil, err
	}
	out := []algo.Record{{Count: v[0], Modified: v[1], Created: v[2]}}
	if v[3] > 0 {
		out = append(out, algo.Record{Count: v[3], Modified: v[4], Created: v[5]})
	}
	return out, nil
}

// tokenView reads a token bucket's record (or a leaky bucket's): m, n, d,
// created (the TAT is m + n/d).
func tokenView(m rueidis.RedisMessage, _, _ int64) ([]algo.Record, error) {
	_, v, ok, err := answer{msg: m}.record(4)
	if err != nil || !ok {
		return nil, err
	}
	return []algo.Record{{Count: int64(uint64(v[2])<<32 | uint64(uint32(v[1]))), Created: v[3], Modified: v[0]}}, nil
}

func logRead(c rueidis.Client, key string) rueidis.Completed {
	return c.B().Hmget().Key(key).Field("c", "cr", "m").Build()
}

// logView reads the log's c, cr, m.
func logView(m rueidis.RedisMessage, _, _ int64) ([]algo.Record, error) {
	ms, err := m.ToArray()
	if err != nil || len(ms) != 3 {
		return nil, fmt.Errorf("%w: %v", errParse, err)
	}
	var v [3]int64
	for i := range v {
		if ms[i].IsNil() {
			return nil, nil
		}
		s, err := ms[i].ToString()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errParse, err)
		}
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("%w: %q", errParse, s)
		}
	}
	return []algo.Record{{Count: v[0], Created: v[1], Modified: v[2]}}, nil
}

// slicesHeader is the bytes before a slices record's older slices: base, m
// and cur as doubles. A slices record is one string (slices.lua): the
// window's running sum, the last change, the newest slice's hits, then the
// N-1 slices before it, N the slice count.
const slicesHeader = 24

// slicesExtra is slices.lua's own argument: the slice count.
func slicesExtra(r millis.Request) ([2]int64, int) { return [2]int64{r.SlicesOrDefault()}, 1 }

// leakyExtra is gcra.lua's own arguments for a queue: its length and the
// bound on the delay.
func leakyExtra(r millis.Request) ([2]int64, int) { return [2]int64{r.Queue, r.MaxDelayMS}, 2 }

// slicesRecord reads a slices record s of n slices: the time of its last
// change and the window's slices as of then, oldest first, those holding
// hits only.
func slicesRecord(s string, n, w int64) (m int64, list []algo.Slice, err error) {
	if int64(len(s)) != slicesHeader+4*(n-1) {
		return 0, nil, fmt.Errorf("%w: a record of %d slices of %d bytes", errParse, n, len(s))
	}
	v, _ := unpack(s[:slicesHeader], 3)
	m, cur := v[1], v[2]
	k := algo.Bucket(m, w)
	list = make([]algo.Slice, 0, 8)
	for i := range n - 1 {
		off := slicesHeader + 4*i
		if h := int64(binary.LittleEndian.Uint32([]byte(s[off : off+4]))); h > 0 {
			list = append(list, algo.Slice{Num: k - (n - 1) + i, Hits: h})
		}
	}
	if cur > 0 {
		list = append(list, algo.Slice{Num: k, Hits: cur})
	}
	return m, list, nil
}

// slicesDecide reads the record slices.lua answered and decides as the
// script did, with algo.SlicesCheck.
func slicesDecide(r millis.Request, a answer) (millis.Decision, state, int64, error) {
	now, s, ok, err := a.raw()
	if err != nil {
		return millis.Decision{}, state{}, 0, err
	}
	n, w, _ := algo.SliceOf(now, r)
	var list []algo.Slice
	var m int64
	if ok {
		if m, list, err = slicesRecord(s, n, w); err != nil {
			return millis.Decision{}, state{}, 0, err
		}
		now = max(now, m) // never rewind
	}
	d := algo.SlicesCheck(list, now, r)
	var st state
	if !d.Allowed {
		// For the cache of denials; nil, and not cached, when too long.
		st.w, st.slices = packSlices(list)
	}
	k := algo.Bucket(now, w)
	if !d.Allowed || r.Hits == 0 || (ok && algo.Bucket(m, w) == k) {
		return d, st, 0, nil // nothing written, or within the slice: the same expiry
	}
	// The record lives until its newest slice leaves the window.
	return d, st, indexTTL(r.Scale, now, (algo.Bucket(m, w)+n)*w, (k+n)*w, a.slack, !ok), nil
}

// slicesView reads a slices record of scale and slice count n as the
// records of its slices. On Redis a slice keeps no times of its own:
// Created and Modified are its start, and the newest slice's Modified is
// the record's last change.
func slicesView(msg rueidis.RedisMessage, scale, n int64) ([]algo.Record, error) {
	_, s, ok, err := answer{msg: msg}.raw()
	if err != nil || !ok {
		return nil, err
	}
	w := algo.SliceWidth(scale, n)
	m, list, err := slicesRecord(s, n, w)
	if err != nil {
		return nil, err
	}
	out := make([]algo.Record, len(list))
	for i, x := range list {
		out[i] = algo.SlicesRecord(n, x.Hits, x.Num*w, x.Num*w)
	}
	if len(out) > 0 && list[len(list)-1].Num == algo.Bucket(m, w) {
		out[len(out)-1].Modified = m
	}
	return out, nil
}
