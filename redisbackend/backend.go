package redisbackend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// clockSlack is added to every TTL when Config.Clock is set: the client's
// clock decides, but Redis expires keys by its own, which a test clock
// outruns or lags.
const clockSlack = time.Hour

// windowSlack is how long a record decided on the client's clock outlives
// the last window that reads it: longer than sidecars' clocks disagree.
const windowSlack = 2 * time.Second

// Backend is a raterlimiter.Limiter on Redis. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	client atomic.Pointer[rueidis.Client] // nil until connected
	done   chan struct{}                  // closed by Close
	wg     sync.WaitGroup                 // the connecting goroutine
	br     breaker
	// scriptSlack and windowSlack are added to the TTLs of the scripts'
	// records and of fixed windows' counters: when the client's clock
	// decides, a sidecar whose clock is behind still reads a record a
	// little after the others have moved on.
	scriptSlack, windowSlack int64
	denials                  *denyCache // nil when Config.DenyCache < 0
	closed                   atomic.Bool
	// slots bounds the calls in flight; queued counts those waiting.
	slots  chan struct{}
	queued atomic.Int64
	// lastAnswer is when Redis last answered a call, UnixNano.
	lastAnswer atomic.Int64
	// refusing is set while the circuit is open for Redis refusing writes
	// (writeRefusal): only a write that succeeds closes it then.
	refusing atomic.Bool
	// queue holds single checks waiting for a sender (combine.go).
	queue chan *combined
	// kinds is what this backend has listed in the registry of kinds.
	kinds kinds
}

var _ rl.Limiter = (*Backend)(nil)

// New returns a Backend on the Redis of cfg.URL (a Cluster is discovered by
// itself). It does not wait for Redis: when Redis cannot be reached yet, the
// Backend starts with its circuit open, answers by cfg.Fail meanwhile, and
// connects in the background, trying again after a pause that doubles from
// 100 ms to a second (logging a failure at each step, then once a minute);
// Ping tells when Redis answers.
// Later outages are handled by the circuit and cfg.Fail as well. A cfg New
// cannot use (a malformed URL, FailLocal without a Fallback) fails with an
// error, one outside the bounds matching raterlimiter.ErrInvalid; so does a
// Redis that answers and refuses the connection (a wrong password, a
// certificate not trusted).
//
// A Backend must be made with New: the zero value's methods fail with an
// error that says so.
func New(cfg Config) (*Backend, error) {
	return newBackend(cfg, defaultProbeInterval)
}

// newBackend is New with the tests' probe interval (0: the default).
func newBackend(cfg Config, probeInterval time.Duration) (*Backend, error) {
	cfg.URL = cmp.Or(cfg.URL, defaultURL)
	cfg.Prefix = cmp.Or(cfg.Prefix, defaultPrefix)
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, errors.New("redisbackend: prefix must not contain { or }")
	}
	cfg.Timeout = max(cfg.Timeout, 0) // negative: none, as zero
	probeInterval = cmp.Or(probeInterval, defaultProbeInterval)
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = defaultDownAfter
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.MaxIDBytes <= 0 {
		cfg.MaxIDBytes = check.DefaultMaxIDBytes
	}
	if cfg.Fail > rl.FailLocal {
		return nil, fmt.Errorf("redisbackend: unknown fail mode %d", cfg.Fail)
	}
	if cfg.Fail == rl.FailLocal && cfg.Fallback == nil {
		return nil, errNoFallback
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
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
	opt.ConnWriteTimeout = max(10*cfg.Timeout, 2*defaultCallTimeout)
	opt.DisableRetry = true
	// One connection per Redis node, every call pipelined on it: a health
	// check (Ping) then proves the connection the checks use. With several,
	// a restarted Redis leaves the others broken until a check of each
	// fails (EOF), and each such failure opens the circuit again.
	opt.PipelineMultiplex = -1
	opt.ClientName = "raterlimiter"
	b := &Backend{
		cfg:         cfg,
		br:          breaker{interval: probeInterval, now: time.Now},
		slots:       make(chan struct{}, cfg.MaxInFlight),
		scriptSlack: windowSlack.Milliseconds(),
		windowSlack: windowSlack.Milliseconds(),
		done:        make(chan struct{}),
	}
	switch {
	case cfg.Clock != nil:
		b.scriptSlack, b.windowSlack = clockSlack.Milliseconds(), clockSlack.Milliseconds()
	case cfg.Deadlines:
		b.scriptSlack = 0 // Redis's clock decides and expires
	}
	if cfg.DenyCache >= 0 {
		b.denials = newDenyCache(cmp.Or(cfg.DenyCache, defaultDenyCache))
	}
	client, err := rueidis.NewClient(opt)
	switch {
	case err == nil:
		b.client.Store(&client)
	case !unreachable(err):
		// Redis answered, and refused us (a password, TLS): a Config to
		// fix, not an outage to wait out.
		return nil, fmt.Errorf("redisbackend: connect: %w", err)
	default:
		err = fmt.Errorf("connect: %w", err)
		b.cfg.Logger.Warn("redisbackend: cannot connect to redis yet; answering by the fail mode and trying again",
			"err", err, "fail", cfg.Fail.String(), "retry_in", probeInterval.String())
		b.fail(err)
		b.wg.Add(1)
		go b.connect(opt)
	}
	b.startSenders()
	return b, nil
}

// unreachable reports whether err is Redis not reachable at all (a dial
// that failed, a name that does not resolve): Redis not up yet, or a
// network down, which the backend waits out.
func unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// connect tries to connect until it succeeds or the backend is closed,
// pausing between attempts for the probe interval, then twice as long each
// time up to maxConnectBackoff. It logs a failure at each step of the
// backoff, then once a minute while it goes on.
func (b *Backend) connect(opt rueidis.ClientOption) {
	defer b.wg.Done()
	pause := b.br.interval
	var logged time.Time
	for attempt := 2; ; attempt++ {
		t := time.NewTimer(pause)
		select {
		case <-b.done:
			t.Stop()
			return
		case <-t.C:
		}
		client, err := rueidis.NewClient(opt)
		if err != nil {
			next := min(2*pause, max(maxConnectBackoff, b.br.interval))
			if next != pause || time.Since(logged) >= time.Minute {
				b.cfg.Logger.Warn("redisbackend: cannot connect to redis yet", "attempt", attempt, "err", err, "retry_in", next.String())
				logged = time.Now()
			}
			pause = next
			continue
		}
		b.client.Store(&client)
		b.cfg.Logger.Info("redisbackend: connected", "attempt", attempt)
		return
	}
}

// conn returns the client, or nil while not connected.
func (b *Backend) conn() rueidis.Client {
	if c := b.client.Load(); c != nil {
		return *c
	}
	return nil
}

// errCircuitOpen is the cause given while the circuit is open: Redis failed
// recently and was not asked.
var errCircuitOpen = errors.New("redisbackend: circuit open, redis not asked")

// errNotConnected is the cause of failures before the first connection.
var errNotConnected = errors.New("redisbackend: not connected to redis yet")

// Close closes the connections; later calls fail with
// raterlimiter.ErrClosed. It is idempotent.
func (b *Backend) Close() error {
	if b.done == nil {
		return nil // not made by New: nothing to close
	}
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
// that asked it (and a Backend still connecting, or not made by New, is not
// up).
func (b *Backend) Up() bool { return b.done != nil && b.br.up() }

// Ping asks Redis for PING and for a write that changes nothing, within the
// timeout, whatever the circuit's state: a Redis that answers reads but
// refuses writes (full at maxmemory with noeviction, or after a failed save)
// cannot count a check, and is unavailable as one that does not answer. A
// success closes the circuit; Redis unavailable or refusing writes opens it
// and fails with an error matching raterlimiter.ErrUnavailable. For health
// checks, and to wait for Redis after New.
func (b *Backend) Ping(ctx context.Context) error {
	if err := b.usable(); err != nil {
		return err
	}
	c := b.conn()
	if c == nil {
		return &unavailableError{cause: errNotConnected}
	}
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	start := time.Now()
	res := c.DoMulti(cctx, c.B().Ping().Build(), b.probe(c))
	err := res[0].Error()
	if err == nil {
		err = probed(res[1].Error())
	}
	b.observe("ping", start, err)
	if err != nil {
		if b.unavailable(ctx, err) {
			b.fail(err)
			return &unavailableError{cause: err}
		}
		return fmt.Errorf("redisbackend: ping: %w", err)
	}
	b.refusing.Store(false) // Redis just accepted a write
	b.succeed(ctx)
	return nil
}

// probe is a write that changes nothing: SET of a key that does not exist
// with XX, which Redis refuses as it refuses a check's writes when it is full
// (noeviction) or may not write (MISCONF, READONLY), and otherwise answers
// nil without creating the key.
func (b *Backend) probe(c rueidis.Client) rueidis.Completed {
	return c.B().Set().Key(b.cfg.Prefix + ":probe").Value("").Xx().PxMilliseconds(1).Build()
}

// probed is the error of probe's answer: nil when Redis accepted the write.
func probed(err error) error {
	if rueidis.IsRedisNil(err) {
		return nil
	}
	return err
}

// writable asks Redis whether it accepts writes (probe) within the timeout.
func (b *Backend) writable(ctx context.Context) error {
	c := b.conn()
	if c == nil {
		return errNotConnected
	}
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	return probed(c.Do(cctx, b.probe(c)).Error())
}

// CheckRate decides r on Redis: a fixed window with a counter, the other
// algorithms with an atomic script each. An invalid r fails with an error
// matching raterlimiter.ErrInvalid and reaches no Redis.
//
// Under FailOpen and FailLocal, a check Redis does not answer returns the
// fail mode's decision (its FailMode says which) and a nil error;
// Config.OnDegraded reports it.
func (b *Backend) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	if err := b.usable(); err != nil {
		return rl.Decision{}, err
	}
	if err := check.Validate(r, b.cfg.MaxIDBytes); err != nil {
		return rl.Decision{}, err
	}
	ds, err := b.decide(ctx, "check", []millis.Request{millis.Of(check.Counted(r))})
	if err != nil {
		return rl.Decision{}, err
	}
	return ds[0].Public(), nil
}

// usable fails when b was not made by New, or is closed.
func (b *Backend) usable() error {
	switch {
	case b.done == nil:
		return errNotNew
	case b.closed.Load():
		return errClosed
	}
	return nil
}

// errNotNew is the error of a Backend's methods when it was not made by New.
var errNotNew = errors.New("redisbackend: a Backend must be made with redisbackend.New")

// CheckRates decides a batch, pipelined: each request's commands sent
// together (to each Cluster node its own). Requests of one id are decided in
// their order. If any request is invalid nothing is counted.
// Under FailOpen and FailLocal, as CheckRate, the fail mode's decisions come
// with a nil error.
func (b *Backend) CheckRates(ctx context.Context, rs []rl.Request) ([]rl.Decision, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if err := check.Batch(rs, b.cfg.MaxIDBytes); err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return []rl.Decision{}, nil
	}
	counted := make([]millis.Request, len(rs))
	for i, r := range rs {
		counted[i] = millis.Of(check.Counted(r))
	}
	ds, err := b.decide(ctx, "check_batch", counted)
	if err != nil {
		return nil, err
	}
	pub := make([]rl.Decision, len(ds))
	for i, d := range ds {
		pub[i] = d.Public()
	}
	return pub, nil
}

// Wait waits for capacity: it returns once r is allowed (after its delay,
// with algo Leaky), checking again after each denial's RetryAfter, or with
// an error once ctx ends. It is raterlimiter.Wait(ctx, b, r); see there.
func (b *Backend) Wait(ctx context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Wait(ctx, b, r)
}

// clock is the client's time in Unix ms: Config.Clock, or the wall clock.
func (b *Backend) clock() int64 {
	if b.cfg.Clock != nil {
		return b.cfg.Clock().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// scriptNow is the now argument of a check script: the client's clock, or
// -1 (the script reads Redis's TIME) with Config.Deadlines, unless
// Config.Clock is set.
func (b *Backend) scriptNow(now int64) int64 {
	if b.cfg.Deadlines && b.cfg.Clock == nil {
		return -1
	}
	return now
}

// decide decides rs (valid, non-empty; b usable): the denials the local
// cache knows here, the rest on Redis, and by the fail mode those Redis did
// not answer.
func (b *Backend) decide(ctx context.Context, op string, rs []millis.Request) ([]millis.Decision, error) {
	now := b.clock()
	ds := make([]millis.Decision, len(rs))
	todo, pending := b.denials.answer(rs, now, ds)
	if b.cfg.OnLocalDenials != nil && len(todo) < len(rs) {
		b.cfg.OnLocalDenials(len(rs) - len(todo))
	}
	if len(todo) == 0 {
		return ds, nil
	}
	if !b.br.allow() {
		return b.degrade(ctx, rs, ds, todo, errCircuitOpen)
	}
	if b.refusing.Load() && !b.br.up() {
		// This call probes a circuit opened for Redis refusing writes: a
		// check that only reads would pass and prove nothing, so the probe
		// is a write, and while it is refused the fail mode answers.
		if err := b.stillRefusing(ctx); err != nil {
			return b.degrade(ctx, rs, ds, todo, err)
		}
		b.refusing.Store(false)
	}
	if err := b.admit(ctx); err != nil {
		return nil, err
	}
	defer b.release()
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	start := time.Now()
	calls, at := b.checkCalls(rs, todo, pending, now, b.scriptNow(now), b.deadlineArg(cctx))
	res := b.run(cctx, calls, len(rs) == 1)
	var failed []int
	var cause, firstErr error
	var after []call // index writes and saturated counters
	for j, i := range todo {
		d, st, more, err := b.decision(rs[i], at0(pending, i), now, res[at[j]])
		if err == nil {
			ds[i] = d
			after = append(after, more...)
			b.denials.remember(rs[i], d, st, now)
			continue
		}
		if firstErr == nil {
			firstErr = err
		}
		if isPastDeadline(err) {
			// Redis answers, late: not down, and this check counted nothing.
			b.observe(op, start, err)
			return nil, &unavailableError{cause: fmt.Errorf("%w: %w", errPastDeadline, err)}
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
	if len(after) > 0 {
		// The checks are decided and counted; these only keep the admin
		// API's index and a saturated counter right, so their failure
		// changes no answer (a record missing from the index is listed
		// again from its next refresh).
		b.sendAfter(cctx, after)
	}
	b.observe(op, start, firstErr)
	if failed == nil {
		b.succeed(ctx)
		return ds, nil
	}
	b.fail(cause)
	return b.degrade(ctx, rs, ds, failed, cause)
}

// at0 is xs[i], or 0 when xs is nil.
func at0(xs []int64, i int) int64 {
	if xs == nil {
		return 0
	}
	return xs[i]
}

// checkCalls returns the calls that decide rs[todo] at now (the client's
// clock; nowArg and deadline are the scripts' now and deadline arguments, -1
// for Redis's TIME and for none), and for each the index of the call whose
// answer decides it. pending (nil: none) holds the hits a fixed window's
// check adds besides its own (denyCache.answer).
func (b *Backend) checkCalls(rs []millis.Request, todo []int, pending []int64, now, nowArg, deadline int64) ([]call, []int) {
	calls := make([]call, 0, 2*len(todo))
	at := make([]int, len(todo))
	for j, i := range todo {
		r := rs[i]
		e := engines[r.Algo]
		if e == nil {
			calls, at[j] = b.fixedCalls(calls, r, at0(pending, i), now, nowArg, deadline)
			continue
		}
		var stack [160]byte
		buf := appendTag(stack[:0], b.cfg.Prefix, r.ID)
		buf = appendField(buf, e.code, r.Scale, subOf(r))
		at[j] = len(calls)
		args := [8]int64{r.Scale, r.Limit, r.Hits, nowArg, deadline, b.scriptSlack}
		n := 6
		if e.extra != nil {
			x, k := e.extra(r)
			n += copy(args[n:], x[:k])
		}
		calls = append(calls, call{op: opScript, s: e.script, key: string(buf), args: []string{packArgs(args[:n]...)}})
	}
	return calls, at
}

// decision turns Redis's answer to r's check at now into its decision and
// the state it was decided from (for the cache of denials), with the calls
// the check leaves to make: the id's index to refresh, a counter to
// saturate.
func (b *Backend) decision(r millis.Request, pending, now int64, res rueidis.RedisResult) (millis.Decision, state, []call, error) {
	e := engines[r.Algo]
	if e == nil {
		d, st, created, saturate, err := fixedDecision(r, pending, now, res)
		if err == nil {
			err = sane(d, r)
		}
		if err != nil {
			return d, st, nil, err
		}
		var more []call
		w := algo.Bucket(now, r.Scale)
		ttl := (w+1)*r.Scale - now + b.windowSlack
		if created {
			more = b.appendIndex(more, r.ID, field(fixedCode, r.Scale, 0), now, ttl)
		}
		if saturate {
			more = append(more, call{op: opSaturate, key: b.fixedKey(r.ID, r.Scale, w), ttl: ttl})
		}
		return d, st, more, nil
	}
	if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
		return millis.Decision{}, state{}, nil, err
	}
	m, _ := res.ToMessage()
	d, st, index, err := e.decide(r, answer{msg: m, now: now, timed: b.scriptNow(now) < 0, slack: b.scriptSlack})
	if err == nil {
		err = sane(d, r)
	}
	if err != nil || index <= 0 {
		return d, st, nil, err
	}
	return d, st, b.appendIndex(nil, r.ID, field(e.code, r.Scale, subOf(r)), d.Now, index), nil
}

// sane returns nil when d is a decision a check could make, and otherwise
// an error matching errParse: Redis held a record that no check writes (a
// counter below zero, planted or damaged), and answering from it would
// give a count below zero or a remaining outside 0 .. limit.
func sane(d millis.Decision, r millis.Request) error {
	if d.Count < 0 || d.Remaining < 0 || d.Remaining > r.Limit {
		return fmt.Errorf("%w: a record no check writes (count %d, remaining %d, limit %d)", errParse, d.Count, d.Remaining, r.Limit)
	}
	return nil
}
