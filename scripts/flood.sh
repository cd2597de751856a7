#!/usr/bin/env bash
# Flood test (RELIABILITY.md): builds the sidecar into a temporary directory, starts
# it with -max-buckets 200000 on a loopback port the OS picks, and sends it
# 10,000,000 distinct ids in batches of 1000 (POST /check_rates) from a
# separate process over 4 connections, as fast as it takes them, while a
# steady client checks its own id 200 times a second. The flood runs in
# 5-second windows alternating with 5-second pauses (the generator stopped
# with SIGSTOP), so the steady client's latency with and without the flood is
# measured under the same conditions of a shared machine.
#
# Asserted (see TestFlood in cmd/raterlimiter/flood_e2e_test.go): live
# buckets never pass the cap and do reach it; the heap stays under
# 32 MiB + 256 B per capped bucket and does not grow during the flood; every
# steady check is answered 200; the steady client's p99 during the flood is
# within 2x of its p99 without. Prints every sample and the percentiles.
#
# Usage: scripts/flood.sh
# Environment (defaults): RATERLIMITER_FLOOD_IDS (10000000),
# RATERLIMITER_FLOOD_CONNS (4), RATERLIMITER_FLOOD_MAX_BUCKETS (200000),
# RATERLIMITER_FLOOD_WINDOW (5s), RATERLIMITER_FLOOD_STEADY_RATE (200),
# RATERLIMITER_FLOOD_ARGS (more sidecar flags, e.g. "-shards 2"),
# RATERLIMITER_FLOOD_BATCH (1000: ids per batch), RATERLIMITER_FLOOD_GEN_NICE
# (0: the generator's nice value).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
RATERLIMITER_FLOOD=1 exec go test -count=1 -run '^TestFlood$' -v -timeout 30m ./cmd/raterlimiter
