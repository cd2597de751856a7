package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/memory"
)

// startSidecar runs a sidecar on a loopback port, as `raterlimiter
// -listen 127.0.0.1:0` would, and returns its URL and a stop function.
func startSidecar() (string, func()) {
	// A fixed clock keeps the example's output stable.
	return startSidecarAt(func() time.Time { return time.UnixMilli(1_700_000_000_000) })
}

// startSidecarAt is startSidecar with the limiter's clock (nil: the wall
// clock).
func startSidecarAt(clock func() time.Time) (string, func()) {
	lim := memory.New(memory.Config{Clock: clock})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := api.New(api.Config{Limiter: lim})
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() {
		srv.Shutdown(context.Background())
		lim.Close()
	}
}

// The client is a raterlimiter.Limiter: the article's check_rate(Peer,
// 30000, 500), here with a limit of 2 so the third request is denied.
func Example() {
	url, stop := startSidecar()
	defer stop()

	c, err := client.New(client.Config{URL: url, Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var lim rl.Limiter = c // or memory.New(memory.Config{}): same interface
	ctx := context.Background()
	for range 3 {
		d, err := lim.CheckRate(ctx, rl.Request{ID: "198.51.100.7", Scale: 30 * time.Second, Limit: 2})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed=%v count=%d remaining=%d retry-later=%v\n", d.Allowed, d.Count, d.Remaining, d.RetryAfter > 0)
	}

	// Invalid input is refused before it is sent, with the field named.
	_, err = lim.CheckRate(ctx, rl.Request{ID: "x", Scale: 0, Limit: 1})
	var fe *rl.FieldError
	fmt.Println(errors.Is(err, rl.ErrInvalid), errors.As(err, &fe) && fe.Field == "Scale")
	// Output:
	// allowed=true count=1 remaining=1 retry-later=false
	// allowed=true count=2 remaining=0 retry-later=false
	// allowed=false count=3 remaining=0 retry-later=true
	// true true
}

// With FailOpen, a sidecar that cannot be reached allows every request; the
// call goes to OnDegraded.
func ExampleConfig_failOpen() {
	c, err := client.New(client.Config{
		URL:      "http://127.0.0.1:1", // nothing listens there
		FailMode: rl.FailOpen,
		OnDegraded: func(e rl.DegradedEvent) {
			fmt.Println("unavailable:", errors.Is(e.Err, rl.ErrUnavailable), "answered", e.Mode, e.Checks)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	d, err := c.CheckRate(context.Background(), rl.Request{ID: "u1", Scale: time.Second, Limit: 10})
	fmt.Println(d.Allowed, d.Remaining, err)
	// Output:
	// unavailable: true answered open 1
	// true 10 <nil>
}

// CheckRates sends a batch in one POST /check_rates; the sidecar decides it
// in order.
func ExampleClient_CheckRates() {
	url, stop := startSidecar()
	defer stop()
	c, err := client.New(client.Config{URL: url})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ds, err := c.CheckRates(context.Background(), []rl.Request{
		{ID: "user-42", Scale: time.Hour, Limit: 1000},
		{ID: "user-42", Scale: time.Second, Limit: 1, Hits: 2},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Println(d.Allowed, d.Count, d.Remaining, d.RetryAfter)
	}
	// Output:
	// true 1 999 0s
	// false 2 0 1s
}

// Wait over the sidecar holds a worker back until each request may go:
// two per 100 ms here, so five requests take three windows. The sidecar
// answers at once; the client sleeps until the RetryAfter (plus a jitter),
// holding no connection, and checks again.
func ExampleClient_Wait() {
	url, stop := startSidecarAt(nil) // the wall clock: Wait sleeps real time
	defer stop()
	c, err := client.New(client.Config{URL: url})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := rl.Request{ID: "worker", Scale: 100 * time.Millisecond, Limit: 2}
	start := time.Now()
	var allowed []bool
	for range 5 {
		d, err := c.Wait(ctx, r)
		if err != nil {
			log.Fatal(err)
		}
		allowed = append(allowed, d.Allowed)
	}
	fmt.Println(allowed)
	fmt.Println("waited at least a window:", time.Since(start) >= 100*time.Millisecond)
	// Output:
	// [true true true true true]
	// waited at least a window: true
}
