package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Pages of GET /buckets.
const (
	// defaultBucketsPage is Config.BucketsPage's default: the records one
	// GET /buckets answers without a limit.
	defaultBucketsPage = 1000
	// MaxBucketsPage is the most records one GET /buckets answers, whatever
	// its limit.
	MaxBucketsPage = 10_000
	// NextCursorHeader carries the cursor of the next page of GET
	// /buckets, when there is one: send it back as ?cursor=.
	NextCursorHeader = "X-Next-Cursor"
)

// bucketsArgs is what a /buckets request asks: GET id[, limit][, cursor],
// DELETE id[, scale].
type bucketsArgs struct {
	id     string
	scale  int64 // DELETE: 0 or absent, every scale
	limit  int   // GET: records in a page, 1 to MaxBucketsPage
	cursor int   // GET: the records already seen
}

// parseBucketsArgs reads /buckets' query: id is required; scale is for
// DELETE, limit and cursor for GET; any other name, or a name given twice,
// is refused.
func parseBucketsArgs(args *fasthttp.Args, get bool, page int, rs *rules) (bucketsArgs, error) {
	a := bucketsArgs{limit: page}
	known := bucketsDel
	if get {
		known = bucketsGet
	}
	seen := make(map[string]bool, 3)
	for k, v := range args.All() {
		name := string(k)
		switch {
		case name != "id" && name != "scale" && name != "limit" && name != "cursor":
			return a, unknown(k, "a parameter of /buckets", known)
		case seen[name]:
			return a, &rl.FieldError{Field: name, Rule: "must be given once"}
		case get && name == "scale":
			return a, &rl.FieldError{Field: name, Rule: "is only for DELETE"}
		case !get && (name == "limit" || name == "cursor"):
			return a, &rl.FieldError{Field: name, Rule: "is only for GET"}
		}
		seen[name] = true
		n, ok := parseUint(v)
		switch name {
		case "id":
			a.id = string(v)
		case "scale":
			if !ok || n < 1 || n > millis.MaxScale {
				return a, rs.of(fieldScale)
			}
			a.scale = n
		case "limit":
			if !ok || n < 1 || n > MaxBucketsPage {
				return a, &rl.FieldError{Field: "limit", Rule: "must be an integer from 1 to " + strconv.Itoa(MaxBucketsPage)}
			}
			a.limit = int(n)
		case "cursor":
			if !ok || n > 1<<31 {
				return a, &rl.FieldError{Field: "cursor", Rule: "must be a cursor an earlier page's " + NextCursorHeader + " gave"}
			}
			a.cursor = int(n)
		}
	}
	if !seen["id"] {
		// No listing of every id: a sidecar may hold millions, and on
		// Redis they are other sidecars' too. The hottest are on the
		// dashboard.
		return a, &rl.FieldError{Field: "id", Rule: "is required: /buckets?id=ID reads or resets one id's records; there is no listing of every id (the ids checked most are on /dashboard)"}
	}
	return a, nil
}

// requireAdmin answers 401 and returns false unless the request carries the
// admin token (when one is set).
func (s *Server) requireAdmin(ctx *fasthttp.RequestCtx, path string) bool {
	if s.authorized(ctx) {
		return true
	}
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="raterlimiter"`)
	s.fail(ctx, fasthttp.StatusUnauthorized, "api: "+path+" needs the header Authorization: Bearer <admin token>")
	return false
}

func (s *Server) buckets(ctx *fasthttp.RequestCtx) {
	if !s.requireAdmin(ctx, "/buckets") {
		return
	}
	a, err := parseBucketsArgs(ctx.QueryArgs(), ctx.IsGet(), s.cfg.BucketsPage, s.rules)
	if err != nil {
		s.invalid(ctx, err)
		return
	}
	adm, ok := s.cfg.Limiter.(admin)
	if !ok {
		s.fail(ctx, fasthttp.StatusNotImplemented, "this backend has no admin calls")
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	if ctx.IsGet() {
		bs, err := adm.Buckets(c, a.id)
		if err != nil {
			s.limiterFailed(ctx, err)
			return
		}
		bs = bs[min(a.cursor, len(bs)):]
		if len(bs) > a.limit {
			bs = bs[:a.limit]
			ctx.Response.Header.Set(NextCursorHeader, strconv.Itoa(a.cursor+a.limit))
		}
		out := make([]millis.Bucket, len(bs))
		for i, b := range bs {
			out[i] = millis.OfBucket(b)
		}
		s.writeJSON(ctx, fasthttp.StatusOK, out)
		return
	}
	n, err := adm.Reset(c, a.id, millis.Duration(a.scale))
	if err != nil {
		s.limiterFailed(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Deleted int `json:"deleted"`
	}{n})
}

// authorized compares the Authorization header's bearer token with the
// admin token in constant time (hashing both first, so not even the length
// leaks). The scheme is compared without case ("bearer" is "Bearer", RFC
// 9110 §11.1), and one or more spaces may follow it.
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if !s.hasToken {
		return true
	}
	h := ctx.Request.Header.Peek("Authorization")
	const scheme = "bearer "
	if len(h) < len(scheme) || !strings.EqualFold(string(h[:len(scheme)]), scheme) {
		return false
	}
	got := sha256.Sum256(bytes.TrimLeft(h[len(scheme):], " "))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// admin is a backend's operator view of its records: every backend of this
// module has it.
type admin interface {
	Buckets(ctx context.Context, id string) ([]rl.Bucket, error)
	Reset(ctx context.Context, id string, scale time.Duration) (int, error)
}
