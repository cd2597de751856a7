package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
)

// clockSlack is added to every TTL when Config.Clock is set: the client's
// clock decides, but Redis expires keys by its own, which a test clock
// outruns or lags.
const clockSlack = time.Hour

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
	res := b.runChecks(cctx, rs, now, dl)
	ds := make([]rl.Decision, len(rs))
	var failed []int
	var cause, firstErr error
	for i, r := range res {
		var err error
		if err = r.Error(); err == nil {
			ds[i], err = decisionOf(r, rs[i])
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
