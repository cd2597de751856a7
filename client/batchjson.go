package client

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	rl "github.com/raterlimiter/raterlimiter"
)

// The batch path's JSON, written and read without reflection or a
// per-item allocation: at hundreds of thousands of checks a second,
// encoding/json's reflective decoding of the answer was the largest item
// of the client's profile (about 30 % of the load tool's CPU, sidecar
// included; BENCHMARKS.md, "throughput").

// appendBatchJSON appends rs as the JSON array POST /check_rates takes.
// Ids must be valid UTF-8 (batchable).
func appendBatchJSON(b []byte, rs []rl.Request) []byte {
	b = append(b, '[')
	for i := range rs {
		r := &rs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendQuoted(b, r.ID)
		b = append(b, `,"scale":`...)
		b = strconv.AppendInt(b, r.Scale, 10)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, r.Limit, 10)
		b = append(b, `,"hits":`...)
		b = strconv.AppendInt(b, r.Hits, 10)
		b = append(b, `,"algo":"`...)
		b = append(b, r.Algo.String()...)
		b = append(b, `"}`...)
	}
	return append(b, ']')
}

// appendQuoted appends s as a JSON string: plain ASCII is copied, anything
// else goes through encoding/json (so the output is what json.Marshal
// writes).
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeBatchAnswer decodes the decisions of a 200 from /check_rates into
// ds[:0] and returns them. The fast path reads the shape the API writes (an
// array of flat objects whose values are booleans, integers and strings);
// on anything else it hands the body to encoding/json, so the result is
// always what json.Unmarshal into []raterlimiter.Decision gives.
func decodeBatchAnswer(body []byte, ds []rl.Decision) ([]rl.Decision, error) {
	if out, ok := fastDecisions(body, ds[:0]); ok {
		return out, nil
	}
	var out []rl.Decision // fresh: encoding/json keeps what it finds in reused elements
	err := json.Unmarshal(body, &out)
	return out, err
}

// scanner reads the fast path's JSON subset.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next returns the next byte after white space and consumes it, or 0 at
// the end.
func (s *scanner) next() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	c := s.b[s.i]
	s.i++
	return c
}

// str reads a string after its opening quote and returns its raw bytes,
// and whether they are plain: printable ASCII without escapes. It fails on
// what encoding/json refuses (control characters, bad escapes); other
// bytes it passes, as encoding/json does.
func (s *scanner) str() (raw []byte, plain, ok bool) {
	if j := bytes.IndexByte(s.b[s.i:], '"'); j >= 0 {
		seg := s.b[s.i : s.i+j]
		clean := true
		for _, c := range seg {
			if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
				clean = false
				break
			}
		}
		if clean {
			s.i += j + 1
			return seg, true, true
		}
	}
	start := s.i
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, plain, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 {
					return nil, false, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false, false
					}
				}
				s.i += 6
			default:
				return nil, false, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			s.i++
		default:
			s.i++
		}
	}
	return nil, false, false
}

// int reads an integer that fits int64, as encoding/json would store it
// in an int64 field.
func (s *scanner) int() (int64, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	digits := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	switch {
	case s.i == digits, s.b[digits] == '0' && s.i-digits > 1:
		return 0, false
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		return 0, false
	case neg && n > 1<<63, !neg && n > 1<<63-1:
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	start := s.i
	if n := digits(); n == 0 || n > 1 && s.b[start] == '0' {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// literal consumes word if the input continues with it.
func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// fastDecisions is the fast path of decodeBatchAnswer; ok is false when
// the body is not in its subset (it may still be valid JSON).
func fastDecisions(b []byte, ds []rl.Decision) (_ []rl.Decision, ok bool) {
	s := scanner{b: b}
	if s.next() != '[' {
		return nil, false
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.ws()
		return ds, s.i == len(s.b)
	}
	for {
		if s.next() != '{' {
			return nil, false
		}
		var d rl.Decision
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
		} else if !s.object(&d) {
			return nil, false
		}
		ds = append(ds, d)
		switch s.next() {
		case ',':
		case ']':
			s.ws()
			return ds, s.i == len(s.b)
		default:
			return nil, false
		}
	}
}

// object reads the members of a decision object after its '{' up to and
// including its '}'.
func (s *scanner) object(d *rl.Decision) bool {
	hint := keyAllowed
	for {
		if s.next() != '"' {
			return false
		}
		k, other, ok := s.key(hint)
		if !ok || s.next() != ':' {
			return false
		}
		hint = k + 1
		var field *int64
		switch k {
		case keyAllowed:
			s.ws()
			switch {
			case s.literal("true"):
				d.Allowed = true
			case s.literal("false"):
				d.Allowed = false
			default:
				return false
			}
		case keyCount:
			field = &d.Count
		case keyLimit:
			field = &d.Limit
		case keyRemaining:
			field = &d.Remaining
		case keyResetMS:
			field = &d.ResetMS
		case keyRetryAfterMS:
			field = &d.RetryAfterMS
		case keyStatus, keyID:
			if !s.skipScalar() {
				return false
			}
		default:
			// encoding/json matches keys without regard to case:
			// leave those to it.
			if foldsToField(other) || !s.skipScalar() {
				return false
			}
			hint = keyAllowed
		}
		if field != nil {
			n, ok := s.int()
			if !ok {
				return false
			}
			*field = n
		}
		switch s.next() {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}

// skipScalar skips a string, number, boolean or null.
func (s *scanner) skipScalar() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		s.i++
		_, _, ok := s.str()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// The keys of a decision, in the order the API writes them.
const (
	keyAllowed = iota
	keyStatus
	keyID
	keyCount
	keyLimit
	keyRemaining
	keyResetMS
	keyRetryAfterMS
	numKeys
	keyOther = -1
)

// keyName returns key k with its closing quote.
func keyName(k int) string {
	switch k {
	case keyAllowed:
		return `allowed"`
	case keyStatus:
		return `status"`
	case keyID:
		return `id"`
	case keyCount:
		return `count"`
	case keyLimit:
		return `limit"`
	case keyRemaining:
		return `remaining"`
	case keyResetMS:
		return `reset_ms"`
	}
	return `retry_after_ms"`
}

// key reads a key after its opening quote and returns which it is
// (keyOther and its bytes for a key not a decision's); ok is false unless
// the key is plain (see str). The API's keys are compared whole, the one
// it writes after hint first.
func (s *scanner) key(hint int) (k int, other []byte, ok bool) {
	rest := s.b[s.i:]
	for j := range numKeys {
		k := (hint + j) % numKeys
		name := keyName(k)
		if len(rest) >= len(name) && string(rest[:len(name)]) == name {
			s.i += len(name)
			return k, nil, true
		}
	}
	other, plain, ok := s.str()
	return keyOther, other, ok && plain
}

// foldsToField reports whether key, which is ASCII, names a Decision
// field when case is ignored, as encoding/json matches keys.
func foldsToField(key []byte) bool {
	for _, k := range [...]string{"allowed", "count", "limit", "remaining", "reset_ms", "retry_after_ms"} {
		if bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}
