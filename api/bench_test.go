package api

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/memory"
)

// instant is a limiter that answers at once without state: it isolates the
// API's own cost from the backend's.
type instant struct{ rl.Limiter }

func (instant) CheckRate(_ context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Decision{Allowed: true, Count: 1, Limit: r.Limit, Remaining: r.Limit - 1, Reset: time.Second, Now: time.UnixMilli(1_700_000_000_000)}, nil
}

// bareParse is the baseline: parse the query as the API does, answer a
// fixed body.
func bareParse(rs *rules) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		var r rl.Request
		var shown string
		var pc policyCheck
		var opts checkOpts
		if _, err := parseArgs(ctx.QueryArgs(), &r, &shown, check.DefaultMaxIDBytes, rs, &pc, &opts); err != nil {
			ctx.SetStatusCode(400)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"ok":true}`)
	}
}

// BenchmarkCheckRate runs GET /check_rate handlers in memory (no network)
// over 10,000 ids: the bare parse, the API on an instant limiter, and the
// API on the embedded limiter.
func BenchmarkCheckRate(b *testing.B) { benchmarkCheckRate(b, false) }

// BenchmarkCheckRateWritten is BenchmarkCheckRate with each response
// serialised as the server writes it (to io.Discard): the headers and body
// the API adds cost there too.
func BenchmarkCheckRateWritten(b *testing.B) { benchmarkCheckRate(b, true) }

func benchmarkCheckRate(b *testing.B, write bool) {
	uris := make([][]byte, 10000)
	for i := range uris {
		uris[i] = []byte("/check_rate?id=user" + strconv.Itoa(i) + "&scale=60000&limit=1000000")
	}
	lim := memory.New(memory.Config{SweepInterval: -1})
	b.Cleanup(func() { lim.Close() })
	for _, bc := range []struct {
		name string
		h    fasthttp.RequestHandler
	}{
		{"bare-parse", bareParse(newRules(check.DefaultMaxIDBytes))},
		{"api-instant-limiter", New(Config{Limiter: instant{}}).Handler},
		{"api-memory-limiter", New(Config{Limiter: lim}).Handler},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			serveParallel(b, bc.h, write, func(req *fasthttp.Request, i int) {
				req.SetRequestURIBytes(uris[i%len(uris)])
			})
		})
	}
}

// serveParallel runs h in memory from b's parallel goroutines, each on its
// own request, which set fills for the goroutine's i-th call; any status
// but 200 fails b. With write set, each response is also written as the
// server writes it, to io.Discard.
func serveParallel(b *testing.B, h fasthttp.RequestHandler, write bool, set func(req *fasthttp.Request, i int)) {
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		w := bufio.NewWriter(io.Discard)
		for i := 0; pb.Next(); i++ {
			req.Reset()
			set(&req, i)
			ctx.Init(&req, nil, nil)
			h(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			if write {
				if err := ctx.Response.Write(w); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func (instant) CheckRates(_ context.Context, rs []rl.Request) ([]rl.Decision, error) {
	ds := make([]rl.Decision, len(rs))
	for i, r := range rs {
		ds[i] = rl.Decision{Allowed: true, Count: 1, Limit: r.Limit, Remaining: r.Limit - 1, Reset: time.Second, Now: time.UnixMilli(1_700_000_000_000)}
	}
	return ds, nil
}

// batchBody is the body of a POST /check_rates of n sliding-window checks,
// every one of another id, none of them near its limit.
func batchBody(n int) []byte {
	body := []byte("[")
	for i := range n {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"id":"user`+strconv.Itoa(i)+`","scale":60000,"limit":1000000,"algo":"sliding"}`...)
	}
	return append(body, ']')
}

// BenchmarkCheckRates runs POST /check_rates of 100 checks in memory on the
// instant limiter: the API's own cost per batch (parse, answer), reported
// per check too.
func BenchmarkCheckRates(b *testing.B) {
	const n = 100
	body := batchBody(n)
	h := New(Config{Limiter: instant{}}).Handler
	b.ReportAllocs()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		for pb.Next() {
			req.Reset()
			req.Header.SetMethod("POST")
			req.SetRequestURI("/check_rates")
			req.SetBody(body)
			ctx.Init(&req, nil, nil)
			h(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/check")
}

// BenchmarkParseBatch reads the body of BenchmarkCheckRates (100 checks)
// into a batch's requests: the JSON reading alone, without the handler.
func BenchmarkParseBatch(b *testing.B) {
	const n = 100
	body := batchBody(n)
	s := New(Config{Limiter: instant{}})
	bt := new(batch)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		bt.reqs, bt.pols, bt.ends, bt.ids = bt.reqs[:0], bt.pols[:0], bt.ends[:0], bt.ids[:0]
		pc := s.policyCheck()
		if err := s.parseBatch(body, bt, &pc); err != nil {
			b.Fatal(err)
		}
		bt.json.release()
	}
}

// reportCPU reports the process's CPU time (user and system) per operation,
// steadier than ns/op on a machine shared with other work. Call the result
// when the measured loop is done.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkCheckRatesAtCap runs POST /check_rates of 1000 new ids each on
// the memory limiter at its bound of 200,000 buckets (every id evicts one),
// as a flood of distinct ids does: per batch, its cost and what it
// allocates (what makes the collector run during a flood).
func BenchmarkCheckRatesAtCap(b *testing.B) {
	lim := memory.New(memory.Config{SweepInterval: -1, MaxBuckets: 200_000, Shards: 1})
	b.Cleanup(func() { lim.Close() })
	h := New(Config{Limiter: lim}).Handler
	next := 0
	bodies := make([][]byte, 400) // 400,000 ids: the bound is full after the first 200
	for i := range bodies {
		body := []byte("[")
		for j := range 1000 {
			if j > 0 {
				body = append(body, ',')
			}
			body = append(body, `{"id":"f`+strconv.Itoa(next)+`","scale":600000,"limit":100}`...)
			next++
		}
		bodies[i] = append(body, ']')
	}
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	for i := range 200 { // fill the bound
		req.Reset()
		req.Header.SetMethod("POST")
		req.SetRequestURI("/check_rates")
		req.SetBody(bodies[i])
		ctx.Init(&req, nil, nil)
		h(&ctx)
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		req.Reset()
		req.Header.SetMethod("POST")
		req.SetRequestURI("/check_rates")
		req.SetBody(bodies[200+i%200])
		ctx.Init(&req, nil, nil)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
