package main

import (
	"flag"
	"time"

	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"github.com/raterlimiter/raterlimiter/internal/defaults"

	"github.com/raterlimiter/raterlimiter/internal/cli"
)

// waitFlags bound how long the sidecar holds an answer for its turn (a
// leaky check with wait=1, or by a policy with wait: true).
type waitFlags struct {
	maxWait          time.Duration
	maxHeld          int
	maxHeldPerClient int
}

func (w *waitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&w.maxWait, "max-wait", defaults.MaxWait, "longest an answer is held for its turn (wait=1, a policy's wait: true; algo leaky); a longer delay is a 429 at once that takes no place in the queue")
	fs.IntVar(&w.maxHeld, "max-held", defaults.MaxHeld, "most answers held for their turn at once; at most half of -max-conns-per-ip and -max-conns-per-proxy (each keeps one of the proxy's connections); a check that would wait past it is denied at once, taking no place in the queue")
	fs.IntVar(&w.maxHeldPerClient, "max-held-per-client", defaults.MaxHeldPerClient, "the same bound for one client address, as a policy's ip key reads it (behind a trusted proxy, the address the proxy forwards)")
}

func (w *waitFlags) validate() error {
	if w.maxWait < time.Millisecond || w.maxWait > bounds.MaxScale {
		return cli.Usagef("-max-wait must be from 1ms to ten years, not %v", w.maxWait)
	}
	if w.maxHeld < 1 || w.maxHeldPerClient < 1 {
		return cli.Usagef("-max-held and -max-held-per-client must be positive")
	}
	return nil
}
