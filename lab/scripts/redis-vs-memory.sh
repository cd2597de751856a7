#!/usr/bin/env bash
# One check per HTTP request on the Redis backend against the memory backend,
# both sidecars on their default flags, the same wrk load (GET /check_rate
# over 10,000 ids, 128 connections), alternated ROUNDS times: requests per
# second, p99 latency, and the ratios Redis / memory.
#
# Usage: lab/scripts/redis-vs-memory.sh [ROUNDS=3] [SECONDS=5]
# Needs redis-server, redis-cli, wrk and go.
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-5}
me=redis-vs-memory
. "$(dirname "$0")/lib.sh"
need "apt-get install -y redis-server wrk" redis-server redis-cli wrk go

port=$(freeport)
start_redis "$port"
(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter)
start memory "$tmp/raterlimiter" -listen 127.0.0.1:0
mem=$addr
start redis "$tmp/raterlimiter" -listen 127.0.0.1:0 -backend redis -redis-url "redis://127.0.0.1:$port/0"
red=$addr

# run ADDR: "req/s p99_ms" of one wrk run.
run() {
  wrk -t2 -c128 -d"${SECS}s" --latency -s "$root/lab/scripts/sidecar-ids.lua" "http://$1" -- "scale=60000&limit=1000000000" |
    awk '/^Requests\/sec:/ { rps = $2 }
         $1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }; p99 = v }
         END { print rps, p99 }'
}
echo "| round | memory req/s | memory p99 ms | redis req/s | redis p99 ms | req/s ratio | p99 ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$ROUNDS"); do
  read -r mr mp <<<"$(run "$mem")"
  read -r rr rp <<<"$(run "$red")"
  rr_ratio=$(awk -v a="$rr" -v b="$mr" 'BEGIN { printf "%.3f", a / b }')
  p_ratio=$(awk -v a="$rp" -v b="$mp" 'BEGIN { printf "%.2f", a / b }')
  echo "$rr_ratio $p_ratio $mr $rr $mp $rp" >>"$tmp/results"
  echo "| $round | $mr | $mp | $rr | $rp | $rr_ratio | $p_ratio |"
done
echo
echo "medians: req/s ratio $(cut -d' ' -f1 "$tmp/results" | median), p99 ratio $(cut -d' ' -f2 "$tmp/results" | median)," \
  "memory $(cut -d' ' -f3 "$tmp/results" | median) req/s p99 $(cut -d' ' -f5 "$tmp/results" | median) ms," \
  "redis $(cut -d' ' -f4 "$tmp/results" | median) req/s p99 $(cut -d' ' -f6 "$tmp/results" | median) ms"
