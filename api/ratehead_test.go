package api

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/headers"
)

// setRateHeaders writes what headers.SetBytes writes, byte for byte,
// whether its cache holds the (name, limit, window) or not: random names
// (quotes, backslashes and bytes left out of the quoted form among them),
// limits and windows drawn from small sets so that slots are hit, missed
// and taken over, allowed and denied decisions, a decision's limit other
// than the request's.
func TestSetRateHeadersAsHeadersPackage(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	names := []string{headers.PolicyName, "api", `a";q=1;w=2`, `b\"`, "c\x01\xff", ""}
	limits := []int64{0, 1, 10, 999, 1_000_000, 1 << 40}
	scales := []int64{1, 999, 1000, 1001, 60_000, 86_400_000}
	var c policyCache
	var buf []byte
	for i := range 20000 {
		name := names[rnd.IntN(len(names))]
		r := rl.Request{ID: "x", Limit: limits[rnd.IntN(len(limits))], Scale: time.Duration(scales[rnd.IntN(len(scales))]) * time.Millisecond, Hits: rnd.Int64N(3)}
		if rnd.IntN(20) == 0 {
			r.Limit = rnd.Int64N(1 << 50) // a miss
		}
		d := rl.Decision{Allowed: rnd.IntN(2) == 0, Limit: r.Limit, Count: rnd.Int64N(100),
			Remaining: rnd.Int64N(r.Limit + 1), Reset: time.Duration(rnd.Int64N(90_000_000)) * time.Microsecond,
			RetryAfter: time.Duration(rnd.Int64N(90_000_000)) * time.Microsecond, Now: time.UnixMilli(1_700_000_000_000 + rnd.Int64N(1e9))}
		if rnd.IntN(10) == 0 {
			d.Limit = rnd.Int64N(1 << 20)
		}
		var want, got fasthttp.ResponseHeader
		want.DisableNormalizing()
		got.DisableNormalizing()
		headers.SetBytes(want.SetBytesV, nil, name, r, d)
		buf = setRateHeaders(&got, &c, buf, name, r, d)
		if w, g := withoutDate(&want), withoutDate(&got); w != g {
			t.Fatalf("check %d: %q, %+v, %+v:\nheaders package:\n%s\nsetRateHeaders:\n%s", i, name, r, d, w, g)
		}
	}
}

// withoutDate is h as it is written, without the Date line fasthttp adds
// from its clock: two headers written a second apart differ there.
func withoutDate(h *fasthttp.ResponseHeader) string {
	var b strings.Builder
	for line := range strings.SplitSeq(h.String(), "\r\n") {
		if !strings.HasPrefix(line, "Date: ") {
			b.WriteString(line + "\r\n")
		}
	}
	return b.String()
}
