package nethttp_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

// Two requests per minute per client address; the third is refused. Behind
// a load balancer at 10.0.0.0/8, the client address comes from
// X-Forwarded-For.
func Example() {
	// A fixed clock keeps the output stable; leave Clock out in real use.
	lim := memory.New(memory.Config{Clock: func() time.Time { return time.UnixMilli(1_700_000_000_000) }})
	defer lim.Close()
	mw, err := nethttp.New(middleware.Config{
		Limiter:        lim, // or a *client.Client of a sidecar
		Policy:         rl.Request{Scale: time.Minute, Limit: 2},
		TrustedProxies: []string{"10.0.0.0/8"},
	}, nil) // nil: the key is the client's IP address
	if err != nil {
		log.Fatal(err)
	}
	app := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "10.0.0.7:41000" // the load balancer
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 1 false
	// 200 0 false
	// 429 0 true
}

// An API key in a header is the key: two requests per minute per key. A
// request without the key is answered 400, not let through unlimited
// (MissingKey: "skip" would let it through, "key:ip" would count it by the
// client's address).
func Example_apiKey() {
	lim := memory.New(memory.Config{Clock: func() time.Time { return time.UnixMilli(1_700_000_000_000) }})
	defer lim.Close()
	mw, err := nethttp.New(middleware.Config{
		Limiter: lim,
		Policy:  rl.Request{Scale: time.Minute, Limit: 2},
		KeyName: "X-Api-Key", // named in the 400's body
	}, func(r *http.Request) string { return r.Header.Get("X-Api-Key") })
	if err != nil {
		log.Fatal(err)
	}
	app := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for _, key := range []string{"k1", "k1", "k1", "k2", ""} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, req)
		fmt.Printf("%q %d %s", key, w.Code, w.Body)
	}
	// Output:
	// "k1" 200 hello
	// "k1" 200 hello
	// "k1" 429 Too many requests, retry in 40 s
	// "k2" 200 hello
	// "" 400 Bad request: missing X-Api-Key
}

// A Policy whose Limit was left out is refused: it would deny every
// request.
func ExampleNew_noLimit() {
	lim := memory.New(memory.Config{})
	defer lim.Close()
	_, err := nethttp.New(middleware.Config{Limiter: lim, Policy: rl.Request{Scale: time.Minute}}, nil)
	fmt.Println(err)
	// Output:
	// middleware: Config.Policy.Limit is 0, which would deny every request: set Policy's Limit and Scale (or PolicyName, a policy of the sidecar); to refuse every request on purpose, answer 429 from a handler of your own
}
