package memory_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
)

// clock is a settable clock for the examples, which must not depend on the
// time they run at. Real programs leave Config.Clock out.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(1_700_000_420_000) // 2023-11-14 22:20:20 UTC
	return c
}

func (c *clock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// A token bucket of three requests per second: a burst of three passes, the
// fourth waits a third of a second.
func Example() {
	clk := newClock()
	lim := memory.New(memory.Config{Clock: clk.Now})
	defer lim.Close()

	ctx := context.Background()
	r := rl.Request{ID: "user-42", Scale: time.Second, Limit: 3, Algo: rl.Token}
	for range 4 {
		d, err := lim.CheckRate(ctx, r)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	clk.Advance(334 * time.Millisecond)
	d, _ := lim.CheckRate(ctx, r)
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 334ms
	// true 0 0s
}

// CheckRates decides a batch in order, in one call: a request and its
// burst limit, say.
func ExampleLimiter_CheckRates() {
	lim := memory.New(memory.Config{Clock: newClock().Now})
	defer lim.Close()

	ds, err := lim.CheckRates(context.Background(), []rl.Request{
		{ID: "user-42", Scale: time.Hour, Limit: 1000},
		{ID: "user-42", Scale: time.Second, Limit: 1, Hits: 2},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Println(d.Allowed, d.Count, d.Remaining)
	}
	// Output:
	// true 1 999
	// false 2 0
}

// Wait holds a worker back until each request may go: two per 100 ms
// here, so five requests take three windows. A denied check sleeps until
// its RetryAfter (plus a jitter that spreads the waiters of one window) and
// checks again; the context bounds the whole wait.
func ExampleLimiter_Wait() {
	lim := memory.New(memory.Config{})
	defer lim.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := rl.Request{ID: "worker", Scale: 100 * time.Millisecond, Limit: 2}
	start := time.Now()
	var allowed []bool
	for range 5 {
		d, err := lim.Wait(ctx, r)
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

// Save writes the counts to any io.Writer (a file, usually, written to a
// temporary name and renamed into place); Load restores them, in a new
// process for instance, from an io.ReaderAt and its size.
func ExampleLimiter_Save() {
	clk := newClock()
	ctx := context.Background()
	r := rl.Request{ID: "user-42", Scale: time.Hour, Limit: 100, Hits: 30}

	before := memory.New(memory.Config{Clock: clk.Now})
	if _, err := before.CheckRate(ctx, r); err != nil {
		log.Fatal(err)
	}
	var snap bytes.Buffer
	if err := before.Save(ctx, &snap); err != nil {
		log.Fatal(err)
	}
	before.Close()

	after := memory.New(memory.Config{Clock: clk.Now})
	defer after.Close()
	n, err := after.Load(ctx, bytes.NewReader(snap.Bytes()), int64(snap.Len()))
	if err != nil {
		log.Fatal(err) // errors.Is(err, memory.ErrCorruptSnapshot): nothing was restored
	}
	d, _ := after.CheckRate(ctx, r)
	fmt.Println(n, "record restored;", d.Count, "hits counted,", d.Remaining, "left")
	// Output:
	// 1 record restored; 60 hits counted, 40 left
}
