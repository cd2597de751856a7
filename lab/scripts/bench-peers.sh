#!/usr/bin/env bash
# The embedded limiter against its peers (lab/peers, a module of its own):
# github.com/sethvargo/go-limiter, a map of golang.org/x/time/rate limiters
# and a mutex map, one check per op on 10,000 ids from 128 and 4,096
# goroutines. All subjects run in one `go test -bench` process, each -count
# times in a row; prints every run's ns/op, then medians and each subject's
# ratio to go-limiter at the same goroutine count, as a Markdown table.
#
# Usage: lab/scripts/bench-peers.sh [COUNT=5] [BENCHTIME=1s]
set -euo pipefail
COUNT=${1:-5}
BENCHTIME=${2:-1s}

me=bench-peers
. "$(dirname "$0")/lib.sh"
echo "rev $(cd "$root" && git rev-parse --short HEAD), GOMAXPROCS $(nproc): go test -run '^\$' -bench BenchmarkPeers -count $COUNT -benchtime $BENCHTIME (in lab/peers)"
(cd "$root/lab/peers" && go test -run '^$' -bench BenchmarkPeers -count "$COUNT" -benchtime "$BENCHTIME" .) | tee "$tmp/out" | grep '^Benchmark'
echo
echo "| goroutines | subject | ns/op (median of $COUNT) | ratio to go-limiter |"
echo "|---|---|---|---|"
peers_runs <"$tmp/out" >"$tmp/runs"
for g in $(awk '{ print $1 }' "$tmp/runs" | sort -un); do
  ref=$(awk -v g="$g" '$1 == g && $2 == "go-limiter" { print $3 }' "$tmp/runs" | median)
  for s in raterlimiter go-limiter x-time-rate-map mutex-map; do
    m=$(awk -v g="$g" -v s="$s" '$1 == g && $2 == s { print $3 }' "$tmp/runs" | median)
    awk -v g="$g" -v s="$s" -v m="$m" -v r="$ref" 'BEGIN { printf "| %d | %s | %.0f | %.2f |\n", g, s, m, m / r }'
  done
done
