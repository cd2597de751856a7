package policy

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/raterlimiter/raterlimiter/internal/clientip"
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
	Proxies clientip.Proxies
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
	// KeyList is what a key header holding a list (a comma) gets: denied
	// (the default), or counted whole.
	KeyList KeyList
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

// KeyList is a policy's key_list: what a key header whose value holds a
// comma gets. RFC 9110 makes "a, b" the same as two lines "a" and "b", and
// backends differ on which of them they read; the sidecar cannot know.
type KeyList uint8

const (
	// KeyListDeny denies the request, counting nothing: the default, so
	// that no request is counted under a value the application may not
	// use ("fresh, real", with the application reading "real").
	KeyListDeny KeyList = iota
	// KeyListWhole counts the value whole, commas and all: for headers
	// whose values hold commas (User-Agent) and that the application
	// reads whole.
	KeyListWhole
)

// KeyFault is why a key a request sent cannot be counted. A Check with a
// fault denies, whatever the policy's missing_key, and counts nothing.
type KeyFault uint8

const (
	// KeyFine is no fault.
	KeyFine KeyFault = iota
	// KeyRepeated: the key's header appears more than once. Backends
	// differ on which line they read, so none is counted.
	KeyRepeated
	// KeyIsList: the key header's value holds a comma and the policy's
	// key_list is deny.
	KeyIsList
	// KeyTooLong: the key is longer than Input.MaxKeyBytes. It is never
	// cut short: a cut key would be someone else's.
	KeyTooLong
)

// String names the fault as /auth's deny body does: "repeated", "list",
// "too_long" ("" for KeyFine).
func (f KeyFault) String() string {
	switch f {
	case KeyRepeated:
		return "repeated"
	case KeyIsList:
		return "list"
	case KeyTooLong:
		return "too_long"
	}
	return ""
}

// KeySource is one part of a key.
type KeySource struct {
	// Kind says where the value comes from.
	Kind KeyKind
	// Header is the header's name for KeyHeader.
	Header string
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
	// MaxKeyBytes, when positive, is the longest key counted: a longer
	// one denies the request (KeyTooLong).
	MaxKeyBytes int
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
// fallback key, or none (MissingSkip). A key the request sent that cannot
// be counted (a header that appears twice, a list, a key too long: see
// KeyFault) gets a Check that denies, whatever MissingKey says. Keys and
// plans are written into buf, which Match returns (grown) for reuse; the
// Checks' slices point into it. With dst and buf of enough capacity, Match
// allocates nothing.
func (f *File) Match(in *Input, dst []Check, buf []byte) ([]Check, []byte) {
	c := keyReader{f: f, in: in}
	for i := range f.Policies {
		p := &f.Policies[i]
		if !p.Match.matches(in) {
			continue
		}
		check := Check{Rule: &p.Rule}
		start := len(buf)
		var ok bool
		var fault KeyFault
		if buf, ok, fault = c.key(buf, p.Key, p.KeyList); !ok && fault == KeyFine {
			buf = buf[:start]
			switch p.MissingKey.Action {
			case MissingSkip:
				continue
			case MissingFallback:
				buf, ok, fault = c.key(buf, []KeySource{p.MissingKey.Fallback}, p.KeyList)
				check.Fallback = true
			}
			check.MissingKey = !ok && fault == KeyFine
		}
		if fault != KeyFine {
			ok, check.Fallback, check.BadKey = false, false, fault
		}
		if !ok {
			buf = buf[:start]
		} else {
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

// key appends to buf the key made of sources. It reports false when the
// request lacks one of them (a header absent or empty), and a fault when
// one it sent cannot be counted: a header that appears twice, a value
// holding a comma (unless list is KeyListWhole), a key longer than
// Input.MaxKeyBytes.
func (c *keyReader) key(buf []byte, sources []KeySource, list KeyList) ([]byte, bool, KeyFault) {
	start := len(buf)
	for _, k := range sources {
		var v []byte
		var ipText [64]byte
		if k.Kind == KeyIP {
			if !c.ipDone {
				c.ip, c.ipDone = c.f.ClientIP(c.in), true
			}
			if !c.ip.IsValid() {
				return buf, false, KeyFine
			}
			v = c.ip.AppendTo(ipText[:0])
		} else {
			// Every line of the header, not the first only: a second
			// line is what a backend that reads the last would use.
			lines := c.in.Header.PeekAll(k.Header)
			switch {
			case len(lines) > 1:
				return buf, false, KeyRepeated
			case len(lines) == 0 || len(lines[0]) == 0:
				return buf, false, KeyFine
			}
			v = lines[0]
			if list == KeyListDeny && bytes.IndexByte(v, ',') >= 0 {
				return buf, false, KeyIsList
			}
		}
		if len(sources) > 1 {
			// Several parts: each with its length first, so no two
			// lists of values make the same key.
			buf = binary.AppendUvarint(buf, uint64(len(v)))
		}
		buf = append(buf, v...)
	}
	if m := c.in.MaxKeyBytes; m > 0 && len(buf)-start > m {
		return buf, false, KeyTooLong
	}
	return buf, true, KeyFine
}

// ClientIP returns the client's address as an ip key reads it: in.Peer,
// or when the peer is a trusted proxy the right-most untrusted address of
// X-Forwarded-For (or X-Real-IP); see Proxies.ClientIP. It is the zero
// Addr when a trusted proxy forwards no readable address.
func (f *File) ClientIP(in *Input) netip.Addr {
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
