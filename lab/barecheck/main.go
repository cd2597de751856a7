// Command barecheck is the baseline of the sidecar benchmark: a bare fasthttp
// server whose handler only parses the query of GET /check_rate (id, scale,
// limit, hits, algo, with the same rules as the sidecar) and answers 200 with
// a short fixed body. It has no limiter, no headers of its own and no
// metrics: what the sidecar costs beyond it is the price of rate limiting.
//
// With -api it serves instead the sidecar's own API (package api) on a
// limiter that answers at once without state: the difference between that
// and the sidecar is the backend's cost (the actors), the difference between
// it and the bare handler the API's (headers, body, metrics, timeouts).
//
// With -same the bare handler answers what the sidecar answers to an allowed
// check, byte for byte but for the Date: the same status, Server name, the
// five rate-limit headers with their values formatted per request from the
// parsed limit, scale and hits and the time, and the same JSON body, with
// no limiter (count = hits, the window the fixed window of scale that holds
// the request's time). That is the baseline of issue 36's "a bare fasthttp
// handler answering the same bytes"; the short answer stays for comparison.
//
// Usage: barecheck [-api | -same] -listen 127.0.0.1:0 (it logs the address it
// bound).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
)

// instant answers every check at once: allowed, count 1.
type instant struct{ rl.Limiter }

func (instant) CheckRate(_ context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Decision{Allowed: true, Count: 1, Limit: r.Limit, Remaining: max(0, r.Limit-1), Reset: time.Second, Now: time.UnixMilli(1_700_000_000_000)}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on")
	withAPI := flag.Bool("api", false, "serve package api on an instant limiter instead of the bare handler")
	same := flag.Bool("same", false, "answer the sidecar's bytes for an allowed check (headers and JSON body) without a limiter")
	perIP := flag.Int("max-conns-per-ip", 0, "with -api: the API's bound on connections per client address (0: its default)")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "barecheck:", err)
		os.Exit(1)
	}
	slog.Info("barecheck listening", "addr", ln.Addr().String())
	serve := (&fasthttp.Server{Handler: handle, Name: "barecheck"}).Serve
	if *same {
		serve = sameServer(nil).Serve
	}
	if *withAPI {
		serve = api.New(api.Config{Limiter: instant{}, ConnLimits: api.ConnLimits{PerIP: *perIP}}).Serve
	}
	if err := serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "barecheck:", err)
		os.Exit(1)
	}
}

func handle(ctx *fasthttp.RequestCtx) {
	raw, _, _, _, ok := parseCheck(ctx)
	if id := string(raw); !ok || id == "" {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetBodyString(`{"error":"bad request"}`)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"ok":true}`)
}

// parseCheck reads a check's query as the sidecar's API does: id, scale,
// limit and hits (default 1), each number a plain non-negative integer,
// and algo among those the bare handlers accept; ok is false for anything
// else, or for a scale under 1.
func parseCheck(ctx *fasthttp.RequestCtx) (id []byte, scale, limit, hits int64, ok bool) {
	hits, ok = 1, true
	for k, v := range ctx.QueryArgs().All() {
		switch string(k) {
		case "id":
			id = v
		case "scale":
			scale, ok = num(v)
		case "limit":
			limit, ok = num(v)
		case "hits":
			hits, ok = num(v)
		case "algo":
			switch string(v) {
			case "", "fixed", "sliding", "token":
			default:
				ok = false
			}
		}
		if !ok {
			break
		}
	}
	ok = ok && scale >= 1 && limit >= 0 && hits >= 0
	return id, scale, limit, hits, ok
}

func num(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil && n >= 0 && len(b) > 0 && b[0] != '+'
}
