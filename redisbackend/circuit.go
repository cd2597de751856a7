package redisbackend

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// unavailable reports whether err means Redis could not answer (so the
// circuit and the fail mode apply), rather than a bug or the caller giving
// up (ctx is the caller's context).
func (b *Backend) unavailable(ctx context.Context, err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		return downReason(err) != ""
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
	return !expired(ctx)
}

// expired reports whether ctx is done or its deadline has passed: a call
// bounded by the caller's deadline can end (its own timer having fired)
// a moment before the caller's context says so, and that wait was the
// caller's, not Redis being down.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
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

// reason names why the circuit changed, for logs and metrics: "refused",
// "reset", "closed" (EOF), "loading", "clusterdown", "masterdown",
// "tryagain", "readonly", "busy", "noreplicas", "oom" (full, refusing
// writes), "misconf" (refusing writes after a failed save), "no_answer",
// "not_connected", or "other" (Config.OnCircuit).
func reason(err error) string {
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
	if r := downReason(err); r != "" {
		return r
	}
	return "other"
}

// downCodes are the error codes with which Redis says it cannot serve a
// check now, rather than that the check is wrong: loading, busy, a Cluster
// or a master down, a replica (READONLY, NOREPLICAS), and a Redis that
// refuses writes, full at maxmemory with noeviction (OOM) or after a failed
// RDB save with stop-writes-on-bgsave-error (MISCONF). A check it refused
// counted nothing, so the fail mode may answer it.
var downCodes = []string{"LOADING", "BUSY", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS", "OOM", "MISCONF"}

// refusesWrites are the codes of a Redis that answers reads but refuses to
// write (docs/redis.md): while the circuit is open for one of them, only a
// write that succeeds closes it.
var refusesWrites = []string{"READONLY", "NOREPLICAS", "OOM", "MISCONF"}

// downReason returns, in lower case, which of downCodes Redis answered
// with, or "" when err is none of them. A script's error (Redis 7) begins
// with the code of the command that failed in it; an older Redis puts it
// after "-" within its own text.
func downReason(err error) string {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return ""
	}
	msg := re.Error()
	for _, p := range downCodes {
		if strings.HasPrefix(msg, p) || (strings.HasPrefix(msg, "ERR Error running script") && strings.Contains(msg, "-"+p+" ")) {
			return strings.ToLower(p)
		}
	}
	return ""
}

// stillRefusing asks Redis for a write (writable) and returns its error
// when it is still refused, or Redis is unavailable; else nil. Any other
// error (an ACL that forbids the probe's key, say) is no sign of a Redis
// refusing writes, and is not held against it.
func (b *Backend) stillRefusing(ctx context.Context) error {
	err := b.writable(ctx)
	if err != nil && (writeRefusal(err) || b.unavailable(ctx, err)) {
		return err
	}
	return nil
}

// writeRefusal reports whether err is Redis refusing writes (refusesWrites).
func writeRefusal(err error) bool {
	return slices.Contains(refusesWrites, strings.ToUpper(downReason(err)))
}

func (b *Backend) fail(err error) {
	if writeRefusal(err) {
		b.refusing.Store(true)
	}
	if b.br.failure() {
		b.cfg.Logger.Warn("redisbackend: redis unavailable, circuit open", "reason", reason(err), "err", err, "fail", b.cfg.Fail.String(),
			"probe_interval", b.br.interval)
		if b.cfg.OnCircuit != nil {
			b.cfg.OnCircuit(true, reason(err))
		}
	}
}

// succeed records an answer from Redis, which closes an open circuit;
// unless the circuit opened for Redis refusing writes, when it stays open
// until a write succeeds (writable): an answer that only read proves
// nothing then, and closing on it would only open the circuit again at the
// next check that writes.
func (b *Backend) succeed(ctx context.Context) {
	b.lastAnswer.Store(time.Now().UnixNano())
	if b.br.up() {
		return
	}
	if b.refusing.Load() && b.stillRefusing(ctx) != nil {
		return
	}
	if b.br.success() {
		b.refusing.Store(false)
		b.cfg.Logger.Info("redisbackend: redis answers again, circuit closed")
		if b.cfg.OnCircuit != nil {
			b.cfg.OnCircuit(false, "answered")
		}
	}
}
