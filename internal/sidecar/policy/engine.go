// Package policy is the rule engine the sidecar owns in gateway mode and for
// the Envoy RLS: named rules (algo, limit, scale, hits) that callers cannot
// choose, the key a rule counts by, and one Engine that turns (rule, key)
// pairs into checks on any raterlimiter.Limiter.
//
// Protocol faces find the rules that apply to a request in their own way
// (api's /auth by a policies file's match blocks, rls by Envoy descriptors)
// and hand the pairs to the Engine, so every face counts the same way and
// the counters of a rule live under the same ids on memory and on Redis.
package policy

import (
	"context"
	"errors"
	"strconv"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// MaxRuleNameBytes is the longest rule name CounterID accepts.
const MaxRuleNameBytes = 255

// IDOverhead is the most bytes CounterID adds to a key: a backend that
// counts keys of up to n bytes for rules needs ids of n+IDOverhead bytes.
const IDOverhead = MaxRuleNameBytes + 2

// Rule is a limit the server owns: what a matched request is counted
// against. A Rule is read-only once loaded; share it by pointer.
type Rule struct {
	// Name identifies the rule in headers, metrics and counter ids:
	// 1 to MaxRuleNameBytes bytes, no NUL, as the loaders make it (a
	// policy's name, 64 bytes at most with "#missing_key" after it; the
	// RLS's, hashed when longer). Counters are keyed by (Name, key), so a
	// rule that keeps its name keeps its counters across reloads.
	Name string
	// Algo, Limit and Scale are those of raterlimiter.Request.
	Algo  rl.Algo
	Limit int64
	Scale int64
	// Hits is what one matched request counts; 0 means 1.
	Hits int64
	// Slices is the slice count of algo Slices (0: the default), and Queue
	// how many may wait with algo Leaky: those of raterlimiter.Request.
	Slices, Queue int64
	// Wait asks that a matched request wait its turn (algo Leaky): the
	// answer to /auth is held for the decision's delay, at most
	// Engine.MaxWaitMS, and a longer delay is a denial.
	Wait bool
	// Plans, if set, maps a plan's name to its limit: the plan is a value
	// read from the request (a header the application's authenticator
	// sets, Policy.PlanFrom); an unknown or absent plan gets Limit.
	Plans map[string]int64
	// Shadow rules are counted and reported but never deny.
	Shadow bool
	// Unlimited rules are never counted and always allow.
	Unlimited bool
}

// LimitFor returns the limit of plan: the plan's own, or the rule's Limit
// when plan is empty, unknown or the rule has no plans.
func (r *Rule) LimitFor(plan []byte) int64 {
	if len(plan) > 0 {
		if l, ok := r.Plans[string(plan)]; ok {
			return l
		}
	}
	return r.Limit
}

// CounterID appends to dst the id under which rule name counts key:
// a NUL, the name, a NUL, then the key's bytes as they are. Names hold no
// NUL, so two (name, key) pairs never share an id, whatever bytes the key
// holds; and ids of callers that choose their own limits never start with
// a NUL unless they mean to.
func CounterID(dst []byte, name string, key []byte) []byte {
	dst = append(dst, 0)
	dst = append(dst, name...)
	dst = append(dst, 0)
	return append(dst, key...)
}

// Check is one rule applied to one request.
type Check struct {
	// Rule is the rule that matched.
	Rule *Rule
	// Key is the value the rule counts by (opaque bytes: a peer address,
	// a header's value, several joined). It is read during Decide only.
	Key []byte
	// Plan is the request's plan, nil when the rule has none.
	Plan []byte
	// Hits overrides the rule's Hits when positive (Envoy's hits_addend).
	Hits int64
	// Peek decides without counting (hits 0): Envoy's hits_addend of 0 on
	// a descriptor.
	Peek bool
	// Fallback marks Key as the policy's missing_key fallback: it counts
	// under FallbackCounterID, apart from keys of the same bytes.
	Fallback bool
	// MissingKey marks a request that lacks the rule's key and is denied
	// for it (missing_key: deny): nothing is counted, Key is nil.
	MissingKey bool
	// BadKey marks a request denied for the key it sent (a header that
	// appears twice, a list, a key too long): nothing is counted, Key is
	// nil.
	BadKey KeyFault
}

// Result is the engine's answer for one Check.
type Result struct {
	// Rule is the check's rule.
	Rule *Rule
	// Request is what was sent to the limiter (its ID is the counter id);
	// the zero Request for an unlimited rule.
	Request rl.Request
	// Decision is the limiter's answer; for an unlimited rule an allowing
	// Decision with no counts; for a missing key a denying one.
	Decision rl.Decision
	// MissingKey reports a check denied for a missing key (Check.MissingKey):
	// no wait lets it pass, and nothing was counted.
	MissingKey bool
	// BadKey reports a check denied for the key it sent (Check.BadKey): no
	// wait lets it pass, and nothing was counted.
	BadKey KeyFault
}

// KeyRefused reports whether the result denies for the request's key
// (missing, or sent and not countable): nothing was counted.
func (r *Result) KeyRefused() bool { return r.MissingKey || r.BadKey != KeyFine }

// Denies reports whether the result denies the request: a key refused, or
// the limiter denied and the rule is not in shadow mode.
func (r *Result) Denies() bool { return r.KeyRefused() || !r.Decision.Allowed && !r.Rule.Shadow }

// Engine decides Checks on a Limiter. Its fields are set before first use
// and not changed after; it is then safe for concurrent use.
type Engine struct {
	// Limiter counts. Its MaxIDBytes must be at least MaxKeyBytes +
	// IDOverhead.
	Limiter rl.Limiter
	// MaxKeyBytes is the longest key accepted; a longer one fails Decide
	// (raterlimiter.ErrInvalid), never cut short (a cut key would be
	// someone else's).
	// Default check.DefaultMaxIDBytes.
	MaxKeyBytes int
	// MaxWaitMS bounds the delay of a rule that waits (Rule.Wait): its
	// requests carry it as raterlimiter.Request.MaxDelayMS, so a longer
	// wait is denied before it takes a place. 0: no bound.
	MaxWaitMS int64
}

// Decide counts every check and appends one Result per check, in order, to
// out. The counted checks go to the limiter in one call. A key that is too
// long or a rule outside the bounds fails the whole call before anything is
// counted, with an error that matches raterlimiter.ErrInvalid.
func (e *Engine) Decide(ctx context.Context, checks []Check, out []Result) ([]Result, error) {
	maxKey := e.MaxKeyBytes
	if maxKey <= 0 {
		maxKey = check.DefaultMaxIDBytes
	}
	base := len(out)
	var reqs []rl.Request
	var at []int // index in out of each request
	var buf []byte
	for i := range checks {
		c := &checks[i]
		res := Result{Rule: c.Rule}
		if c.Rule.Unlimited {
			res.Decision = rl.Decision{Allowed: true}
			out = append(out, res)
			continue
		}
		if c.MissingKey || c.BadKey != KeyFine {
			res.MissingKey, res.BadKey = c.MissingKey, c.BadKey
			out = append(out, res)
			continue
		}
		if len(c.Key) > maxKey {
			return out[:base], &rl.ItemError{Index: i, Err: &rl.FieldError{Field: "key",
				Rule: "must be at most " + strconv.Itoa(maxKey) + " bytes"}}
		}
		hits := c.Hits
		if hits <= 0 {
			hits = c.Rule.Hits
		}
		if hits <= 0 {
			hits = 1
		}
		if c.Peek {
			hits = 0
		}
		if c.Fallback {
			buf = FallbackCounterID(buf[:0], c.Rule.Name, c.Key)
		} else {
			buf = CounterID(buf[:0], c.Rule.Name, c.Key)
		}
		res.Request = rl.Request{ID: string(buf), Scale: millis.Duration(c.Rule.Scale), Limit: c.Rule.LimitFor(c.Plan),
			Hits: hits, Peek: hits == 0, Algo: c.Rule.Algo, Slices: c.Rule.Slices, Queue: c.Rule.Queue}
		if c.Rule.Wait {
			res.Request.MaxDelay = millis.Duration(e.MaxWaitMS)
		}
		at = append(at, len(out))
		reqs = append(reqs, res.Request)
		out = append(out, res)
	}
	var ds []rl.Decision
	var err error
	switch len(reqs) {
	case 0:
		return out, nil
	case 1:
		var d rl.Decision
		d, err = e.Limiter.CheckRate(ctx, reqs[0])
		ds = []rl.Decision{d}
	default:
		ds, err = e.Limiter.CheckRates(ctx, reqs)
	}
	if err != nil {
		return out[:base], err
	}
	if len(ds) != len(reqs) {
		return out[:base], errors.New("policy: the limiter answered " + strconv.Itoa(len(ds)) +
			" decisions for " + strconv.Itoa(len(reqs)) + " checks")
	}
	for j, k := range at {
		out[k].Decision = ds[j]
	}
	return out, nil
}
