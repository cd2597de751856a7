package raterlimiter

import "time"

// Clock returns the time in Unix milliseconds. Every backend and tool that
// reads time takes one in its config (memory, redisbackend, client,
// snapshot), so a test can set the time and get the same decisions on every
// run (limitertest.Clock); nil means the system's clock.
type Clock func() int64

// SystemClock reads the system's wall clock in Unix milliseconds.
func SystemClock() int64 { return time.Now().UnixMilli() }
