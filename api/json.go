package api

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// The API reads and writes JSON with github.com/go-json-experiment/json
// (jsontext, the proposed encoding/json/v2's syntactic layer): a strict RFC
// 8259 reader that hands out each value's raw bytes without allocating, and
// AppendQuote for strings, where encoding/json would reflect and allocate
// on every body (lab/notes/perf-notes.md, "JSON library", has the comparison).

// readOptions: names given twice are refused by the reader's own check,
// which names the field ("must be given once"); UTF-8 is checked on the
// whole body first, so that lone surrogate escapes become U+FFFD, as
// encoding/json reads them, rather than errors.
var readOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// jsonReader reads the JSON this API accepts: a check object, or an array of
// them. It decodes the fields from the raw values without reflection and
// without allocating, and refuses an unknown key. A reader is reused:
// reset points it at a new body.
type jsonReader struct {
	buf  bytes.Buffer // aliases the body: jsontext reads a bytes.Buffer in place
	dec  jsontext.Decoder
	name []byte // scratch for the text of strings with escapes
	pol  []byte // the policy name of the check being decoded
}

// reset makes r read body, which must not change while r reads it. It
// refuses a body that is not UTF-8.
func (r *jsonReader) reset(body []byte) error {
	r.buf = *bytes.NewBuffer(body)
	r.dec.Reset(&r.buf, readOptions...)
	if !utf8.Valid(body) {
		return &rl.FieldError{Field: "body", Rule: "must be valid JSON: invalid UTF-8"}
	}
	return nil
}

// release drops r's reference to the body it read.
func (r *jsonReader) release() {
	r.buf = bytes.Buffer{}
	r.dec.Reset(&r.buf, readOptions...)
}

// syntax returns the error for malformed JSON: err from the decoder, or
// what was expected instead of the next value.
func (r *jsonReader) syntax(err error, what string) error {
	offset := r.dec.InputOffset()
	var se *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		offset = se.ByteOffset
		what = se.Err.Error()
		if errors.Is(se.Err, io.ErrUnexpectedEOF) {
			what = "unexpected end"
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		what = "unexpected end"
	case err != nil:
		what = err.Error()
	}
	return &rl.FieldError{Field: "body", Rule: "must be valid JSON: " + what + " at offset " + strconv.FormatInt(offset, 10)}
}

// open consumes the opening token of the next value, which must be open.
func (r *jsonReader) open(open jsontext.Kind, what string) error {
	switch k := r.dec.PeekKind(); k {
	case open:
		_, err := r.dec.ReadToken()
		return err
	case 0: // the decoder holds an error for the next read
		_, err := r.dec.ReadToken()
		return r.syntax(err, "")
	}
	return r.syntax(nil, "expected "+what)
}

// end reports an error unless only white space is left.
func (r *jsonReader) end() error {
	_, err := r.dec.ReadValue()
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return r.syntax(nil, "unexpected data after the value")
	}
	return r.syntax(err, "")
}

// check decodes one check object into req (Hits defaults to 1) and appends
// its decoded id to ids, returning the grown buffer. The caller validates
// bounds. A check by policy ("policy": NAME, or every check under
// -policies-only) takes scale, limit, algo and default hits from the
// policy, which check returns; the caller then makes the counter id from the
// decoded id. "wait" (true or 1) sets opts.wait; with opts nil (a batch's
// item) it is refused.
func (r *jsonReader) check(req *rl.Request, ids []byte, maxID int, rules *rules, pc *policyCheck, opts *checkOpts) ([]byte, *policy.Policy, error) {
	*req = rl.Request{Hits: 1}
	if opts != nil {
		*opts = checkOpts{}
	}
	if err := r.open('{', "an object"); err != nil {
		return ids, nil, err
	}
	var seen fields
	idStart := len(ids)
	r.pol = r.pol[:0]
	for r.dec.PeekKind() != '}' {
		name, err := r.dec.ReadValue()
		if err != nil {
			return ids, nil, r.syntax(err, "")
		}
		f := fieldOf(r.text(name))
		if f == 0 {
			if opts == nil {
				return ids, nil, unknown(r.text(name), "a field of a batch's check", batchFields)
			}
			return ids, nil, unknown(r.text(name), "a field of a check", checkParams)
		}
		if seen&f != 0 {
			return ids, nil, f.once()
		}
		seen |= f
		v, err := r.dec.ReadValue()
		if err != nil {
			return ids, nil, r.syntax(err, "")
		}
		switch f {
		case fieldID:
			if v.Kind() != '"' {
				return ids, nil, &rl.FieldError{Field: "id", Rule: "must be a string"}
			}
			start := len(ids)
			ids = append(ids, r.text(v)...)
			if len(ids)-start > maxID {
				return ids, nil, rules.of(fieldID)
			}
		case fieldScale, fieldLimit, fieldHits, fieldSlices, fieldQueue, fieldMaxDelay:
			n, ok := parseUint(v) // digits only: a sign, a fraction or an exponent breaks the rule
			if !ok {
				return ids, nil, rules.of(f)
			}
			f.set(req, n)
		case fieldWait:
			if opts == nil {
				return ids, nil, errWaitInBatch
			}
			w, ok := parseWait(v)
			switch string(v) {
			case "true":
				w, ok = true, true
			case "false":
				w, ok = false, true
			}
			if !ok {
				return ids, nil, rules.of(fieldWait)
			}
			opts.wait, opts.waitGiven = w, true
		case fieldAlgo:
			if v.Kind() != '"' {
				return ids, nil, rules.of(fieldAlgo)
			}
			if req.Algo, err = check.ParseAlgo(string(r.text(v))); err != nil {
				return ids, nil, err
			}
		case fieldPolicy:
			if v.Kind() != '"' {
				return ids, nil, &rl.FieldError{Field: "policy", Rule: "must be a string"}
			}
			r.pol = append(r.pol[:0], r.text(v)...)
		}
	}
	if _, err := r.dec.ReadToken(); err != nil { // '}'
		return ids, nil, r.syntax(err, "")
	}
	p, err := pc.finish(req, r.pol, seen, ids[idStart:], opts)
	return ids, p, err
}

// text returns the text of the raw JSON string v: v's own bytes, or in
// r.name when it has escapes. The body was checked to be UTF-8, so a
// string without escapes is its bytes.
func (r *jsonReader) text(v jsontext.Value) []byte {
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	r.name, _ = jsontext.AppendUnquote(r.name[:0], v) // valid: a lone surrogate reads as U+FFFD
	return r.name
}

// appendString appends s as a JSON string. Bytes that are not UTF-8 become
// U+FFFD, as encoding/json writes them.
func appendString(dst []byte, s string) []byte {
	dst, _ = jsontext.AppendQuote(dst, s) // the error only reports the U+FFFD
	return dst
}

// appendDecision appends the JSON body of a decision for id.
func appendDecision(dst []byte, id string, d rl.Decision) []byte {
	if d.Allowed {
		dst = append(dst, `{"allowed":true,"status":"ok",`...)
	} else {
		dst = append(dst, `{"allowed":false,"status":"fail",`...)
	}
	if utf8.ValidString(id) {
		dst = append(dst, `"id":`...)
		dst = appendString(dst, id)
	} else {
		// JSON strings are text: an id that is not UTF-8 would come back
		// as U+FFFD, two ids alike. Its bytes go as base64 (RFC 4648,
		// padded) under a key of their own instead.
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
	dst = strconv.AppendInt(dst, millis.Ceil(d.Reset), 10)
	dst = append(dst, `,"retry_after_ms":`...)
	dst = strconv.AppendInt(dst, millis.Ceil(d.RetryAfter), 10)
	dst = append(dst, `,"delay_ms":`...)
	dst = strconv.AppendInt(dst, millis.Ceil(d.Delay), 10)
	return append(dst, '}')
}
