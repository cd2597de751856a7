package api

import (
	"strconv"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
)

// fields is a set of the check's fields, one bit each.
type fields uint8

const (
	fieldID fields = 1 << iota
	fieldScale
	fieldLimit
	fieldHits
	fieldAlgo
)

func fieldOf(name []byte) fields {
	switch string(name) {
	case "id":
		return fieldID
	case "scale":
		return fieldScale
	case "limit":
		return fieldLimit
	case "hits":
		return fieldHits
	case "algo":
		return fieldAlgo
	}
	return 0
}

func (f fields) name() string {
	switch f {
	case fieldID:
		return "id"
	case fieldScale:
		return "scale"
	case fieldLimit:
		return "limit"
	case fieldHits:
		return "hits"
	case fieldAlgo:
		return "algo"
	}
	return "?"
}

func (f fields) set(r *rl.Request, n int64) {
	switch f {
	case fieldScale:
		r.Scale = n
	case fieldLimit:
		r.Limit = n
	case fieldHits:
		r.Hits = n
	}
}

// once is the error for a field given twice: which one counts would be a
// guess, so neither does.
func (f fields) once() error {
	return &rl.FieldError{Field: f.name(), Rule: "must be given once"}
}

// missing returns the error for the first required field not in f.
func (f fields) missing() error {
	for _, req := range [...]fields{fieldID, fieldScale, fieldLimit} {
		if f&req == 0 {
			return &rl.FieldError{Field: req.name(), Rule: "is required"}
		}
	}
	return nil
}

// rules holds the core's own error for each field out of bounds, so a value
// that cannot even be read as an integer (a sign, a space, an overflow) is
// refused with the same words as one out of range.
type rules struct {
	id, scale, limit, hits, algo *rl.FieldError
}

func newRules(maxID int) *rules {
	probe := func(r rl.Request) *rl.FieldError {
		err := r.Validate(maxID)
		fe, ok := err.(*rl.FieldError)
		if !ok {
			panic("api: the core accepted an out-of-bounds probe: " + strconv.Quote(r.ID))
		}
		return fe
	}
	ok := rl.Request{ID: "x", Scale: 1}
	long := ok
	long.ID = string(make([]byte, maxID+1))
	var rs rules
	rs.id = probe(long)
	r := ok
	r.Scale = 0
	rs.scale = probe(r)
	r = ok
	r.Limit = -1
	rs.limit = probe(r)
	r = ok
	r.Hits = -1
	rs.hits = probe(r)
	r = ok
	r.Algo = 255
	rs.algo = probe(r)
	return &rs
}

func (rs *rules) of(f fields) *rl.FieldError {
	switch f {
	case fieldID:
		return rs.id
	case fieldScale:
		return rs.scale
	case fieldLimit:
		return rs.limit
	case fieldHits:
		return rs.hits
	}
	return rs.algo
}

// parseUint reads a decimal integer made of digits only: no sign, no space,
// not empty, and small enough for an int64 (anything longer is out of every
// bound anyway).
func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func parseAlgo(b []byte) (rl.Algo, error) {
	switch string(b) {
	case "", "fixed":
		return rl.Fixed, nil
	case "sliding":
		return rl.Sliding, nil
	case "token":
		return rl.Token, nil
	}
	return rl.ParseAlgo(string(b))
}

// parseArgs reads a check from a query string or a form. Unknown names are
// ignored (a cache buster is harmless); a known name given twice is refused.
// It copies the id: nothing it returns refers to args.
func parseArgs(args *fasthttp.Args, r *rl.Request, maxID int, rs *rules) error {
	*r = rl.Request{Hits: 1}
	var seen fields
	for k, v := range args.All() {
		f := fieldOf(k)
		if f == 0 {
			continue
		}
		if seen&f != 0 {
			return f.once()
		}
		seen |= f
		switch f {
		case fieldID:
			if len(v) > maxID {
				return rs.id
			}
			r.ID = string(v)
		case fieldAlgo:
			a, err := parseAlgo(v)
			if err != nil {
				return err
			}
			r.Algo = a
		default:
			n, ok := parseUint(v)
			if !ok {
				return rs.of(f)
			}
			f.set(r, n)
		}
	}
	if err := seen.missing(); err != nil {
		return err
	}
	return r.Validate(maxID)
}
