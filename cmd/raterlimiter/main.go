// Command raterlimiter is the rate-limiter sidecar: it serves check_rate over
// HTTP (package api) next to an application, from an in-memory backend or
// from Redis. Run it with -h for its flags; each flag can also be set through
// the environment as RATERLIMITER_<FLAG>.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := runLogged(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, installGlobalLogger)
	stop()
	os.Exit(cli.ExitCode("raterlimiter", err, os.Stderr))
}
