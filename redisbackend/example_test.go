package redisbackend_test

import (
	"context"
	"fmt"
	"log"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// redisURL names the Redis the examples use: yours is likely
// "redis://127.0.0.1:6379/0" (rediss:// for TLS, ?addr=… for more
// Cluster nodes). go test starts a private redis-server for them
// (TestMain) and sets it.
var redisURL = "redis://127.0.0.1:6379/0"

// t0 is the examples' clock, standing still so that their output does not
// depend on when they run. Real programs leave Config.Clock out.
func t0() time.Time { return time.UnixMilli(1_700_000_420_000) } // 2023-11-14 22:20:20 UTC

// Several processes that build the same backend on the same Redis share one
// limit: here two backends, as two sidecars would, take turns at a limit
// of three a minute.
func ExampleNew() {
	cfg := redisbackend.Config{URL: redisURL, Clock: t0}
	a, err := redisbackend.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := redisbackend.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	r := rl.Request{ID: "user-42", Scale: time.Minute, Limit: 3}
	for i, lim := range []*redisbackend.Backend{a, b, a, b} {
		d, err := lim.CheckRate(ctx, r)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("process", "ab"[i%2:i%2+1], "allowed:", d.Allowed, "remaining:", d.Remaining)
	}
	// Reset, an operator's call, forgets the id's records.
	if _, err := a.Reset(ctx, "user-42", 0); err != nil {
		log.Fatal(err)
	}
	// Output:
	// process a allowed: true remaining: 2
	// process b allowed: true remaining: 1
	// process a allowed: true remaining: 0
	// process b allowed: false remaining: 0
}

// With FailLocal, while Redis does not answer an embedded limiter decides,
// each process on its own; the checks return their decisions with a nil
// error, as the client's FailOpen does, and OnDegraded hears of them.
// While Redis answers, as here, Redis decides.
func ExampleConfig_failLocal() {
	local := memory.New(memory.Config{})
	defer local.Close()
	b, err := redisbackend.New(redisbackend.Config{
		URL:      redisURL,
		Timeout:  time.Second, // past this, Redis counts as unavailable
		Fail:     rl.FailLocal,
		Fallback: local,
		OnDegraded: func(e rl.DegradedEvent) {
			log.Printf("redis unavailable, %d checks answered by %s: %v", e.Checks, e.Mode, e.Err)
		},
		Clock: t0,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	var lim rl.Limiter = b // the same interface as memory and client
	ctx := context.Background()
	d, err := lim.CheckRate(ctx, rl.Request{ID: "user-7", Scale: time.Minute, Limit: 100})
	if err != nil {
		log.Fatal(err) // invalid input, or a cancelled context
	}
	fmt.Println("allowed:", d.Allowed, "remaining:", d.Remaining)
	if _, err := b.Reset(ctx, "user-7", 0); err != nil {
		log.Fatal(err)
	}
	// Output:
	// allowed: true remaining: 99
}

// Wait holds a worker back until each request may go, on a limit every
// process shares: two per 100 ms here, so five requests take three
// windows. A denied check sleeps until its RetryAfter (plus a jitter that
// spreads the waiters of one window) and checks again.
func ExampleBackend_Wait() {
	b, err := redisbackend.New(redisbackend.Config{URL: redisURL})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := rl.Request{ID: "job-queue", Scale: 100 * time.Millisecond, Limit: 2}
	start := time.Now()
	var allowed []bool
	for range 5 {
		d, err := b.Wait(ctx, r)
		if err != nil {
			log.Fatal(err)
		}
		allowed = append(allowed, d.Allowed)
	}
	fmt.Println(allowed)
	fmt.Println("waited at least a window:", time.Since(start) >= 100*time.Millisecond)
	if _, err := b.Reset(ctx, "job-queue", 0); err != nil {
		log.Fatal(err)
	}
	// Output:
	// [true true true true true]
	// waited at least a window: true
}
