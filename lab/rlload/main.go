// Command rlload is the load tool of raterlimiter: it drives a sidecar (over
// HTTP, through package client, one request per check or in the client's
// batching mode), an Envoy RLS server over gRPC (-rls: the sidecar's
// -rls-listen or envoyproxy/ratelimit, one ShouldRateLimit call per check)
// or the embedded limiter (package memory, in this process) with N concurrent callers over M ids for a while, shows progress on
// stderr, and ends with one summary line on stdout:
//
//	checks/s: 1012345  p50: 0.412ms  p99: 2.301ms  errors: 0
//
// Latency is per check: the time a caller waits for its decision (in the
// batching mode, for its batch to travel and come back). A denied check is
// not an error; an error is a check that got no decision. When more than
// -max-errors percent of the checks (default 1) got an error, the summary
// line ends with FAILED and rlload exits 1: its figures measure nothing.
//
// Usage:
//
//	rlload [flags]                 # against http://127.0.0.1:8080
//	rlload -batch -c 2048 -d 10s   # the batching client
//	rlload -embedded               # the embedded limiter, no HTTP
//	rlload -rls 127.0.0.1:8081     # an Envoy RLS server (domain bench, key user)
//
// Run rlload -h for every flag.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode("rlload", err, os.Stderr))
}
