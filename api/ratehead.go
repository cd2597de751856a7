package api

import (
	"bytes"
	"strconv"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/headers"
)

// The rate-limit headers' names as the contract spells them, for
// ResponseHeader.SetCanonical: the API's answers send names as given
// (Handler's DisableNormalizing), so SetBytesV would only copy them first.
var (
	keyPolicy     = []byte(headers.Policy)
	keyRateLimit  = []byte(headers.RateLimit)
	keyLimit      = []byte(headers.Limit)
	keyRemaining  = []byte(headers.Remaining)
	keyReset      = []byte(headers.Reset)
	keyRetryAfter = []byte(headers.RetryAfter)
)

// policySlots is how many (name, limit, window) values of RateLimit-Policy
// a scratch buffer keeps formatted; a power of two.
const policySlots = 8

// policyCache holds the formatted RateLimit-Policy and X-RateLimit-Limit
// values of the last limits and windows seen, direct-mapped: a request
// whose (name, limit, window) is in its slot copies them instead of
// formatting them. Its size is fixed, whatever the clients send (limits
// and windows are theirs to choose): a miss formats into the slot, as
// before the cache, and replaces what was there.
type policyCache struct {
	slots [policySlots]policySlot
}

type policySlot struct {
	name         string
	limit, scale int64 // scale in ms, the window as asked
	ok           bool
	quoted       int    // the length of the quoted name that starts policy
	policy       []byte // "NAME";q=LIMIT;w=WINDOW
	limitV       []byte // LIMIT
}

// get returns the slot of (name, limit, scale), formatted.
func (c *policyCache) get(name string, limit, scale int64) *policySlot {
	h := uint64(limit)*0x9e3779b97f4a7c15 ^ uint64(scale)*0xc2b2ae3d27d4eb4f ^ uint64(len(name))
	e := &c.slots[(h>>59)&(policySlots-1)]
	if e.ok && e.limit == limit && e.scale == scale && e.name == name {
		return e
	}
	e.name, e.limit, e.scale, e.ok = name, limit, scale, true
	e.policy = headers.AppendPolicyItem(e.policy[:0], name, limit, scale)
	e.quoted = bytes.LastIndex(e.policy, []byte(";q=")) // only digits and ";w=" follow it
	e.limitV = strconv.AppendInt(e.limitV[:0], limit, 10)
	return e
}

// setRateHeaders sets on h what headers.SetBytes sets for (name, r,
// d), byte for byte, the values of RateLimit-Policy and X-RateLimit-Limit
// from sc's cache. It returns buf, possibly grown, for the next answer.
func setRateHeaders(h *fasthttp.ResponseHeader, c *policyCache, buf []byte, name string, r rl.Request, d rl.Decision) []byte {
	e := c.get(name, r.Limit, r.Scale.Milliseconds())
	h.SetCanonical(keyPolicy, e.policy)
	buf = append(buf[:0], e.policy[:e.quoted]...)
	buf = append(buf, ";r="...)
	buf = strconv.AppendInt(buf, d.Remaining, 10)
	buf = append(buf, ";t="...)
	buf = strconv.AppendInt(buf, headers.ResetSeconds(d), 10)
	h.SetCanonical(keyRateLimit, buf)
	if d.Limit == r.Limit {
		h.SetCanonical(keyLimit, e.limitV)
	} else {
		h.SetCanonical(keyLimit, strconv.AppendInt(buf[:0], d.Limit, 10))
	}
	h.SetCanonical(keyRemaining, strconv.AppendInt(buf[:0], d.Remaining, 10))
	h.SetCanonical(keyReset, strconv.AppendInt(buf[:0], headers.ResetUnix(d), 10))
	if headers.Retryable(r, d) {
		h.SetCanonical(keyRetryAfter, strconv.AppendInt(buf[:0], headers.RetryAfterSeconds(d), 10))
	}
	return buf
}
