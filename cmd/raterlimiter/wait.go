package main

import (
	"flag"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/cli"
)

// waitFlags bound how long the sidecar holds an answer for its turn (a
// leaky check with wait=1, or by a policy with wait: true).
type waitFlags struct {
	maxWait time.Duration
}

func (w *waitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&w.maxWait, "max-wait", api.DefaultMaxWait, "longest an answer is held for its turn (wait=1, a policy's wait: true; algo leaky); a longer delay is a 429 at once that takes no place in the queue")
}

func (w *waitFlags) validate() error {
	if w.maxWait < time.Millisecond || w.maxWait > time.Duration(rl.MaxDelayMS)*time.Millisecond {
		return cli.Usagef("-max-wait must be from 1ms to ten years, not %v", w.maxWait)
	}
	return nil
}
