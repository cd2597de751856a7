package client

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The batch path's JSON, written and read with jsontext
// (github.com/go-json-experiment/json, as the API) without reflection or a
// per-item allocation: at hundreds of thousands of checks a second,
// reflective decoding of the answers would be the largest cost of the
// client's batching (lab/notes/perf-notes.md, "The Go client and batching").

// appendBatchJSON appends rs as the JSON array POST /check_rates takes.
// Ids must be valid UTF-8.
func appendBatchJSON(b []byte, rs []rl.Request) []byte {
	b = append(b, '[')
	for i := range rs {
		r := &rs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b, _ = jsontext.AppendQuote(b, r.ID) // valid UTF-8: no error
		b = append(b, `,"scale":`...)
		b = strconv.AppendInt(b, r.Scale.Milliseconds(), 10)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, r.Limit, 10)
		b = append(b, `,"hits":`...)
		b = strconv.AppendInt(b, check.Counted(*r).Hits, 10) // 0 only in a peek
		b = append(b, `,"algo":"`...)
		b = append(b, r.Algo.String()...)
		b = append(b, '"')
		b = appendShaping(b, r)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendShaping appends to a check's JSON object the fields that only some
// checks carry: slices, queue and max_delay_ms, when set.
func appendShaping(b []byte, r *rl.Request) []byte {
	if r.Slices != 0 {
		b = append(b, `,"slices":`...)
		b = strconv.AppendInt(b, r.Slices, 10)
	}
	if r.Queue != 0 {
		b = append(b, `,"queue":`...)
		b = strconv.AppendInt(b, r.Queue, 10)
	}
	if r.MaxDelay != 0 {
		b = append(b, `,"max_delay_ms":`...)
		b = strconv.AppendInt(b, r.MaxDelay.Milliseconds(), 10)
	}
	return b
}

// answerReader is the reusable state of decodeBatchAnswer.
type answerReader struct {
	buf  bytes.Buffer // aliases the body: jsontext reads a bytes.Buffer in place
	dec  jsontext.Decoder
	name []byte // scratch for escaped names
}

// answerReaders holds answerReaders between calls; a decoder is too large
// to build for each batch.
var answerReaders = sync.Pool{New: func() any { return new(answerReader) }}

// readOptions: the answer is read as encoding/json reads it into
// []raterlimiter.Decision, which lets a later duplicate name win and turns
// bytes that are not UTF-8 into U+FFFD.
var readOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// errNotDecisions is the error for JSON that does not hold decisions.
var errNotDecisions = errors.New("client: the answer is not an array of decisions")

// decodeBatchAnswer decodes the decisions of a 200 from /check_rates into
// ds[:0] and returns them. The result is what json.Unmarshal (encoding/json)
// into []raterlimiter.Decision gives, or an error when it gives one: names
// match case-insensitively, the last of a duplicate name wins, null leaves a
// value as it is, and unknown names are skipped.
func decodeBatchAnswer(body []byte, ds []rl.Decision) ([]rl.Decision, error) {
	err := readAnswer(body, func(r *answerReader) (err error) {
		ds, err = r.decisions(ds[:0])
		return err
	})
	return ds, err
}

// readAnswer reads body with a pooled answerReader.
func readAnswer(body []byte, read func(*answerReader) error) error {
	r := answerReaders.Get().(*answerReader)
	r.buf = *bytes.NewBuffer(body)
	r.dec.Reset(&r.buf, readOptions...)
	err := read(r)
	r.buf = bytes.Buffer{}
	r.dec.Reset(&r.buf, readOptions...)
	answerReaders.Put(r)
	return readError(err)
}

// errEnd is the error for an answer cut short, in encoding/json's words.
var errEnd = errors.New("unexpected end of JSON input")

// readError returns err, or errEnd for an answer cut short.
func readError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errEnd
	}
	return err
}

// decodeDecision decodes the body of a 200 or 429 from /check_rate into
// d, as decodeBatchAnswer decodes each of a batch's.
func decodeDecision(status int, body []byte, d *rl.Decision) error {
	if status != fasthttp.StatusOK && status != fasthttp.StatusTooManyRequests {
		return errUnexpected
	}
	return readAnswer(body, func(r *answerReader) error {
		if r.dec.PeekKind() != '{' {
			return r.refuse()
		}
		allowed, err := r.decision(d)
		if err == nil {
			err = r.end()
		}
		if err == nil && !allowed {
			err = errors.New(`client: answer lacks "allowed"`)
		}
		return err
	})
}

func (r *answerReader) decisions(ds []rl.Decision) ([]rl.Decision, error) {
	switch r.dec.PeekKind() {
	case '[':
	case 'n': // null: no decisions
		if _, err := r.dec.ReadValue(); err != nil {
			return nil, err
		}
		return ds, r.end()
	default:
		return nil, r.refuse()
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, err
	}
	for {
		switch r.dec.PeekKind() {
		case ']':
			if _, err := r.dec.ReadToken(); err != nil {
				return nil, err
			}
			return ds, r.end()
		case 'n':
			if _, err := r.dec.ReadValue(); err != nil {
				return nil, err
			}
			ds = append(ds, rl.Decision{})
		case '{':
			var d rl.Decision
			if _, err := r.decision(&d); err != nil {
				return nil, err
			}
			ds = append(ds, d)
		default:
			return nil, r.refuse()
		}
	}
}

// decisionKeys are the names of a decision's members as the API writes
// them, quoted, in its order; keyOther is any other name.
var decisionKeys = [...]string{`"allowed"`, `"status"`, `"id"`, `"count"`, `"limit"`, `"remaining"`, `"reset_ms"`, `"retry_after_ms"`, `"delay_ms"`}

const (
	keyAllowed = iota
	keyStatus
	keyID
	keyCount
	keyLimit
	keyRemaining
	keyResetMS
	keyRetryAfterMS
	keyDelayMS
	keyOther
)

// decision reads one decision object; allowed reports whether it set
// "allowed" (not null). A name is first compared, quoted as it came, with
// the one the API writes after the last: the API's answers take one
// comparison per member.
func (r *answerReader) decision(pub *rl.Decision) (allowed bool, err error) {
	m := millis.OfDecision(*pub)
	d := &m
	defer func() {
		now := pub.Now
		*pub = m.Public()
		pub.Now = now
	}()
	dec := &r.dec
	if _, err := dec.ReadToken(); err != nil { // '{'
		return false, err
	}
	next := keyAllowed
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return false, err
		}
		k := next
		if k == keyOther || string(name) != decisionKeys[k] {
			k = r.key(name)
		}
		next = min(k+1, keyOther)
		v, err := dec.ReadValue()
		if err != nil {
			return false, err
		}
		var field *int64
		switch k {
		case keyAllowed:
			switch v[0] {
			case 't':
				d.Allowed = true
			case 'f':
				d.Allowed = false
			case 'n':
				continue // null leaves the field as it is
			default:
				return false, errNotDecisions
			}
			allowed = true
			continue
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
		case keyDelayMS:
			field = &d.DelayMS
		default:
			continue // not a decision's: skipped
		}
		if v[0] == 'n' {
			continue // null leaves the field as it is
		}
		n, ok := parseInt(v)
		if !ok {
			return false, errNotDecisions
		}
		*field = n
	}
	_, err = dec.ReadToken() // '}'
	return allowed, err
}

// key returns the key a quoted name matches, without regard to case as
// encoding/json matches names, or keyOther.
func (r *answerReader) key(name []byte) int {
	for k, q := range decisionKeys {
		if string(name) == q {
			return k
		}
	}
	raw := name[1 : len(name)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		r.name, _ = jsontext.AppendUnquote(r.name[:0], name)
		raw = r.name
	}
	for k, q := range decisionKeys {
		if bytes.EqualFold(raw, []byte(q[1:len(q)-1])) {
			return k
		}
	}
	return keyOther
}

// parseInt reads a JSON value as encoding/json stores it in an int64: an
// integer (no fraction, no exponent) within range. v is valid JSON.
func parseInt(v jsontext.Value) (int64, bool) {
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) > 19 {
		return 0, false
	}
	// Two digits a step: half the chain of multiplications.
	var n uint64 // 19 digits fit a uint64
	if len(v)%2 == 1 {
		c := v[0] - '0'
		if c > 9 {
			return 0, false // not a number
		}
		n = uint64(c)
		v = v[1:]
	}
	for ; len(v) >= 2; v = v[2:] {
		c0, c1 := v[0]-'0', v[1]-'0'
		if c0 > 9 || c1 > 9 {
			return 0, false // not a number, a fraction or an exponent
		}
		n = n*100 + uint64(c0)*10 + uint64(c1)
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), true
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// refuse reads the next value and returns its syntax error, or, when it
// is valid JSON, that it is not what a decision is.
func (r *answerReader) refuse() error {
	if _, err := r.dec.ReadValue(); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return errNotDecisions
}

// end reports an error unless only white space is left.
func (r *answerReader) end() error {
	switch _, err := r.dec.ReadValue(); err {
	case io.EOF:
		return nil
	case nil:
		return errors.New("client: data after the answer")
	default:
		return err
	}
}
