package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
	"time"

	"github.com/raterlimiter/raterlimiter/internal/defaults"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/ms"
)

// Pages of GET /buckets.
const (
	// defaultBucketsPage is Config.BucketsPage's default: the records one
	// GET /buckets answers without a limit.
	defaultBucketsPage = defaults.BucketsPage
	// MaxBucketsPage is the most records one GET /buckets answers, whatever
	// its limit.
	MaxBucketsPage = 10_000
	// NextCursorHeader carries the cursor of the next page of GET
	// /buckets, when there is one: send it back as ?cursor=.
	NextCursorHeader = "X-Next-Cursor"
)

// pageArgs reads GET /buckets' limit (1 to MaxBucketsPage) and cursor (the
// records already seen).
func pageArgs(args *fasthttp.Args, page int) (limit, cursor int, err error) {
	limit = page
	if v := args.Peek("limit"); v != nil {
		n, ok := parseUint(v)
		if !ok || n < 1 || n > MaxBucketsPage {
			return 0, 0, &rl.FieldError{Field: "limit", Rule: "must be an integer from 1 to " + strconv.Itoa(MaxBucketsPage)}
		}
		limit = int(n)
	}
	if v := args.Peek("cursor"); v != nil {
		n, ok := parseUint(v)
		if !ok || n > 1<<31 {
			return 0, 0, &rl.FieldError{Field: "cursor", Rule: "must be a cursor an earlier page's " + NextCursorHeader + " gave"}
		}
		cursor = int(n)
	}
	return limit, cursor, nil
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
	// id is required; scale only with DELETE (0 or absent: every scale).
	var id string
	var scale int64
	var seen fields
	for k, v := range ctx.QueryArgs().All() {
		f := fieldOf(k)
		if f != fieldID && f != fieldScale {
			continue
		}
		if seen&f != 0 {
			s.invalid(ctx, f.once())
			return
		}
		seen |= f
		switch {
		case f == fieldID:
			id = string(v)
		case ctx.IsGet():
			s.invalid(ctx, &rl.FieldError{Field: "scale", Rule: "is only for DELETE"})
			return
		default:
			n, ok := parseUint(v)
			if !ok || n < 1 || n > ms.MaxScale {
				s.invalid(ctx, s.rules.scale)
				return
			}
			scale = n
		}
	}
	if seen&fieldID == 0 {
		// No listing of every id: a sidecar may hold millions, and on
		// Redis they are other sidecars' too. The hottest are on the
		// dashboard.
		s.invalid(ctx, &rl.FieldError{Field: "id", Rule: "is required: /buckets?id=ID reads or resets one id's records; there is no listing of every id (the ids checked most are on /dashboard)"})
		return
	}
	adm, ok := s.lim.(admin)
	if !ok {
		s.fail(ctx, fasthttp.StatusNotImplemented, "this backend has no admin calls")
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if ctx.IsGet() {
		limit, cursor, err := pageArgs(ctx.QueryArgs(), s.bucketsPage)
		if err != nil {
			s.invalid(ctx, err)
			return
		}
		bs, err := adm.Buckets(c, id)
		if err != nil {
			s.limiterFailed(ctx, err)
			return
		}
		bs = bs[min(cursor, len(bs)):]
		if len(bs) > limit {
			bs = bs[:limit]
			ctx.Response.Header.Set(NextCursorHeader, strconv.Itoa(cursor+limit))
		}
		out := make([]ms.Bucket, len(bs))
		for i, b := range bs {
			out[i] = ms.OfBucket(b)
		}
		s.writeJSON(ctx, fasthttp.StatusOK, out)
		return
	}
	n, err := adm.Reset(c, id, ms.Duration(scale))
	if err != nil {
		s.limiterFailed(ctx, err)
		return
	}
	s.writeJSON(ctx, fasthttp.StatusOK, struct {
		Deleted int `json:"deleted"`
	}{n})
}

// authorized compares the Authorization header with the token in constant
// time (hashing both first, so not even the length leaks).
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if !s.hasToken {
		return true
	}
	got := sha256.Sum256(ctx.Request.Header.Peek("Authorization"))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// admin is a backend's operator view of its records: every backend of this
// module has it.
type admin interface {
	Buckets(ctx context.Context, id string) ([]rl.Bucket, error)
	Reset(ctx context.Context, id string, scale time.Duration) (int, error)
}
