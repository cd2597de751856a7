#!/usr/bin/env bash
# Throughput benchmark: checks/s from the load tool (lab/rlload), alternated
# round by round in one run:
#
#   embedded  the embedded limiter in rlload's own process (no HTTP): the
#             baseline, what the core answers without a network;
#   single    rlload -> the sidecar binary over loopback, one GET per check;
#   batched   the same sidecar, through the client's batching mode (one
#             POST /check_rates per batch).
#
# The sidecar and rlload share the machine's cores. Beside checks/s each
# round gives the CPU time per check of rlload (its own getrusage over the
# measured time) and of the sidecar (/proc/PID/stat around the whole rlload
# run, divided by every check rlload made), which the machine's other load
# disturbs less than wall-clock rates. Prints every round, then medians and
# ratios, as Markdown tables.
#
# Usage: lab/scripts/bench-throughput.sh [ROUNDS=3] [DURATION=5s]
# Environment: SINGLE_ARGS, BATCH_ARGS, EMBEDDED_ARGS override each subject's
# rlload flags (defaults below). COMPARE_REV=REV adds a fourth subject,
# "batched@REV": rlload (and so the client) built from git revision REV,
# with BATCH_ARGS, against the same sidecar: a before/after of the client.
# SIDECAR_GOMAXPROCS=N runs the sidecar with GOMAXPROCS=N (default: the
# runtime's, one per CPU).
set -euo pipefail
ROUNDS=${1:-3}
DURATION=${2:-5s}
EMBEDDED_ARGS=${EMBEDDED_ARGS:--embedded -c 256}
SINGLE_ARGS=${SINGLE_ARGS:--c 256}
BATCH_ARGS=${BATCH_ARGS:--batch -c 1024}
COMPARE_REV=${COMPARE_REV:-}

me=bench-throughput
. "$(dirname "$0")/lib.sh"
(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter && (cd lab && go build -o "$tmp/rlload" ./rlload))
subjects="embedded single batched"
if [ -n "$COMPARE_REV" ]; then
  extract "$COMPARE_REV" "$tmp/rev"
  if [ -d "$tmp/rev/lab/rlload" ]; then (cd "$tmp/rev/lab" && go build -o "$tmp/rlload-rev" ./rlload)
  else (cd "$tmp/rev" && go build -o "$tmp/rlload-rev" ./cmd/rlload); fi
  subjects="$subjects batched@$COMPARE_REV"
fi

if [ -n "${SIDECAR_GOMAXPROCS:-}" ]; then
  start sidecar env GOMAXPROCS="$SIDECAR_GOMAXPROCS" "$tmp/raterlimiter" -listen 127.0.0.1:0
else
  start sidecar "$tmp/raterlimiter" -listen 127.0.0.1:0
fi
sidecar_pid=$last_pid
url="http://$addr"

hz=$(getconf CLK_TCK)

# run NAME ARGS...: one rlload run; prints a table row and appends
# "name rate p50 p99 errors loadcpu sidecarcpu" to results.
run() {
  local name=$1; shift
  local t0 t1 out err bin=$tmp/rlload
  [ "$name" = "batched@$COMPARE_REV" ] && bin=$tmp/rlload-rev
  t0=$(cputicks "$sidecar_pid")
  # shellcheck disable=SC2068
  out=$("$bin" -url "$url" -d "$DURATION" -warmup 1s -timeout 10s -progress $@ 2>"$tmp/rlload.err")
  t1=$(cputicks "$sidecar_pid")
  err=$(cat "$tmp/rlload.err")
  local rate p50 p99 errors total loadcpu sidecarcpu
  rate=$(awk '{ print $2 }' <<<"$out")
  p50=$(awk '{ print $4 }' <<<"$out" | tr -d ms)
  p99=$(awk '{ print $6 }' <<<"$out" | tr -d ms)
  errors=$(awk '{ print $8 }' <<<"$out")
  total=$(grep -o 'whole run: [0-9]*' <<<"$err" | awk '{ print $3 }')
  loadcpu=$(grep -o 'CPU: [0-9.]* µs/check' <<<"$err" | awk '{ print $2 }')
  if [ "$name" = embedded ]; then
    sidecarcpu=0
  else
    sidecarcpu=$(awk -v d=$((t1 - t0)) -v n="$total" -v hz="$hz" 'BEGIN { printf "%.3f", d * 1e6 / hz / n }')
  fi
  echo "$name $rate $p50 $p99 $errors $loadcpu $sidecarcpu" >>"$tmp/results"
  printf '| %d | %s | %s | %s | %s | %s | %s | %s |\n' "$round" "$name" "$rate" "$p50" "$p99" "$loadcpu" "$sidecarcpu" "$errors"
}

echo "rlload -d $DURATION -warmup 1s -timeout 10s; embedded: $EMBEDDED_ARGS; single: $SINGLE_ARGS; batched: $BATCH_ARGS; sidecar GOMAXPROCS ${SIDECAR_GOMAXPROCS:-default}; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | subject | checks/s | p50 ms | p99 ms | rlload CPU µs/check | sidecar CPU µs/check | errors |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  # shellcheck disable=SC2086
  run embedded $EMBEDDED_ARGS
  # shellcheck disable=SC2086
  run single $SINGLE_ARGS
  # shellcheck disable=SC2086
  run batched $BATCH_ARGS
  if [ -n "$COMPARE_REV" ]; then
    # shellcheck disable=SC2086
    run "batched@$COMPARE_REV" $BATCH_ARGS
  fi
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

col() { median_of "$tmp/results" "$1" "$2"; }
echo
echo "| subject | median checks/s | median p50 ms | median p99 ms | median rlload CPU µs/check | median sidecar CPU µs/check | median total CPU µs/check |"
echo "|---|---|---|---|---|---|---|"
for s in $subjects; do
  tot=$(awk -v s="$s" '$1 == s { printf "%.3f\n", $6 + $7 }' "$tmp/results" | median)
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$(col $s 2)" "$(col $s 3)" "$(col $s 4)" "$(col $s 6)" "$(col $s 7)" "$tot"
done
echo
single=$(col single 2)
for s in embedded batched; do
  awk -v a="$(col $s 2)" -v b="$single" -v s="$s" 'BEGIN { printf "ratio %s / single: %.2fx the checks/s\n", s, a / b }'
done
awk -v a="$(col batched 2)" -v b="$(col embedded 2)" 'BEGIN { printf "ratio batched / embedded: %.2f of the checks/s\n", a / b }'
if [ -n "$COMPARE_REV" ]; then
  r="batched@$COMPARE_REV"
  awk -v a="$(col batched 2)" -v b="$(col "$r" 2)" -v ca="$(col batched 6)" -v cb="$(col "$r" 6)" -v r="$r" \
    'BEGIN { printf "ratio batched / %s: %.2fx the checks/s, %.2fx the rlload CPU per check\n", r, a / b, ca / cb }'
fi
