// Package core is the stack-independent middleware both adapters
// (middleware/nethttp, middleware/fasthttpmw) share: it checks a key
// against a middleware.Config and says what to answer.
package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/middleware"
)

// DefaultMaxDelay is the bound on a request's wait when
// Config.Policy.MaxDelay is 0: the sidecar's -max-wait.
const DefaultMaxDelay = 10 * time.Second

// policyChecker is a limiter that checks by the name of a policy the
// server owns (the sidecar's client, gateway mode): Config.PolicyName
// needs one.
type policyChecker interface {
	CheckPolicy(ctx context.Context, policy, id string, hits int64) (rl.Decision, rl.Request, error)
}

// Outcome is what the middleware does with a request.
type Outcome uint8

const (
	// Pass lets the request go on, with the decision's headers.
	Pass Outcome = iota
	// Unlimited lets the request go on without rate-limit headers: its key
	// is missing and Config.MissingKey is "skip", or the limiter
	// allowed it without saying by which policy (the client failing open
	// under PolicyName).
	Unlimited
	// Deny answers 429 with the decision's headers and Retry-After.
	Deny
	// Unavailable answers 503: the limiter failed.
	Unavailable
	// BadKey answers 400: the limiter refused the key as invalid.
	BadKey
	// NoKey answers 400 with NoKeyBody: the request's key is missing and
	// Config.MissingKey is "deny".
	NoKey
)

// missingKey is Config.MissingKey, read.
type missingKey uint8

const (
	missingDeny missingKey = iota
	missingSkip
	missingIP
)

// parseMissingKey reads Config.MissingKey.
func parseMissingKey(s string) (missingKey, error) {
	switch s {
	case "", "deny":
		return missingDeny, nil
	case "skip":
		return missingSkip, nil
	case "key:ip":
		return missingIP, nil
	}
	return 0, fmt.Errorf("middleware: Config.MissingKey is %q: it must be \"deny\" (or empty), \"skip\" or \"key:ip\"", s)
}

// Core is the stack-independent middleware: it checks a key and says what
// to answer. It is safe for concurrent use.
type Core struct {
	limiter   rl.Limiter
	policy    rl.Request    // its ID is each request's key
	byName    policyChecker // with Config.PolicyName
	name      string        // the headers' policy name
	proxies   clientip.Proxies
	missing   missingKey
	noKeyBody string
	onError   func(error)
}

// New validates cfg, failing as the adapters' New says, and returns its
// Core.
func New(cfg middleware.Config) (*Core, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("middleware: Config.Limiter is nil")
	}
	missing, err := parseMissingKey(cfg.MissingKey)
	if err != nil {
		return nil, err
	}
	keyName := cfg.KeyName
	if keyName == "" {
		keyName = "rate-limit key"
	}
	c := &Core{limiter: cfg.Limiter, name: headers.PolicyName, missing: missing,
		noKeyBody: "Bad request: missing " + keyName + "\n", onError: cfg.OnError}
	if cfg.PolicyName != "" {
		if cfg.Policy != (rl.Request{}) {
			return nil, errors.New("middleware: Config.Policy is set beside Config.PolicyName: the sidecar's policy sets the limit; leave Policy zero")
		}
		pc, ok := cfg.Limiter.(policyChecker)
		if !ok {
			return nil, fmt.Errorf("middleware: Config.PolicyName needs a limiter that checks by policy (the sidecar's client), not %T", cfg.Limiter)
		}
		c.byName, c.name = pc, cfg.PolicyName
	} else {
		if cfg.Policy.Limit == 0 {
			// Legal in a Request (a limit of zero denies every hit), but
			// in a middleware's policy almost always a forgotten field.
			return nil, errors.New("middleware: Config.Policy.Limit is 0, which would deny every request: " +
				"set Policy's Limit and Scale (or PolicyName, a policy of the sidecar); " +
				"to refuse every request on purpose, answer 429 from a handler of your own")
		}
		c.policy = check.Counted(cfg.Policy)
		c.policy.ID = "x"
		if c.policy.MaxDelay == 0 {
			c.policy.MaxDelay = DefaultMaxDelay
		}
		if err := check.Validate(c.policy, 0); err != nil {
			return nil, fmt.Errorf("middleware: bad Config.Policy: %w", err)
		}
	}
	p, err := ParseProxies(cfg.TrustedProxies...)
	if err != nil {
		return nil, err
	}
	c.proxies = p
	return c, nil
}

// PolicyName is the name the RateLimit headers give the policy: "default",
// or Config.PolicyName.
func (c *Core) PolicyName() string { return c.name }

// Proxies returns the trusted proxies.
func (c *Core) Proxies() clientip.Proxies { return c.proxies }

// NoKeyBody is the body of the NoKey answer: "Bad request: missing ",
// Config.KeyName and a newline.
func (c *Core) NoKeyBody() string { return c.noKeyBody }

// fallbackPrefix starts the id Config.MissingKey "key:ip" counts a request
// under: HTTP header values cannot hold a NUL (net/http and fasthttp refuse
// them), so no key read from a header is ever one of these ids.
const fallbackPrefix = "\x00missing_key\x00"

// Check decides the request whose key is key; clientIP returns the
// client's address, for Config.MissingKey "key:ip". The request and
// decision are meaningful for Pass and Deny only.
func (c *Core) Check(ctx context.Context, key string, clientIP func() string) (rl.Request, rl.Decision, Outcome) {
	if strings.TrimSpace(key) == "" {
		switch c.missing {
		case missingSkip:
			return rl.Request{}, rl.Decision{}, Unlimited
		case missingIP:
			key = fallbackPrefix + clientIP()
		default:
			return rl.Request{}, rl.Decision{}, NoKey
		}
	}
	var r rl.Request
	var d rl.Decision
	var err error
	if c.byName != nil {
		d, r, err = c.byName.CheckPolicy(ctx, c.name, key, 0)
	} else {
		r = c.policy
		r.ID = key
		d, err = c.limiter.CheckRate(ctx, r)
	}
	switch {
	case err == nil && d.Allowed && r.Scale == 0:
		return r, d, Unlimited // no policy to show in the headers
	case err == nil && d.Allowed:
		return r, d, Pass
	case err == nil:
		return r, d, Deny
	}
	if c.onError != nil {
		c.onError(err)
	}
	if errors.Is(err, rl.ErrInvalid) {
		return r, d, BadKey
	}
	return r, d, Unavailable
}

// Hold waits the turn of an allowed request whose decision came with a
// delay (algo Leaky; at most Config.Policy.MaxDelay, which the check was
// bounded by) before it goes on, or until ctx ends, whose error it returns: the
// requester is gone. With PolicyName it returns at once (the sidecar
// holds the answers of a policy that waits).
func (c *Core) Hold(ctx context.Context, d rl.Decision) error {
	if c.byName != nil || !d.Allowed || d.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DenyBody returns the body of a 429 answer for d: "Too many requests,
// retry in N s" and a newline, N being Retry-After.
func DenyBody(d rl.Decision) string {
	return "Too many requests, retry in " + strconv.FormatInt(max(1, int64((d.RetryAfter+time.Second-1)/time.Second)), 10) + " s\n"
}

// Bodies of the other refusals.
const (
	UnavailableBody = "Rate limiter unavailable, retry later\n"
	BadKeyBody      = "Bad request: rate-limit key refused\n"
)

// ParseProxies parses addresses ("10.0.0.1", "::1") and networks
// ("10.0.0.0/8") into a clientip.Proxies, whose ClientIP walks
// X-Forwarded-For; its zero value trusts nobody.
func ParseProxies(list ...string) (clientip.Proxies, error) {
	p, err := clientip.ParseProxies(list...)
	if err != nil {
		return clientip.Proxies{}, fmt.Errorf("middleware: %s", strings.TrimPrefix(err.Error(), "clientip: "))
	}
	return p, nil
}
