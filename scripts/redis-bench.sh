#!/usr/bin/env bash
# Redis backend benchmark, every figure beside its baseline in the same run,
# on one private redis-server (loopback, a free port, no persistence):
#
#   ceiling   redis-benchmark running EVALSHA of the backend's own check script
#             (redisbackend/check.lua, same keys and arguments as a fixed-window
#             check), unpipelined (-P 1) and pipelined (-P 16), 50 connections
#   backend   go test -bench: redisbackend.CheckRate from 16 goroutines per CPU,
#             CheckRates with batches of 100, and the two Go clients (rueidis,
#             go-redis) sending the same EVALSHA
#   sidecar   the raterlimiter binary on that Redis: wrk GET /check_rate over
#             10,000 ids, and the Go client's batch call (POST /check_rates, 100
#             per batch)
#
# The machine is shared: every subject is measured between two runs of the
# pipelined ceiling and divided by their mean. Prints every measurement, then
# the medians of the figures and of the ratios, as Markdown tables.
#
# Usage: scripts/redis-bench.sh [ROUNDS=3] [SECONDS=5]
# Needs redis-server, redis-benchmark, redis-cli, wrk and go.
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-5}
me=redis-bench
. "$(dirname "$0")/lib.sh"
need "apt-get install -y redis-server wrk" redis-server redis-cli redis-benchmark wrk go

port=$(freeport)
start_redis "$port"
url="redis://127.0.0.1:$port/0"
sha=$(redis-cli -p "$port" -x script load <"$root/redisbackend/check.lua")

(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter && go test -c -o "$tmp/redisbackend.test" ./redisbackend)
# The sidecar on its defaults (-timeout 1s, no -redis-timeout ceiling).
start sidecar "$tmp/raterlimiter" -listen 127.0.0.1:0 -backend redis -redis-url "$url"
sidecar=$addr

# rb P: redis-benchmark's EVALSHA requests per second with pipeline P.
rb() {
  redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n $((SECS * 60000)) -r 10000 -P "$1" -q \
    EVALSHA "$sha" 2 'rb:{__rand_int__}:f:60000' 'rb:{__rand_int__}:i' f 60000 1000000000 1 '' f:60000 0 |
    tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($(i+1) == "requests") { print $i; exit } }'
}
# gob NAME: the checks/s of go benchmark NAME.
gob() {
  REDISBACKEND_BENCH_URL=$url REDISBACKEND_BENCH_SIDECAR=$sidecar \
    "$tmp/redisbackend.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "${SECS}s" 2>/dev/null |
    awk '{ for (i = 1; i <= NF; i++) if ($(i) == "checks/s") print $(i-1) }' | head -1
}
wrkrps() {
  wrk -t1 -c64 -d"${SECS}s" -s "$root/scripts/sidecar-ids.lua" "http://$sidecar" -- "scale=60000&limit=1000000000" |
    awk '/^Requests\/sec:/ { print $2 }'
}

# The machine is shared and noisy: each subject is measured between two runs
# of the pipelined ceiling, and compared with their mean.
subjects=(ceiling-P1 backend-CheckRates100 backend-CheckRate client-rueidis client-go-redis sidecar-wrk sidecar-client-batch)
measure() {
  case $1 in
    ceiling-P1) rb 1 ;;
    backend-*) gob "BenchmarkBackend/${1#backend-}" ;;
    client-*) gob "BenchmarkClient/${1#client-}" ;;
    sidecar-wrk) wrkrps ;;
    sidecar-client-batch) gob BenchmarkSidecarBatch ;;
  esac
}
echo "| round | subject | ceiling before | subject checks/s | ceiling after | subject / mean ceiling |"
echo "|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for subj in "${subjects[@]}"; do
    before=$(rb 16)
    val=$(measure "$subj")
    after=$(rb 16)
    ratio=$(awk -v v="$val" -v a="$before" -v b="$after" 'BEGIN { printf "%.3f", 2 * v / (a + b) }')
    echo "$subj $val $ratio $before $after" >>"$tmp/results"
    echo "| $round | $subj | $before | $val | $after | $ratio |"
  done
done

echo
echo "| measurement | median checks/s | median ratio to the pipelined EVALSHA ceiling |"
echo "|---|---|---|"
echo "| ceiling-P16 (redis-benchmark -P 16) | $(awk '{ print $4; print $5 }' "$tmp/results" | median) | 1 |"
for n in "${subjects[@]}"; do
  med=$(awk -v n="$n" '$1 == n { print $2 }' "$tmp/results" | median)
  rat=$(awk -v n="$n" '$1 == n { print $3 }' "$tmp/results" | median)
  echo "| $n | $med | $rat |"
done
