package api

import (
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/memory"
)

// BenchmarkAuth compares /auth with /check_rate for the same limit on the
// embedded limiter, over 10,000 keys, each response written as the server
// writes it: check-rate is GET /check_rate?id=KEY&scale=60000&limit=1000000,
// auth is GET /auth as nginx asks it (X-Original-Method, X-Original-URI
// /api/things?x=1, X-Api-Key: KEY) under one policy of that limit and
// scale; auth-path-to-clean sends /%61pi//things/./x;v=1?x=1, a path
// policy.CleanPath must decode and clean; auth-100-policies has the same
// policy last of 100.
func BenchmarkAuth(b *testing.B) {
	const keys = 10_000
	one := "policies:\n  - {name: api, match: {path_prefix: /api/}, key: 'header:X-Api-Key', limit: 1000000, scale: 1m}\n"
	many := "policies:\n"
	for i := range 99 {
		many += "  - {name: p" + strconv.Itoa(i) + ", match: {methods: [POST], path_prefix: /p" + strconv.Itoa(i) + "/}, key: ip, limit: 10, scale: 1m}\n"
	}
	many += one[len("policies:\n"):]
	lim := memory.New(memory.Config{SweepInterval: -1, MaxIDBytes: check.DefaultMaxIDBytes + policy.IDOverhead})
	b.Cleanup(func() { lim.Close() })
	server := func(src string) fasthttp.RequestHandler {
		f, err := policy.Parse("bench.yaml", []byte(src))
		if err != nil {
			b.Fatal(err)
		}
		return New(Config{Limiter: lim, Policies: f, AuthHeaders: policy.GatewayNginx}).Handler
	}
	ids := make([]string, keys)
	uris := make([][]byte, keys)
	for i := range ids {
		ids[i] = "key" + strconv.Itoa(i)
		uris[i] = []byte("/check_rate?id=" + ids[i] + "&scale=60000&limit=1000000")
	}
	for _, bc := range []struct {
		name string
		h    fasthttp.RequestHandler
		auth string // the original target; "" for check-rate
	}{
		{"check-rate", New(Config{Limiter: lim}).Handler, ""},
		{"auth", server(one), "/api/things?x=1"},
		{"auth-path-to-clean", server(one), "/%61pi//things/./x;v=1?x=1"},
		{"auth-100-policies", server(many), "/api/things?x=1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			serveParallel(b, bc.h, true, func(req *fasthttp.Request, i int) {
				if bc.auth != "" {
					req.SetRequestURI("/auth")
					req.Header.Set("X-Original-URI", bc.auth)
					req.Header.Set("X-Original-Method", "GET")
					req.Header.Set("X-Api-Key", ids[i%keys])
				} else {
					req.SetRequestURIBytes(uris[i%keys])
				}
			})
		})
	}
}
