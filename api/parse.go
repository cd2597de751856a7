package api

import (
	"math/bits"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// fields is a set of the check's fields, one bit each.
type fields uint16

const (
	fieldID fields = 1 << iota
	fieldScale
	fieldLimit
	fieldHits
	fieldAlgo
	fieldPolicy
	fieldSlices
	fieldQueue
	fieldMaxDelay
	fieldWait
)

// fieldsOfPolicy are the fields a policy sets: a check by policy may not
// give them.
const fieldsOfPolicy = fieldScale | fieldLimit | fieldAlgo | fieldSlices | fieldQueue

// fieldNames are the fields' names on the wire, by bit: fieldNames[i] is
// the name of the field 1<<i.
var fieldNames = [...]string{"id", "scale", "limit", "hits", "algo", "policy", "slices", "queue", "max_delay_ms", "wait"}

// fieldOf returns the field named name, or 0. It is on the hot path: a
// switch, which the compiler makes a search by length and bytes, where a
// loop over fieldNames would compare them one by one.
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
	case "policy":
		return fieldPolicy
	case "slices":
		return fieldSlices
	case "queue":
		return fieldQueue
	case "max_delay_ms":
		return fieldMaxDelay
	case "wait":
		return fieldWait
	}
	return 0
}

// index is the position of the one field f in fieldNames.
func (f fields) index() int { return bits.TrailingZeros16(uint16(f)) }

func (f fields) name() string { return fieldNames[f.index()] }

func (f fields) set(r *rl.Request, n int64) {
	switch f {
	case fieldScale:
		r.Scale = millis.Duration(n)
	case fieldLimit:
		r.Limit = n
	case fieldHits:
		r.Hits, r.Peek = n, n == 0 // hits=0 on the wire is a peek
	case fieldSlices:
		r.Slices = n
	case fieldQueue:
		r.Queue = n
	case fieldMaxDelay:
		r.MaxDelay = millis.Duration(n)
	}
}

// The parameters each endpoint reads, for the error of one it does not
// (unknown): a typo such as alog= must not fall back to a default unseen.
const (
	checkParams  = "the known ones are id, scale, limit, hits, algo, slices, queue, max_delay_ms, wait and policy"
	batchFields  = "the known ones are id, scale, limit, hits, algo, slices, queue, max_delay_ms and policy"
	bucketsGet   = "the known ones are id, limit and cursor"
	bucketsDel   = "the known ones are id and scale"
	authParams   = "the only one is deny_status"
	maxShownName = 64 // bytes of an unknown name an error repeats
)

// unknown returns the error for a parameter or field name that what (an
// endpoint's parameters, a check's fields) does not hold, naming it and,
// in known, the ones it does. It allocates, on the error's path only.
func unknown(name []byte, what, known string) error {
	return &rl.FieldError{Field: shownName(name), Rule: "is not " + what + "; " + known}
}

// shownName is a name as an error repeats it: "" quoted when empty, cut
// after maxShownName bytes.
func shownName(name []byte) string {
	switch {
	case len(name) == 0:
		return `""`
	case len(name) > maxShownName:
		return string(name[:maxShownName]) + "..."
	}
	return string(name)
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

// rules holds, by field (index), the core's own error for each field out
// of bounds, so a value that cannot even be read as an integer (a sign, a
// space, an overflow) is refused with the same words as one out of range.
// wait's is errWait; policy has none.
type rules [len(fieldNames)]*rl.FieldError

func newRules(maxID int) *rules {
	var rs rules
	for i, name := range fieldNames {
		rs[i] = check.OutOfBounds(name, maxID)
	}
	rs[fieldWait.index()] = errWait
	return &rs
}

func (rs *rules) of(f fields) *rl.FieldError { return rs[f.index()] }

// errWait refuses a wait that is neither 0 nor 1.
var errWait = &rl.FieldError{Field: "wait", Rule: "must be 0 or 1 (1: the answer is held for delay_ms, at most -max-wait)"}

// errWaitInBatch refuses wait in a batch's item.
var errWaitInBatch = &rl.FieldError{Field: "wait", Rule: "is for single checks: a batch's answers each say their delay_ms"}

// checkOpts is what a check asks of its answer, beside the request.
type checkOpts struct {
	// wait holds the answer for its delay_ms (wait=1, or a policy's wait:
	// true unless wait=0).
	wait bool
	// waitGiven is set when the check said wait itself.
	waitGiven bool
}

// parseWait reads wait's value: 0 or 1.
func parseWait(v []byte) (bool, bool) {
	switch string(v) {
	case "0":
		return false, true
	case "1":
		return true, true
	}
	return false, false
}

// parseUint reads a decimal integer made of digits only: no sign, no space,
// not empty, and small enough for an int64 (anything longer is out of every
// bound anyway).
func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	// Two digits a step: half the chain of multiplications.
	var n int64
	if len(b)%2 == 1 {
		c := b[0] - '0'
		if c > 9 {
			return 0, false
		}
		n = int64(c)
		b = b[1:]
	}
	for ; len(b) >= 2; b = b[2:] {
		c0, c1 := b[0]-'0', b[1]-'0'
		if c0 > 9 || c1 > 9 {
			return 0, false
		}
		n = n*100 + int64(c0)*10 + int64(c1)
	}
	return n, true
}

// parseArgs reads a check from a query string or a form. An unknown name
// is refused (a typo must not fall back to a default), and so is a known
// name given twice.
// It copies the id: nothing it returns refers to args. A check by policy
// (policy=NAME) takes its scale, limit, algo and default hits from the
// policy found in pc, and its id becomes the policy's counter id; *shown is
// then the id as the caller gave it (else r.ID). wait=1 sets opts.wait.
func parseArgs(args *fasthttp.Args, r *rl.Request, shown *string, maxID int, rs *rules, pc *policyCheck, opts *checkOpts) (*policy.Policy, error) {
	*r = rl.Request{Hits: 1}
	*opts = checkOpts{}
	var seen fields
	var pname, id []byte
	for k, v := range args.All() {
		f := fieldOf(k)
		if f == 0 {
			return nil, unknown(k, "a parameter of /check_rate", checkParams)
		}
		if seen&f != 0 {
			return nil, f.once()
		}
		seen |= f
		switch f {
		case fieldID:
			if len(v) > maxID {
				return nil, rs.of(fieldID)
			}
			id = v
		case fieldPolicy:
			pname = v
		case fieldAlgo:
			a, err := check.ParseAlgo(string(v))
			if err != nil {
				return nil, err
			}
			r.Algo = a
		case fieldWait:
			w, ok := parseWait(v)
			if !ok {
				return nil, rs.of(fieldWait)
			}
			opts.wait, opts.waitGiven = w, true
		default:
			n, ok := parseUint(v)
			if !ok {
				return nil, rs.of(f)
			}
			f.set(r, n)
		}
	}
	p, err := pc.finish(r, pname, seen, id, opts)
	if err != nil {
		return nil, err
	}
	return p, setID(r, shown, id, p, maxID)
}

// setID sets r.ID from the id the check gave, which *shown then holds: the
// id itself, or for a check by policy p the policy's counter id of it, up
// to policy.IDOverhead bytes longer than maxID. It returns the error of r
// on the wire, if any.
func setID(r *rl.Request, shown *string, id []byte, p *policy.Policy, maxID int) error {
	*shown = string(id)
	if p == nil {
		r.ID = *shown
		return check.ValidateWire(*r, maxID)
	}
	r.ID = counterID(p, id)
	return check.ValidateWire(*r, maxID+policy.IDOverhead)
}
