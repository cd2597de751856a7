// Package headers formats the rate-limit response headers of the contract
// (RateLimit-Policy and RateLimit in the form of IETF
// draft-ietf-httpapi-ratelimit-headers-11, X-RateLimit-Limit, -Remaining and
// -Reset as GitHub's API, and Retry-After on denials) from a Request and its
// Decision, for any HTTP stack: the caller passes a function that sets one
// header, so net/http and fasthttp both use the same formatting.
//
// The package holds no state and is safe for concurrent use.
package headers

import (
	"strconv"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The header names, spelled as the contract spells them.
const (
	Policy     = "RateLimit-Policy"
	RateLimit  = "RateLimit"
	Limit      = "X-RateLimit-Limit"
	Remaining  = "X-RateLimit-Remaining"
	Reset      = "X-RateLimit-Reset"
	RetryAfter = "Retry-After"
)

// PolicyName is the name of the one policy the RateLimit-Policy and RateLimit
// headers describe.
const PolicyName = "default"

// Set calls set once for each header that the contract puts on the answer to
// r: RateLimit-Policy, RateLimit, X-RateLimit-Limit, X-RateLimit-Remaining,
// X-RateLimit-Reset and, when d denies a check that can pass later,
// Retry-After (see Retryable). The RateLimit-Policy and RateLimit items are
// named name: PolicyName, or a server-side policy's name. For example:
//
//	RateLimit-Policy: "default";q=10;w=60
//	RateLimit: "default";r=7;t=42
//	X-RateLimit-Limit: 10
//	X-RateLimit-Remaining: 7
//	X-RateLimit-Reset: 1700000042
//	Retry-After: 42
func Set(set func(key, value string), name string, r rl.Request, d rl.Decision) {
	var buf [64]byte
	SetBytes(func(key string, value []byte) { set(key, string(value)) }, buf[:0], name, r, d)
}

// SetBytes is Set for stacks that copy a header value from a byte slice, such
// as fasthttp's ResponseHeader.SetBytesV: it formats each value into buf
// (reusing its capacity; 64 bytes are always enough) and calls set with it.
// The value is valid only during the call. SetBytes returns buf, possibly
// grown, so a caller can keep it for the next response.
func SetBytes(set func(key string, value []byte), buf []byte, name string, r rl.Request, d rl.Decision) []byte {
	buf = AppendPolicyItem(buf[:0], name, r.Limit, r.Scale.Milliseconds())
	set(Policy, buf)
	buf = AppendRateLimitItem(buf[:0], name, d)
	set(RateLimit, buf)
	buf = strconv.AppendInt(buf[:0], d.Limit, 10)
	set(Limit, buf)
	buf = strconv.AppendInt(buf[:0], d.Remaining, 10)
	set(Remaining, buf)
	buf = strconv.AppendInt(buf[:0], ResetUnix(d), 10)
	set(Reset, buf)
	if Retryable(r, d) {
		buf = strconv.AppendInt(buf[:0], RetryAfterSeconds(d), 10)
		set(RetryAfter, buf)
	}
	return buf
}

// AppendPolicyItem appends one item of RateLimit-Policy:
// "NAME";q=LIMIT;w=WINDOW, the window (scale, ms) in seconds rounded up, at
// least 1. Several items of one header are joined with ", ".
func AppendPolicyItem(dst []byte, name string, limit, scale int64) []byte {
	dst = appendQuoted(dst, name)
	dst = append(dst, ";q="...)
	dst = strconv.AppendInt(dst, limit, 10)
	dst = append(dst, ";w="...)
	return strconv.AppendInt(dst, max(1, ceilSeconds(scale)), 10)
}

// appendQuoted appends name as a structured-field string: in quotes, with
// backslash and quote escaped, and bytes outside printable ASCII left out.
func appendQuoted(dst []byte, name string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20 && c < 0x7f:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// AppendRateLimitItem appends one item of RateLimit for d:
// "NAME";r=REMAINING;t=RESET, the reset in seconds rounded up (ResetSeconds:
// on a denial never earlier than Retry-After).
func AppendRateLimitItem(dst []byte, name string, d rl.Decision) []byte {
	dst = appendQuoted(dst, name)
	dst = append(dst, ";r="...)
	dst = strconv.AppendInt(dst, d.Remaining, 10)
	dst = append(dst, ";t="...)
	return strconv.AppendInt(dst, ResetSeconds(d), 10)
}

// ResetSeconds returns the t= of RateLimit for d: the seconds, rounded up,
// until d's window ends (Reset); on a denial, never fewer than
// Retry-After's. A window can end before a denied request may pass (the
// sliding window still weighs the window before; a log's oldest hit may
// leave before enough have), and a client that waits t= seconds must not
// be denied again for it.
func ResetSeconds(d rl.Decision) int64 {
	t := ceilSeconds(millis.Ceil(d.Reset))
	if !d.Allowed {
		t = max(t, RetryAfterSeconds(d))
	}
	return t
}

// ResetUnix returns the value of X-RateLimit-Reset: the Unix time in seconds,
// rounded up, at which d's window ends (d.ResetAt); on a denial never
// earlier than the time Retry-After names (d.Now + RetryAfter).
func ResetUnix(d rl.Decision) int64 {
	m := millis.OfDecision(d)
	at := m.ResetAt()
	if !d.Allowed {
		at = max(at, m.Now+max(m.RetryAfterMS, 1))
	}
	return ceilSeconds(at)
}

// Retryable reports whether a denial can pass later, so its answer carries
// Retry-After: a check of more hits than its limit (limit 0 included)
// never passes, and a Retry-After would invite a client to retry forever;
// its 429 comes without one.
func Retryable(r rl.Request, d rl.Decision) bool { return !d.Allowed && r.Hits <= r.Limit }

// RetryAfterSeconds returns the value of Retry-After for a denial: d's
// RetryAfter in seconds, rounded up, at least 1.
func RetryAfterSeconds(d rl.Decision) int64 { return max(1, ceilSeconds(millis.Ceil(d.RetryAfter))) }

// ceilSeconds converts milliseconds to seconds, rounding up; negative
// durations count as 0.
func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return ms/1000 + min(1, ms%1000)
}
