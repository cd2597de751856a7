package api

import (
	"encoding/base64"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/policy"
)

// maxJSONDepth bounds the nesting of values skipped under unknown keys.
const maxJSONDepth = 32

// decoder reads the JSON this API accepts: a check object, or an array of
// them. It is a strict RFC 8259 reader (UTF-8 only, no trailing commas, no
// leading zeros) that decodes the known fields without reflection and
// without allocating, skipping the values of unknown keys.
type decoder struct {
	b   []byte
	i   int
	key []byte // scratch for decoded keys and algo names
	pol []byte // the policy name of the check being decoded
}

// syntax returns the error for malformed JSON at the current offset.
func (d *decoder) syntax(what string) error {
	return &rl.FieldError{Field: "body", Rule: "must be valid JSON: " + what + " at offset " + strconv.Itoa(d.i)}
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// end reports an error unless only white space is left.
func (d *decoder) end() error {
	if d.peek() != 0 || d.i < len(d.b) {
		return d.syntax("unexpected data after the value")
	}
	return nil
}

// check decodes one check object into r (Hits defaults to 1) and appends its
// decoded id to ids, returning the grown buffer. The caller validates bounds.
// A check by policy ("policy": NAME, or every check under -policies-only)
// takes scale, limit, algo and default hits from the policy, which check
// returns; the caller then makes the counter id from the decoded id.
func (d *decoder) check(r *rl.Request, ids []byte, maxID int, rules *rules, pc *policyCheck) ([]byte, *policy.Policy, error) {
	*r = rl.Request{Hits: 1}
	if d.peek() != '{' {
		return ids, nil, d.syntax("expected an object")
	}
	d.i++
	var seen fields
	idStart := len(ids)
	d.pol = d.pol[:0]
	finish := func() ([]byte, *policy.Policy, error) {
		if seen&fieldPolicy != 0 || pc.only {
			p, err := pc.resolve(d.pol, seen, ids[idStart:])
			if err != nil {
				return ids, nil, err
			}
			pc.apply(r, p, seen)
			return ids, p, nil
		}
		return ids, nil, seen.missing()
	}
	if d.peek() == '}' {
		d.i++
		return finish()
	}
	for {
		if d.peek() != '"' {
			return ids, nil, d.syntax("expected a key")
		}
		var err error
		f := d.knownKey()
		if f == 0 {
			if d.key, err = d.str(d.key[:0]); err != nil {
				return ids, nil, err
			}
			f = fieldOf(d.key)
		}
		if d.peek() != ':' {
			return ids, nil, d.syntax("expected ':'")
		}
		d.i++
		if f != 0 {
			if seen&f != 0 {
				return ids, nil, f.once()
			}
			seen |= f
		}
		c := d.peek()
		switch f {
		case fieldID:
			if c != '"' {
				return ids, nil, &rl.FieldError{Field: "id", Rule: "must be a string"}
			}
			start := len(ids)
			if ids, err = d.str(ids); err != nil {
				return ids, nil, err
			}
			if len(ids)-start > maxID {
				return ids, nil, rules.id
			}
		case fieldScale, fieldLimit, fieldHits:
			var n int64
			if n, err = d.int(rules.of(f)); err != nil {
				return ids, nil, err
			}
			f.set(r, n)
		case fieldAlgo:
			if c != '"' {
				return ids, nil, rules.algo
			}
			if a, ok := d.knownAlgo(); ok {
				r.Algo = a
				break
			}
			if d.key, err = d.str(d.key[:0]); err != nil {
				return ids, nil, err
			}
			if r.Algo, err = parseAlgo(d.key); err != nil {
				return ids, nil, err
			}
		case fieldPolicy:
			if c != '"' {
				return ids, nil, &rl.FieldError{Field: "policy", Rule: "must be a string"}
			}
			if d.pol, err = d.str(d.pol[:0]); err != nil {
				return ids, nil, err
			}
		default:
			if err = d.skip(0); err != nil {
				return ids, nil, err
			}
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return finish()
		default:
			return ids, nil, d.syntax("expected ',' or '}'")
		}
	}
}

// knownKey consumes the string at d.i (which holds '"') if it is one of a
// check's keys written without escapes, and returns its field; else it
// returns 0 and consumes nothing. Comparing the known keys whole saves the
// batch path a byte-by-byte decoding of four or five keys per check.
func (d *decoder) knownKey() fields {
	rest := d.b[d.i+1:]
	for _, k := range [...]struct {
		s string
		f fields
	}{{`id"`, fieldID}, {`scale"`, fieldScale}, {`limit"`, fieldLimit}, {`hits"`, fieldHits}, {`algo"`, fieldAlgo}} {
		if len(rest) >= len(k.s) && string(rest[:len(k.s)]) == k.s {
			d.i += 1 + len(k.s)
			return k.f
		}
	}
	return 0
}

// knownAlgo consumes the string at d.i (which holds '"') if it is an
// algorithm's name written without escapes.
func (d *decoder) knownAlgo() (rl.Algo, bool) {
	rest := d.b[d.i+1:]
	for _, a := range rl.Algos {
		n := a.String()
		if len(rest) > len(n) && string(rest[:len(n)]) == n && rest[len(n)] == '"' {
			d.i += len(n) + 2
			return a, true
		}
	}
	return 0, false
}

// int reads a non-negative JSON integer; anything else breaks rule.
func (d *decoder) int(rule *rl.FieldError) (int64, error) {
	start := d.i
	var n int64
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		if n > (1<<63-1-9)/10 {
			return 0, rule // overflow: far out of every bound
		}
		n = n*10 + int64(d.b[d.i]-'0')
		d.i++
	}
	switch {
	case d.i == start:
		// A sign, a string, null, true... : valid JSON perhaps, but not
		// an integer in range. Skip it to tell the two apart.
		if err := d.skip(0); err != nil {
			return 0, err
		}
		return 0, rule
	case d.b[start] == '0' && d.i-start > 1:
		d.i = start + 1
		return 0, d.syntax("leading zero")
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i = start
		if err := d.skip(0); err != nil {
			return 0, err
		}
		return 0, rule
	}
	return n, nil
}

// str decodes the string at d.i (which holds '"') and appends it to dst.
func (d *decoder) str(dst []byte) ([]byte, error) {
	d.i++ // the opening quote
	for {
		// Copy the run of plain bytes in one go.
		start := d.i
		for d.i < len(d.b) {
			c := d.b[d.i]
			if c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				break
			}
			d.i++
		}
		dst = append(dst, d.b[start:d.i]...)
		if d.i >= len(d.b) {
			return dst, d.syntax("unterminated string")
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return dst, nil
		case c < 0x20:
			return dst, d.syntax("control character in string")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size <= 1 {
				return dst, d.syntax("invalid UTF-8")
			}
			dst = append(dst, d.b[d.i:d.i+size]...)
			d.i += size
			continue
		}
		// A backslash escape.
		if d.i+1 >= len(d.b) {
			return dst, d.syntax("unterminated string")
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return dst, d.syntax("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half becomes U+FFFD, as
				// encoding/json does.
				r2 := utf8.RuneError
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					lo, ok := d.hex4()
					if !ok {
						return dst, d.syntax("invalid \\u escape")
					}
					if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
						r2 = dec
					} else {
						d.i = save // the second escape stands on its own
					}
				}
				r = r2
			}
			dst = utf8.AppendRune(dst, r)
		default:
			d.i--
			return dst, d.syntax("invalid escape")
		}
	}
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// skip checks and skips one value of any type.
func (d *decoder) skip(depth int) error {
	if depth > maxJSONDepth {
		return d.syntax("nested too deep")
	}
	switch c := d.peek(); {
	case c == '"':
		var err error
		d.key, err = d.str(d.key[:0])
		return err
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.i++
		if d.peek() == closer {
			d.i++
			return nil
		}
		for {
			if c == '{' {
				if d.peek() != '"' {
					return d.syntax("expected a key")
				}
				if err := d.skip(depth + 1); err != nil {
					return err
				}
				if d.peek() != ':' {
					return d.syntax("expected ':'")
				}
				d.i++
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case closer:
				d.i++
				return nil
			default:
				return d.syntax("expected ',' or '" + string(closer) + "'")
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == 0 && d.i >= len(d.b):
		return d.syntax("unexpected end")
	}
	return d.syntax("unexpected character")
}

func (d *decoder) literal(s string) error {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return d.syntax("invalid literal")
	}
	d.i += len(s)
	return nil
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() error {
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	start := d.i
	switch n := digits(); {
	case n == 0:
		return d.syntax("invalid number")
	case n > 1 && d.b[start] == '0':
		return d.syntax("leading zero")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return d.syntax("invalid number")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return d.syntax("invalid number")
		}
	}
	return nil
}

// appendString appends s as a JSON string. Bytes that are not UTF-8 become
// U+FFFD, as encoding/json writes them.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendDecision appends the JSON body of a decision for id.
func appendDecision(dst []byte, id string, d rl.Decision) []byte {
	if d.Allowed {
		dst = append(dst, `{"allowed":true,"status":"ok","id":`...)
	} else {
		dst = append(dst, `{"allowed":false,"status":"fail","id":`...)
	}
	if utf8.ValidString(id) {
		dst = appendString(dst, id)
	} else {
		// JSON strings are text: an id that is not UTF-8 would come back
		// as U+FFFD, two ids alike. Its bytes go as base64 (RFC 4648,
		// padded) under a key of their own instead.
		dst = dst[:len(dst)-len(`"id":`)]
		dst = append(dst, `"id_b64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, []byte(id))
		dst = append(dst, '"')
	}
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendInt(dst, d.Count, 10)
	dst = append(dst, `,"limit":`...)
	dst = strconv.AppendInt(dst, d.Limit, 10)
	dst = append(dst, `,"remaining":`...)
	dst = strconv.AppendInt(dst, d.Remaining, 10)
	dst = append(dst, `,"reset_ms":`...)
	dst = strconv.AppendInt(dst, d.ResetMS, 10)
	dst = append(dst, `,"retry_after_ms":`...)
	dst = strconv.AppendInt(dst, d.RetryAfterMS, 10)
	return append(dst, '}')
}
