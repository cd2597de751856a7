#!/usr/bin/env bash
# Redis backend benchmark: every figure beside its baseline, measured in the
# same run, on one private redis-server (loopback, a free port, no
# persistence) pinned to its own core (the last one) while the load runs on
# the others.
#
#   cost      what one check costs Redis, per algorithm (slices at 60 slices,
#             leaky with a queue), with and without -redis-deadlines, and
#             cold (every check a new id's first), beside one INCRBY and an
#             EVALSHA of an empty script:
#             BenchmarkRedisCost (redisbackend), ROUNDS rounds, each subject
#             in turn after CONFIG RESETSTAT, 100,000 checks in batches of
#             100 over 10,000 ids: Redis µs per check (INFO commandstats:
#             the usec of the commands the subject sends; a script's include
#             the commands it calls) and the CPU of Redis's main thread per
#             check (INFO cpu), each over INCRBY's in the same round; medians
#   batches   the sidecar on -backend redis, default flags, answering the Go
#             client's batches (POST /check_rates, 100 fixed-window checks
#             each), against INCRBY+PEXPIRE per check pipelined through
#             rueidis in batches of 100 checks on the same Redis; alternated
#             ROUNDS times, checks/s and the ratio, with the CPU per check
#             of Redis and of the sidecar
#   capped    the same pair with Redis the bottleneck, as it is for a Redis
#             that many sidecars share: Redis's CPU capped at REDIS_SHARE
#             percent of its core (default 25) by a cgroup's CPU quota (1 ms
#             in 4 ms), so that its cost per check, not the load's 2 cores,
#             bounds both; skipped with a message where no cgroup CPU
#             controller is writable
#
# Usage: [REDIS_SHARE=25] lab/scripts/redis-bench.sh [ROUNDS=5] [SECONDS=3]
# Needs redis-server, redis-cli, taskset and go.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-3}
me=redis-bench
. "$(dirname "$0")/lib.sh"
need "apt-get install -y redis-server util-linux" redis-server redis-cli taskset go

hz=$(getconf CLK_TCK)
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ]; then
  redis_cpu=$((ncpu - 1))
  load_cpus="0-$((ncpu - 2))"
else
  redis_cpu=0
  load_cpus=0
fi
port=$(freeport)
start_redis "$port"
redis_pid=$last_pid
taskset -pc "$redis_cpu" "$redis_pid" >/dev/null
url="redis://127.0.0.1:$port/0"

(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter && go test -c -o "$tmp/redisbackend.test" ./redisbackend)
start sidecar taskset -c "$load_cpus" "$tmp/raterlimiter" -listen 127.0.0.1:0 -backend redis -redis-url "$url"
sidecar=$addr
sidecar_pid=$last_pid

echo "## What a check costs Redis ($ROUNDS rounds; Redis on CPU $redis_cpu of $ncpu)"
echo
REDISBACKEND_BENCH_URL=$url taskset -c "$load_cpus" "$tmp/redisbackend.test" -test.run '^$' \
  -test.bench '^BenchmarkRedisCost$' -test.benchtime "${ROUNDS}x" >"$tmp/cost.out" 2>&1 ||
  { cat "$tmp/cost.out" >&2; exit 1; }
echo "| subject | Redis µs per check | × INCRBY | Redis CPU per check × INCRBY's | cold CPU × warm's |"
echo "|---|---:|---:|---:|---:|"
awk '/^BenchmarkRedisCost/ {
  for (i = 5; i < NF; i += 2) { v = $i; u = $(i + 1)
    if (u ~ /-µs\/check$/) { n = u; sub(/-µs\/check$/, "", n); us[n] = v; order[++k] = n }
    else if (u ~ /-cpu-x-warm$/) { n = u; sub(/-cpu-x-warm$/, "", n); warm[n] = sprintf("%.2f", v) }
    else if (u ~ /-cpu-x-incrby$/) { n = u; sub(/-cpu-x-incrby$/, "", n); cpu[n] = v }
    else if (u ~ /-x-incrby$/) { n = u; sub(/-x-incrby$/, "", n); x[n] = v } }
  }
  END { k = split("incrby incrby+pexpire evalsha-empty fixed fixed-cold sliding sliding-cold token token-cold log log-cold slices slices-cold leaky leaky-cold fixed-deadlines sliding-deadlines token-deadlines log-deadlines slices-deadlines leaky-deadlines", want, " ")
    for (j = 1; j <= k; j++) { n = want[j]; if (n in us) printf "| %s | %.2f | %.2f | %.2f | %s |\n", n, us[n], x[n], cpu[n], warm[n] } }' "$tmp/cost.out"

# rcpu: the CPU Redis's main thread has used so far, in µs (INFO cpu).
rcpu() {
  redis-cli -p "$port" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user)_main_thread:/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
# incrs: INCRBY calls since the last CONFIG RESETSTAT: one per check.
incrs() {
  redis-cli -p "$port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '$1 == "cmdstat_incrby" { print $3; exit }' | grep . || echo 0
}
# gob NAME: the checks/s of go benchmark NAME, then Redis's and the
# sidecar's CPU per check meanwhile, in µs (the checks counted by Redis).
gob() {
  local r0 s0 r1 s1 n rate
  redis-cli -p "$port" config resetstat >/dev/null
  r0=$(rcpu); s0=$(cputicks "$sidecar_pid")
  REDISBACKEND_BENCH_URL=$url REDISBACKEND_BENCH_SIDECAR=$sidecar taskset -c "$load_cpus" \
    "$tmp/redisbackend.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "${SECS}s" 2>/dev/null >"$tmp/gob.out"
  r1=$(rcpu); s1=$(cputicks "$sidecar_pid"); n=$(incrs)
  rate=$(awk '{ for (i = 1; i <= NF; i++) if ($(i) == "checks/s") { print $(i-1); exit } }' "$tmp/gob.out")
  awk -v rate="$rate" -v n="$n" -v r="$((r1 - r0))" -v s="$((s1 - s0))" -v hz="$hz" \
    'BEGIN { printf "%s %.2f %.2f\n", rate, r / n, s / hz * 1e6 / n }'
}
# batches TITLE: ROUNDS alternated rounds of the two subjects, a table row
# each and the medians.
batches() {
  echo
  echo "## $1 ($ROUNDS rounds of ${SECS}s)"
  echo
  echo "| round | INCRBY+PEXPIRE checks/s | sidecar batches checks/s | ratio | Redis CPU µs/check: pipeline | sidecar's | ratio | sidecar CPU µs/check |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  : >"$tmp/batches"
  for round in $(seq "$ROUNDS"); do
    read -r base bcpu _ <<<"$(gob BenchmarkPipelinedCounter)"
    read -r side scpu sidecpu <<<"$(gob BenchmarkSidecarBatch)"
    ratio=$(awk -v a="$side" -v b="$base" 'BEGIN { printf "%.3f", a / b }')
    cratio=$(awk -v a="$bcpu" -v b="$scpu" 'BEGIN { printf "%.3f", a / b }')
    echo "$ratio $base $side $bcpu $scpu $cratio $sidecpu" >>"$tmp/batches"
    echo "| $round | $base | $side | $ratio | $bcpu | $scpu | $cratio | $sidecpu |"
  done
  med() { awk -v c="$1" '{ print $c }' "$tmp/batches" | median; }
  echo "| median | $(med 2) | $(med 3) | $(med 1) | $(med 4) | $(med 5) | $(med 6) | $(med 7) |"
}
batches "HTTP batches against pipelined INCRBY+PEXPIRE"
echo
echo "The first ratio is throughput; the second, Redis's CPU per check of the"
echo "pipeline over the sidecar's, is the throughput ratio once Redis is the"
echo "bottleneck (the sidecar with cores to spare), as the capped run shows."

# cap_redis PERCENT: puts Redis in a cgroup of its own whose CPU quota is
# PERCENT of one core (cgroup v1's cpu controller, or v2's cpu.max); sets
# $cg, or fails.
share=${REDIS_SHARE:-25}
cg=
cap_redis() {
  local quota=$(($1 * 40)) # µs in a period of 4,000
  if [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
    cg=/sys/fs/cgroup/cpu/redis-bench-$$
    mkdir "$cg" && echo 4000 >"$cg/cpu.cfs_period_us" && echo "$quota" >"$cg/cpu.cfs_quota_us" || return 1
  elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cg=/sys/fs/cgroup/redis-bench-$$
    echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    mkdir "$cg" && echo "$quota 4000" >"$cg/cpu.max" || return 1
  else
    return 1
  fi
  echo "$redis_pid" >"$cg/cgroup.procs"
}
uncap_redis() {
  [ -n "$cg" ] || return 0
  echo "$redis_pid" >"$(dirname "$cg")/cgroup.procs" 2>/dev/null || true
  rmdir "$cg" 2>/dev/null || true
}
if cap_redis "$share" 2>/dev/null; then
  trap 'uncap_redis; cleanup' EXIT
  batches "The same, Redis the bottleneck: its CPU capped at $share % of CPU $redis_cpu"
  uncap_redis
  echo
  echo "With Redis the bottleneck the throughput ratio is what a Redis core"
  echo "shared by many sidecars decides of the sidecar's batches against the"
  echo "pipeline's counters."
else
  uncap_redis
  echo
  echo "(capped run skipped: no writable cgroup CPU controller here)"
fi
