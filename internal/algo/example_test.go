package algo_test

import (
	"fmt"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// The previous window of 1000 ms allowed 10 hits; a quarter into the current
// one, which has 2, they weigh 7.5: 7.5 + 2 + 1 > 10, and the hit passes once
// they weigh 7, 50 ms later.
func ExampleSliding() {
	const start = 1_700_000_040_000
	prev := algo.Record{Count: 10, Created: start - 1000, Modified: start - 1}
	cur := algo.Record{Count: 2, Created: start, Modified: start}
	r := millis.Request{ID: "u", Scale: 1000, Limit: 10, Hits: 1, Algo: rl.Sliding}
	d, _, write := algo.Sliding(cur, true, prev, true, start+250, r)
	fmt.Println(d.Allowed, d.Count, d.Remaining, d.ResetMS, d.RetryAfterMS, write)
	d, next, write := algo.Sliding(cur, true, prev, true, start+300, r)
	fmt.Println(d.Allowed, d.Count, d.Remaining, d.ResetMS, d.RetryAfterMS, write, next.Count)
	// Output:
	// false 10 0 750 50 false
	// true 10 0 700 0 true 3
}

// Three hits per second is one every 333.33... ms, kept exactly: after a
// burst of three, the fourth waits 334 ms and moves the TAT 333.33 ms on.
func ExampleToken() {
	const now = 1_700_000_040_000
	r := millis.Request{ID: "u", Scale: 1000, Limit: 3, Hits: 3, Algo: rl.Token}
	d, st, _ := algo.Token(algo.Record{}, false, now, r)
	fmt.Println(d.Allowed, d.Count, d.ResetMS)
	r.Hits = 1
	d, _, _ = algo.Token(st, true, now, r)
	fmt.Println(d.Allowed, d.Count, d.ResetMS, d.RetryAfterMS)
	d, st, _ = algo.Token(st, true, now+334, r)
	fmt.Println(d.Allowed, d.Count, d.ResetMS, algo.View(rl.Token, 1000, st).Count-now)
	// Output:
	// true 3 1000
	// false 3 1000 334
	// true 3 1000 1334
}
