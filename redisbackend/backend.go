package redisbackend

import (
	"cmp"
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

// clockSlack is added to every TTL when Config.Clock is set: the client's
// clock decides, but Redis expires keys by its own, which a test clock
// outruns or lags.
const clockSlack = time.Hour

//go:embed check.lua
var checkLua string

//go:embed records.lua
var recordsLua string

// Backend is a raterlimiter.Limiter on Redis. It is safe for concurrent use.
type Backend struct {
	cfg     Config
	client  atomic.Pointer[rueidis.Client] // nil until connected
	done    chan struct{}                  // closed by Close
	wg      sync.WaitGroup                 // the connecting goroutine
	check   script
	records script
	br      breaker
	log     *slog.Logger
	slack   string // ms added to every TTL
	closed  atomic.Bool
	// slots bounds the calls in flight; queued counts those waiting.
	slots  chan struct{}
	queued atomic.Int64
	// lastAnswer is when Redis last answered a call, UnixNano.
	lastAnswer atomic.Int64
	// queue holds single checks waiting for a sender (combine.go).
	queue chan *combined
}

var _ rl.Limiter = (*Backend)(nil)

// script is a Lua script and its SHA1, for EVALSHA.
type script struct{ body, sha string }

func newScript(body string) script {
	sum := sha1.Sum([]byte(body))
	return script{body: body, sha: hex.EncodeToString(sum[:])}
}

// New connects to the Redis of cfg.URL (a Cluster is discovered by itself) and
// returns a Backend. Redis must answer at the start; later outages are
// handled by the circuit and cfg.Fail.
func New(cfg Config) (*Backend, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, errors.New("redisbackend: prefix must not contain { or }")
	}
	if cfg.Timeout < 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = rl.DefaultMaxIDBytes
	}
	if cfg.Fail > FailLocal {
		return nil, fmt.Errorf("redisbackend: unknown fail mode %d", cfg.Fail)
	}
	if cfg.Fail == FailLocal && cfg.Fallback == nil {
		return nil, ErrNoFallback
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opt, err := rueidis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redisbackend: url: %w", err)
	}
	if cfg.TLS != nil {
		opt.TLSConfig = cfg.TLS
	}
	opt.DisableCache = true
	// Connecting may take longer than a call (a TLS handshake on a busy
	// host); a call's own dial is bounded by the call's deadline anyway.
	opt.Dialer = net.Dialer{Timeout: max(cfg.Timeout, 5*time.Second), KeepAlive: time.Second}
	// A connection whose writes and answers stall past this is dropped and
	// made again: longer than a caller's deadline, so a stall a caller can
	// wait out never costs the connection.
	opt.ConnWriteTimeout = max(10*cfg.Timeout, 2*DefaultCallTimeout)
	opt.DisableRetry = true
	opt.ClientName = "raterlimiter"
	b := &Backend{
		cfg:     cfg,
		check:   newScript(checkLua),
		records: newScript(recordsLua),
		log:     cfg.Logger,
		br:      breaker{interval: cfg.ProbeInterval, now: time.Now},
		slots:   make(chan struct{}, cfg.MaxInFlight),
		slack:   "0",
		done:    make(chan struct{}),
	}
	if cfg.Clock != nil {
		b.slack = strconv.FormatInt(clockSlack.Milliseconds(), 10)
	}
	client, err := rueidis.NewClient(opt)
	switch {
	case err == nil:
		b.client.Store(&client)
	case cfg.StartDown:
		b.fail(fmt.Errorf("connect: %w", err))
		b.wg.Add(1)
		go b.connect(opt)
	default:
		return nil, fmt.Errorf("redisbackend: connect: %w", err)
	}
	b.startSenders()
	return b, nil
}

// connect tries to connect every probe interval until it succeeds or the
// backend is closed (Config.StartDown).
func (b *Backend) connect(opt rueidis.ClientOption) {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		client, err := rueidis.NewClient(opt)
		if err != nil {
			continue
		}
		b.client.Store(&client)
		b.log.Info("redisbackend: connected")
		return
	}
}

// conn returns the client, or nil while not connected (Config.StartDown).
func (b *Backend) conn() rueidis.Client {
	if c := b.client.Load(); c != nil {
		return *c
	}
	return nil
}

// errNotConnected is the cause of failures before the first connection.
var errNotConnected = errors.New("redisbackend: not connected to redis yet")

// Close closes the connections; later calls fail with
// raterlimiter.ErrClosed. It is idempotent.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		close(b.done)
		b.wg.Wait()
		if c := b.conn(); c != nil {
			c.Close()
		}
	}
	return nil
}

var errClosed = fmt.Errorf("redisbackend: %w", rl.ErrClosed)

// Up reports whether the circuit is closed: Redis answered the last call
// that asked it.
func (b *Backend) Up() bool { return b.br.up() }

// Ping asks Redis for PING within the timeout, whatever the circuit's state;
// a success closes the circuit. For health checks.
func (b *Backend) Ping(ctx context.Context) error {
	if b.closed.Load() {
		return errClosed
	}
	c := b.conn()
	if c == nil {
		return &unavailableError{cause: errNotConnected}
	}
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	start := time.Now()
	err := c.Do(cctx, c.B().Ping().Build()).Error()
	b.observe("ping", start, err)
	if err != nil {
		if b.unavailable(ctx, err) {
			b.fail(err)
			return &unavailableError{cause: err}
		}
		return fmt.Errorf("redisbackend: ping: %w", err)
	}
	b.succeed()
	return nil
}

// CheckRate decides r with one atomic script on Redis. An invalid r fails
// with an error matching raterlimiter.ErrInvalid and reaches no Redis.
func (b *Backend) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	if err := r.Validate(b.cfg.MaxIDBytes); err != nil {
		return rl.Decision{}, err
	}
	ds, err := b.decide(ctx, "check", []rl.Request{r})
	if ds == nil {
		return rl.Decision{}, err
	}
	return ds[0], err
}

// CheckRates decides a batch, pipelined: one script per request, sent
// together (to each Cluster node its own). Requests of one id are decided in
// their order. If any request is invalid nothing is counted.
func (b *Backend) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	if err := rl.ValidateBatch(rs, b.cfg.MaxIDBytes); err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return []rl.Decision{}, nil
	}
	return b.decide(ctx, "check_batch", rs)
}

func algoCode(a rl.Algo) string {
	switch a {
	case rl.Sliding:
		return "s"
	case rl.Token:
		return "t"
	case rl.Log:
		return "l"
	}
	return "f"
}

func parseAlgoCode(s string) (rl.Algo, bool) {
	switch s {
	case "f":
		return rl.Fixed, true
	case "s":
		return rl.Sliding, true
	case "t":
		return rl.Token, true
	case "l":
		return rl.Log, true
	}
	return 0, false
}

// tag returns the prefix of every key of id: PREFIX:{base64url(id)}: — the
// hash tag keeps an id's keys in one Cluster slot, and base64url has no
// braces, so any bytes of id are safe.
func (b *Backend) tag(id string) string { return keyTag(b.cfg.Prefix, id) }

func keyTag(prefix, id string) string {
	return prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "}:"
}

// field names the record hash of (algo, scale) in an id's index; the hash's
// key is the id's tag followed by it.
func field(a rl.Algo, scale int64) string { return algoCode(a) + ":" + strconv.FormatInt(scale, 10) }

func (b *Backend) now() string {
	if b.cfg.Clock == nil {
		return ""
	}
	return strconv.FormatInt(b.cfg.Clock(), 10)
}

func (b *Backend) checkArgs(r rl.Request, now, deadline string) (keys, args []string) {
	// Both keys and the field from one buffer: PREFIX:{ID}:ALGO:SCALE, the
	// index PREFIX:{ID}:i, the field ALGO:SCALE.
	var stack [128]byte
	buf := append(stack[:0], b.cfg.Prefix...)
	buf = append(buf, ":{"...)
	buf = base64.RawURLEncoding.AppendEncode(buf, []byte(r.ID))
	buf = append(buf, "}:"...)
	tagLen := len(buf)
	buf = append(buf, algoCode(r.Algo)...)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, r.Scale, 10)
	key := string(buf)
	index := string(append(buf[:tagLen], 'i'))
	f := key[tagLen:]
	keys = []string{key, index}
	args = []string{algoCode(r.Algo), f[2:], strconv.FormatInt(r.Limit, 10),
		strconv.FormatInt(r.Hits, 10), now, f, b.slack, deadline}
	return keys, args
}

func evalsha(c rueidis.Client, s script, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func eval(c rueidis.Client, s script, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.body).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// run sends one script per item (keys and args of item i from kv), pipelined
// (a single one with the other callers' waiting single ones, combine.go),
// and sends again with EVAL, in order, those that found no script loaded.
func (b *Backend) run(ctx context.Context, s script, n int, kv func(i int) (keys, args []string)) []rueidis.RedisResult {
	c := b.conn()
	if c == nil {
		res := make([]rueidis.RedisResult, n)
		for i := range res {
			res[i] = rueidis.NewErrorResult(errNotConnected)
		}
		return res
	}
	cmds := make(rueidis.Commands, n)
	for i := range n {
		k, a := kv(i)
		cmds[i] = evalsha(c, s, k, a)
	}
	var res []rueidis.RedisResult
	if n == 1 {
		res = []rueidis.RedisResult{b.doCombined(ctx, cmds[0])}
	} else {
		res = c.DoMulti(ctx, cmds...)
	}
	var again []int
	for i := range res {
		if isNoScript(res[i].Error()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		retry := make(rueidis.Commands, len(again))
		for j, i := range again {
			k, a := kv(i)
			retry[j] = eval(c, s, k, a)
		}
		for j, r := range c.DoMulti(ctx, retry...) {
			res[again[j]] = r
		}
	}
	return res
}

// decide runs the check script for rs (valid, non-empty) and applies the
// fail mode to the requests Redis did not answer.
func (b *Backend) decide(ctx context.Context, op string, rs []rl.Request) ([]rl.Decision, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	if !b.br.allow() {
		return b.degrade(ctx, rs, make([]rl.Decision, len(rs)), allIndexes(len(rs)), ErrCircuitOpen)
	}
	if err := b.admit(ctx); err != nil {
		return nil, err
	}
	defer b.release()
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	now := b.now()
	start := time.Now()
	dl := b.deadlineArg(cctx)
	res := b.run(cctx, b.check, len(rs), func(i int) ([]string, []string) { return b.checkArgs(rs[i], now, dl) })
	ds := make([]rl.Decision, len(rs))
	var failed []int
	var cause, firstErr error
	for i, r := range res {
		var err error
		if err = r.Error(); err == nil {
			ds[i], err = decision(r, rs[i])
		}
		if err == nil {
			continue
		}
		if firstErr == nil {
			firstErr = err
		}
		if isPastDeadline(err) {
			// Redis answers, late: not down, and this check counted nothing.
			b.observe(op, start, err)
			return nil, &unavailableError{cause: fmt.Errorf("%w: %w", ErrPastDeadline, err)}
		}
		if !b.unavailable(ctx, err) {
			b.observe(op, start, err)
			if cctx.Err() != nil || isDeadline(err) {
				// The caller's deadline passed: Redis is slow, perhaps
				// stalled. That alone never opens the circuit, unless
				// nothing has been answered for DownAfter.
				b.unanswered(err)
				return nil, &unavailableError{cause: fmt.Errorf("waiting for redis: %w", err)}
			}
			return nil, fmt.Errorf("redisbackend: %s: %w", op, err)
		}
		if cause == nil {
			cause = err
		}
		failed = append(failed, i)
	}
	b.observe(op, start, firstErr)
	if failed == nil {
		b.succeed()
		return ds, nil
	}
	b.fail(cause)
	return b.degrade(ctx, rs, ds, failed, cause)
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// degrade answers rs[failed] by the fail mode; ds holds Redis's answers to the
// others.
func (b *Backend) degrade(ctx context.Context, rs []rl.Request, ds []rl.Decision, failed []int, cause error) ([]rl.Decision, error) {
	if b.cfg.OnDegraded != nil {
		b.cfg.OnDegraded(b.cfg.Fail, len(failed))
	}
	switch b.cfg.Fail {
	case FailOpen:
		now := time.Now().UnixMilli()
		if b.cfg.Clock != nil {
			now = b.cfg.Clock()
		}
		for _, i := range failed {
			ds[i] = rl.Decision{Allowed: true, Limit: rs[i].Limit, Remaining: rs[i].Limit, Now: now}
		}
	case FailLocal:
		sub := make([]rl.Request, len(failed))
		for j, i := range failed {
			sub[j] = rs[i]
		}
		local, err := b.cfg.Fallback.CheckRates(ctx, sub)
		if err != nil {
			return nil, &unavailableError{cause: errors.Join(cause, fmt.Errorf("fallback: %w", err))}
		}
		for j, i := range failed {
			ds[i] = local[j]
		}
	default:
		return nil, &unavailableError{cause: cause}
	}
	return ds, &DegradedError{Mode: b.cfg.Fail, Decisions: ds, Err: cause}
}

// unavailable reports whether err means Redis could not answer (so the
// circuit and the fail mode apply), rather than a bug or the caller giving
// up (ctx is the caller's context).
func (b *Backend) unavailable(ctx context.Context, err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		for _, p := range []string{"LOADING", "BUSY", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	if errors.Is(err, errParse) {
		return false
	}
	if b.cfg.Timeout == 0 && isDeadline(err) {
		// No ceiling of our own: a deadline is the caller's, and the wait
		// for its answer says Redis is slow, not that it is down (see
		// unanswered).
		return false
	}
	return ctx.Err() == nil
}

// isDeadline reports whether err is a wait that ran out of time.
func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

func (b *Backend) observe(op string, start time.Time, err error) {
	if b.cfg.OnCall != nil {
		b.cfg.OnCall(op, time.Since(start), err)
	}
}

// unanswered notes a call whose caller gave up waiting; after DownAfter
// without a single answer, Redis counts as down.
func (b *Backend) unanswered(cause error) {
	if last := b.lastAnswer.Load(); last != 0 && time.Since(time.Unix(0, last)) > b.cfg.DownAfter {
		b.fail(&noAnswerError{since: b.cfg.DownAfter, cause: cause})
	}
}

// noAnswerError is why the circuit opens when calls only time out.
type noAnswerError struct {
	since time.Duration
	cause error
}

func (e *noAnswerError) Error() string {
	return "redisbackend: no answer from redis for more than " + e.since.String() + ": " + e.cause.Error()
}

func (e *noAnswerError) Unwrap() error { return e.cause }

// errShed is the cause of calls refused before reaching Redis: too many
// waiting, or too little time left to wait.
var errShed = errors.New("redisbackend: overloaded: too many calls waiting for redis")

// minBudget is the least time a call must have left to be worth sending.
const minBudget = time.Millisecond

// admit waits for a slot among MaxInFlight, as long as ctx allows; a call
// beyond MaxQueued waiting, or with less than minBudget left, is shed at
// once with an error matching raterlimiter.ErrUnavailable (nothing sent,
// nothing counted).
func (b *Backend) admit(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < minBudget {
		return &unavailableError{cause: fmt.Errorf("%w (deadline too close)", errShed)}
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	if b.queued.Add(1) > int64(b.cfg.MaxQueued) {
		b.queued.Add(-1)
		return &unavailableError{cause: errShed}
	}
	defer b.queued.Add(-1)
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &unavailableError{cause: fmt.Errorf("%w: %w", errShed, ctx.Err())}
	}
}

func (b *Backend) release() { <-b.slots }

// callContext bounds one call: the caller's deadline, shortened to
// Config.Timeout when that is set, or DefaultCallTimeout without either.
func (b *Backend) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.cfg.Timeout > 0 {
		return context.WithTimeout(ctx, b.cfg.Timeout)
	}
	if _, ok := ctx.Deadline(); !ok {
		return context.WithTimeout(ctx, DefaultCallTimeout)
	}
	return context.WithCancel(ctx)
}

// Reason names why the circuit changed, for logs and metrics: "refused",
// "reset", "closed" (EOF), "loading", "clusterdown", "masterdown",
// "tryagain", "readonly", "busy", "noreplicas", "no_answer", "not_connected",
// or "other".
func Reason(err error) string {
	var na *noAnswerError
	switch {
	case err == nil:
		return "answered"
	case errors.As(err, &na):
		return "no_answer"
	case errors.Is(err, errNotConnected):
		return "not_connected"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "closed"
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		for _, p := range []string{"LOADING", "BUSY", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS"} {
			if strings.HasPrefix(msg, p) {
				return strings.ToLower(p)
			}
		}
	}
	return "other"
}

func (b *Backend) fail(err error) {
	if b.br.failure() {
		b.log.Warn("redisbackend: redis unavailable, circuit open", "reason", Reason(err), "err", err, "fail", b.cfg.Fail.String(),
			"probe_interval", b.cfg.ProbeInterval)
		if b.cfg.OnState != nil {
			b.cfg.OnState(false, err)
		}
	}
}

func (b *Backend) succeed() {
	b.lastAnswer.Store(time.Now().UnixNano())
	if b.br.success() {
		b.log.Info("redisbackend: redis answers again, circuit closed")
		if b.cfg.OnState != nil {
			b.cfg.OnState(true, nil)
		}
	}
}

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
	if a == rl.Token {
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
	if a == rl.Token {
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
	return live(now, ls), nil
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
	return len(live(now, ls)), nil
}
