package policy

import (
	"bytes"
	"encoding/binary"
	"net/netip"
)

// File is a loaded policies file: the rules of gateway mode and how a
// request is matched to them. A File is read-only once loaded and safe for
// concurrent use; reloading makes a new one.
type File struct {
	// Path is where the file was read from ("" when parsed from memory).
	Path string
	// Proxies are the trusted proxies (trusted_proxies) whose
	// X-Forwarded-For and X-Real-IP headers are believed. Empty: forwarded
	// headers are ignored.
	Proxies Proxies
	// Policies in the file's order.
	Policies []Policy

	byName map[string]*Policy
}

// Policy is one entry of a policies file: a Rule, the requests it applies
// to, and the key it counts them by.
type Policy struct {
	Rule
	// Match selects the requests; the zero Match selects all.
	Match Match
	// Key lists the sources joined into one key (at least one).
	Key []KeySource
	// PlanFrom is where the plan is read when Rule.Plans is set.
	PlanFrom KeySource
	// MissingKey is what a request that lacks the key gets.
	MissingKey MissingKey
	// Line is the policy's line in the file, for messages.
	Line int
}

// Match selects requests: every field that is set must match.
type Match struct {
	// Methods, if any, lists the methods matched (upper case, compared
	// without case). GET matches HEAD too: backends serve HEAD with their
	// GET handler.
	Methods []string
	// PathPrefix, if set, must begin the request's path (a clean path,
	// compared without ASCII case with either form of Input.Path).
	PathPrefix string
	// Host, if set, must equal the request's host (without a port or a
	// trailing dot, case folded). It is kept in lower case.
	Host string
}

// KeyKind is where a key's value comes from.
type KeyKind uint8

const (
	// KeyIP is the client's address in its canonical text: the peer, or
	// behind the file's trusted proxies what Proxies.ClientIP finds.
	KeyIP KeyKind = iota
	// KeyHeader is a request header's value, as opaque bytes.
	KeyHeader
)

// KeySource is one part of a key.
type KeySource struct {
	// Kind says where the value comes from.
	Kind KeyKind
	// Header is the header's name for KeyHeader.
	Header string
}

// String spells the source as a policies file does: "ip" or "header:NAME".
func (k KeySource) String() string {
	if k.Kind == KeyHeader {
		return "header:" + k.Header
	}
	return "ip"
}

// Headers gives a request's header values; *fasthttp.RequestHeader has
// both methods.
type Headers interface {
	// Peek returns the value of the header name, nil when it is absent.
	Peek(name string) []byte
	// PeekAll returns every line of a header that may repeat
	// (X-Forwarded-For).
	PeekAll(name string) [][]byte
}

// Input is what matching reads of one request. Its slices are read during
// the call only.
type Input struct {
	// Method and Host are those of the original request, as the proxy
	// forwarded them.
	Method, Host []byte
	// Path is the original request's path as CleanPath reads it.
	Path Path
	// Peer is the TCP peer's address.
	Peer netip.Addr
	// Header gives the request's headers (X-Forwarded-For, key and plan
	// headers).
	Header Headers
}

// Lookup returns the policy called name, or nil.
func (f *File) Lookup(name string) *Policy {
	if f == nil {
		return nil
	}
	return f.byName[name]
}

// Match appends to dst a Check for every policy that matches in, in the
// file's order. A request that lacks a policy's key (a key header absent
// or empty) gets what the policy's MissingKey says: a Check that denies
// (MissingDeny, also when a fallback key is missing too), a Check by the
// fallback key, or none (MissingSkip). Keys and plans are written into
// buf, which Match returns (grown) for reuse; the Checks' slices point
// into it. With dst and buf of enough capacity, Match allocates nothing.
func (f *File) Match(in *Input, dst []Check, buf []byte) ([]Check, []byte) {
	c := keyReader{f: f, in: in}
	for i := range f.Policies {
		p := &f.Policies[i]
		if !p.Match.matches(in) {
			continue
		}
		check := Check{Rule: &p.Rule}
		var ok bool
		start := len(buf)
		if buf, ok = c.key(buf, p.Key); !ok {
			buf = buf[:start]
			switch p.MissingKey.Action {
			case MissingSkip:
				continue
			case MissingFallback:
				if buf, ok = c.key(buf, []KeySource{p.MissingKey.Fallback}); !ok {
					buf = buf[:start]
				}
				check.Fallback = true
			}
			check.MissingKey = !ok
		}
		if ok {
			check.Key = buf[start:len(buf):len(buf)]
			if p.Plans != nil {
				check.Plan = in.Header.Peek(p.PlanFrom.Header)
			}
		}
		dst = append(dst, check)
	}
	return dst, buf
}

// keyReader reads keys of one request, the client's address at most once.
type keyReader struct {
	f      *File
	in     *Input
	ip     netip.Addr
	ipDone bool
}

// key appends to buf the key made of sources, or reports false when the
// request lacks one of them (a header absent or empty).
func (c *keyReader) key(buf []byte, sources []KeySource) ([]byte, bool) {
	for _, k := range sources {
		var v []byte
		var ipText [64]byte
		if k.Kind == KeyIP {
			if !c.ipDone {
				c.ip, c.ipDone = c.f.clientIP(c.in), true
			}
			if !c.ip.IsValid() {
				return buf, false
			}
			v = c.ip.AppendTo(ipText[:0])
		} else if v = c.in.Header.Peek(k.Header); len(v) == 0 {
			return buf, false
		}
		if len(sources) > 1 {
			// Several parts: each with its length first, so no two
			// lists of values make the same key.
			buf = binary.AppendUvarint(buf, uint64(len(v)))
		}
		buf = append(buf, v...)
	}
	return buf, true
}

// clientIP returns the client's address: in.Peer, or when the peer is a
// trusted proxy the right-most untrusted address of X-Forwarded-For (or
// X-Real-IP); see Proxies.ClientIP.
func (f *File) clientIP(in *Input) netip.Addr {
	if !f.Proxies.Trusted(in.Peer) {
		return in.Peer.Unmap().WithZone("")
	}
	return f.Proxies.ClientIPBytes(in.Peer, in.Header.PeekAll("X-Forwarded-For"), in.Header.Peek("X-Real-IP"))
}

func (m *Match) matches(in *Input) bool {
	if len(m.Methods) > 0 {
		found := false
		for _, x := range m.Methods {
			if len(in.Method) == len(x) && equalFoldASCII(in.Method, x) ||
				x == "GET" && len(in.Method) == 4 && equalFoldASCII(in.Method, "HEAD") {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if m.PathPrefix != "" && !in.Path.HasPrefix(m.PathPrefix) {
		return false
	}
	if m.Host != "" {
		h := in.Host
		if i := bytes.LastIndexByte(h, ':'); i >= 0 && !bytes.HasSuffix(h, []byte("]")) {
			h = h[:i] // a port
		}
		h = bytes.TrimSuffix(bytes.TrimPrefix(h, []byte("[")), []byte("]"))
		h = bytes.TrimSuffix(h, []byte(".")) // "example.com." is example.com
		if len(h) != len(m.Host) || !equalFoldASCII(h, m.Host) {
			return false
		}
	}
	return true
}

// equalFoldASCII reports whether b and s, of the same length, are equal
// with ASCII letters compared without case.
func equalFoldASCII(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
