package raterlimiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
)

// start is the instant the examples' clocks stand at: 22:20:20 UTC, 40 s
// before the end of a minute window (windows are aligned to the epoch).
var start = time.UnixMilli(1_700_000_420_000).UTC()

// A Limiter decides Requests: here the embedded one, two requests per minute
// for alice. The sidecar's client and the Redis backend answer the same
// Request with the same Decision.
func Example() {
	// A fixed clock keeps the output stable; leave Clock out in real use.
	lim := memory.New(memory.Config{Clock: func() time.Time { return start }})
	defer lim.Close()

	var l rl.Limiter = lim
	ctx := context.Background()
	for range 3 {
		d, err := l.CheckRate(ctx, rl.Request{ID: "alice", Scale: time.Minute, Limit: 2})
		if err != nil {
			log.Fatal(err) // rl.ErrInvalid: bad input; rl.ErrUnavailable: no answer in time
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v reset-at=%s\n",
			d.Allowed, d.Remaining, d.RetryAfter, d.Now.Add(d.Reset).Format(time.TimeOnly))
	}
	// Output:
	// allowed=true remaining=1 retry-after=0s reset-at=22:21:00
	// allowed=true remaining=0 retry-after=0s reset-at=22:21:00
	// allowed=false remaining=0 retry-after=40s reset-at=22:21:00
}

// The zero Hits counts one hit; a peek says so with Peek and counts nothing.
func ExampleRequest_peek() {
	lim := memory.New(memory.Config{Clock: func() time.Time { return start }})
	defer lim.Close()
	ctx := context.Background()

	r := rl.Request{ID: "bob", Scale: time.Second, Limit: 5}
	d, _ := lim.CheckRate(ctx, r) // Hits 0: one hit
	fmt.Println("counted:", d.Count)
	d, _ = lim.CheckRate(ctx, rl.Request{ID: "bob", Scale: time.Second, Limit: 5, Hits: 3})
	fmt.Println("counted:", d.Count)
	r.Peek = true
	d, _ = lim.CheckRate(ctx, r)
	fmt.Println("peeked:", d.Count, "remaining:", d.Remaining)
	// Output:
	// counted: 1
	// counted: 4
	// peeked: 4 remaining: 1
}

// A request outside the bounds fails with an error that matches ErrInvalid
// and names the field; nothing is counted.
func ExampleFieldError() {
	lim := memory.New(memory.Config{})
	defer lim.Close()

	_, err := lim.CheckRate(context.Background(), rl.Request{ID: "carol", Scale: 1500 * time.Microsecond, Limit: 10})
	var fe *rl.FieldError
	if errors.As(err, &fe) {
		fmt.Println(errors.Is(err, rl.ErrInvalid), fe.Field)
		fmt.Println(err)
	}
	// Output:
	// true Scale
	// raterlimiter: invalid Scale: 1.5ms is not a whole number of milliseconds
}

// A batch is decided in order; if one request is invalid, none is counted
// and the *ItemError names the first bad index.
func ExampleItemError() {
	lim := memory.New(memory.Config{})
	defer lim.Close()

	_, err := lim.CheckRates(context.Background(), []rl.Request{
		{ID: "dave", Scale: time.Second, Limit: 10},
		{ID: "", Scale: time.Second, Limit: 10},
	})
	var ie *rl.ItemError
	if errors.As(err, &ie) {
		fmt.Println(errors.Is(err, rl.ErrInvalid), ie.Index)
	}
	// Output:
	// true 1
}

// Each algorithm has the name the HTTP API, the policy file and the
// metrics give it.
func ExampleAlgo() {
	for _, a := range []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Log, rl.Slices, rl.Leaky} {
		fmt.Println(int(a), a)
	}
	// Output:
	// 0 fixed
	// 1 sliding
	// 2 token
	// 3 log
	// 4 slices
	// 5 leaky
}
