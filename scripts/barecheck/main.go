// Command barecheck is the baseline of the sidecar benchmark: a bare fasthttp
// server whose handler only parses the query of GET /check_rate (id, scale,
// limit, hits, algo, with the same rules as the sidecar) and answers 200 with
// a short fixed body. It has no limiter, no headers of its own and no
// metrics: what the sidecar costs beyond it is the price of rate limiting.
//
// Usage: barecheck -listen 127.0.0.1:0 (it logs the address it bound).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "barecheck:", err)
		os.Exit(1)
	}
	slog.Info("barecheck listening", "addr", ln.Addr().String())
	srv := &fasthttp.Server{Handler: handle, Name: "barecheck"}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "barecheck:", err)
		os.Exit(1)
	}
}

func handle(ctx *fasthttp.RequestCtx) {
	var id string
	var scale, limit, hits int64 = 0, 0, 1
	ok := true
	for k, v := range ctx.QueryArgs().All() {
		switch string(k) {
		case "id":
			id = string(v)
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
	if !ok || id == "" || scale < 1 || limit < 0 || hits < 0 {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetBodyString(`{"error":"bad request"}`)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"ok":true}`)
}

func num(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil && n >= 0 && len(b) > 0 && b[0] != '+'
}
