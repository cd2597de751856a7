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

// The examples that talk to Redis have no "// Output:" line: go test
// compiles them (and go doc shows them) but does not run them, since an
// example cannot skip and the tests must not depend on a Redis someone
// left running. The behaviour they show is tested, against a redis-server
// the tests start themselves, in this package's tests.

// Several processes that build the same backend on the same Redis share one
// limit. (Compiled, not run: it needs a Redis.)
func ExampleNew() {
	b, err := redisbackend.New(redisbackend.Config{
		URL:     "redis://127.0.0.1:6379/0", // rediss:// for TLS; ?addr=… for more Cluster nodes
		Timeout: 50 * time.Millisecond,
		Fail:    rl.FailOpen,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	d, err := b.CheckRate(context.Background(), rl.Request{ID: "user-42", Scale: time.Minute, Limit: 100})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("allowed:", d.Allowed, "remaining:", d.Remaining)
}

// With FailLocal, while Redis does not answer an embedded limiter decides,
// each process on its own; the checks return their decisions with a nil
// error, as the client's FailOpen does, and OnDegraded hears of them.
// (Compiled, not run: it needs a Redis.)
func ExampleConfig_failLocal() {
	local := memory.New(memory.Config{})
	defer local.Close()
	b, err := redisbackend.New(redisbackend.Config{
		URL:      "redis://127.0.0.1:6379/0",
		Fail:     rl.FailLocal,
		Fallback: local,
		OnDegraded: func(e rl.DegradedEvent) {
			log.Printf("redis unavailable, %d checks answered by %s: %v", e.Checks, e.Mode, e.Err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	var lim rl.Limiter = b // the same interface as memory and client
	d, err := lim.CheckRate(context.Background(), rl.Request{ID: "user-42", Scale: time.Minute, Limit: 100})
	if err != nil {
		log.Fatal(err) // invalid input, or a cancelled context
	}
	fmt.Println("allowed:", d.Allowed, "retry after:", d.RetryAfter)
}

// Wait on a leaky bucket shared by every process: the script in Redis
// gives each check its turn, and Wait sleeps it here. (Compiled, not run:
// it needs a Redis.)
func ExampleBackend_Wait() {
	b, err := redisbackend.New(redisbackend.Config{URL: "redis://127.0.0.1:6379/0"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// Ten jobs a second across the fleet; up to 20 may wait their turn.
	r := rl.Request{ID: "job-queue", Scale: time.Second, Limit: 10, Algo: rl.Leaky, Queue: 20}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := b.Wait(ctx, r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("allowed:", d.Allowed, "waited:", d.Delay)
}
