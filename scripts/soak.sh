#!/usr/bin/env bash
# Soak (RELIABILITY.md): builds the sidecar into a temporary directory, starts it on
# a loopback port the OS picks (-sweep-interval 2s, -timeout 5s) and runs
# mixed load against it for RATERLIMITER_SOAK_DURATION (default 10m): 4
# workers at up to 400 requests/s each of GET, form and JSON /check_rate and
# batches of 1-100 on /check_rates (every algorithm, scales from 250 ms to
# 60 s, peeks and multi-hit checks), GET and DELETE /buckets, /healthz and
# invalid checks, over ids that keep churning so sweeps keep deleting. Every
# RATERLIMITER_SOAK_SAMPLE (default 5s) it samples the heap and goroutines
# (/metrics), RSS (/proc/PID/status) and open file descriptors (/proc/PID/fd).
#
# Asserted (see TestSoak in cmd/raterlimiter/soak_test.go): no request gets
# an answer the contract does not allow; sweeps deleted records; the last
# third's maximum is at most 1.5x the first third's (heap) or at most 10 more
# (goroutines, descriptors); the sidecar exits 0 on SIGTERM. Prints every
# sample, sparklines and the verdict.
#
# Usage: scripts/soak.sh [DURATION]   e.g. scripts/soak.sh 30m
# Environment: RATERLIMITER_SOAK_SEED repeats a run's random choices.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export RATERLIMITER_SOAK=1
export RATERLIMITER_SOAK_DURATION=${1:-${RATERLIMITER_SOAK_DURATION:-10m}}
exec go test -count=1 -run '^TestSoak$' -v -timeout 0 ./cmd/raterlimiter
