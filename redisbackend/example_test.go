package redisbackend_test

import (
	"context"
	"fmt"
	"log"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

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
