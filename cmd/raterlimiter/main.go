// Command raterlimiter is the rate-limiter sidecar: it serves check_rate over
// HTTP (package api) next to an application, from an in-memory backend or
// from Redis. Run it with -h for its flags; each flag can also be set through
// the environment as RATERLIMITER_<FLAG>.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "raterlimiter:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
