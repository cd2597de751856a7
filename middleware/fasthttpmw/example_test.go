package fasthttpmw_test

import (
	"fmt"
	"log"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/fasthttpmw"
)

// Two requests per minute per client address; the third is refused. The
// example calls the handler as fasthttp.Server would, on a RequestCtx of
// its own.
func Example() {
	// A fixed clock keeps the output stable; leave Clock out in real use.
	lim := memory.New(memory.Config{Clock: func() time.Time { return time.UnixMilli(1_700_000_000_000) }})
	defer lim.Close()
	mw, err := fasthttpmw.New(middleware.Config{
		Limiter: lim, // or a *client.Client of a sidecar
		Policy:  rl.Request{Scale: time.Minute, Limit: 2},
	}, nil) // nil: the key is the client's IP address
	if err != nil {
		log.Fatal(err)
	}
	app := mw(func(ctx *fasthttp.RequestCtx) {
		fmt.Fprintln(ctx, "hello")
	})
	// In a real program: fasthttp.ListenAndServe(addr, app)

	peer := &net.TCPAddr{IP: net.ParseIP("198.51.100.7"), Port: 41000}
	for range 3 {
		var req fasthttp.Request
		req.SetRequestURI("http://example.com/")
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, peer, nil)
		app(&ctx)
		fmt.Println(ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("X-RateLimit-Remaining")),
			len(ctx.Response.Header.Peek("Retry-After")) > 0)
	}
	// Output:
	// 200 1 false
	// 200 0 false
	// 429 0 true
}
