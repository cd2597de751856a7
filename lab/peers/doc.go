// Package peers benchmarks the embedded limiter against the limiters a Go
// user would pick instead: github.com/sethvargo/go-limiter's memory store, a
// map of golang.org/x/time/rate limiters and a plain mutex-guarded map of
// counters. It is a module of its own so that the main module never depends
// on its peers; run it with lab/scripts/bench-peers.sh.
package peers
