#!/usr/bin/env bash
# The sidecar's Envoy RLS beside envoyproxy/ratelimit, on the same
# configuration and the same private Redis, driven by the same gRPC load
# (rlload -rls: one ShouldRateLimit call per check, one descriptor
# {user: user-N} over IDS ids, CALLERS callers sharing CONNS connections,
# each call with a 1 s deadline). Subjects, run in turn in a rotated order
# each round after one unrecorded warm-up run each:
#
#   floor         lab/rlsfloor: grpc-go answering a constant OK, what a
#                 call costs in grpc-go alone (with the sidecar's stream
#                 workers and shared write buffer)
#   peer          envoyproxy/ratelimit on Redis (INCRBY + EXPIRE a call),
#                 on its best settings (PEER_ENV)
#   ours-redis    the sidecar's -rls-listen, -backend redis, same Redis
#   ours-memory   the sidecar's -rls-listen, -backend memory
#   http-redis    the same sidecars' GET /check_rate (rlload over HTTP),
#   http-memory   same limit and window: what an RLS call is held to
#
# Those run the allow-all workload (domain bench: a billion a minute for
# every id). With DENY=1 (the default) peer-deny, ours-redis-deny and
# ours-memory-deny run the 90 %-denied one: domain deny, where the ids
# user-0 to user-999 (a tenth of IDS) have a billion a minute and every
# other one a request a day, spent in the warm-up.
#
# Per run: calls/s, p50 and p99 (ms), the server process's CPU per call
# (utime+stime from /proc/PID/stat over every call of the run), and for the
# Redis subjects Redis's command time per call (INFO commandstats, the usec
# of every command but INFO and CONFIG, after CONFIG RESETSTAT) and Redis's
# main-thread CPU per call (INFO cpu). Then medians and ranges per subject,
# and per-round ratios (ours-redis over the peer, RLS over HTTP) with their
# medians and ranges.
#
# envoyproxy/ratelimit is built from the Go module proxy (PEER_VERSION, its
# module directory copied out of the module cache, go build
# ./src/service_cmd) into CACHE (default ~/.cache/raterlimiter-bench),
# once. With taskset there (PIN=0: not), Redis and the load are pinned to
# the last CPU and every server, all its threads, to the first: a server's
# CPU a call is then measured on a core nobody else uses.
#
# PEER_ENV are the peer's settings, its best for this load by default:
# REDIS_PIPELINE_WINDOW=150us (radix's write flush interval, which its
# settings.go recommends at 150-500us; REDIS_PIPELINE_LIMIT is unused since
# radix v4) and LOCAL_CACHE_SIZE_IN_BYTES=64 MiB (over-limit keys answered
# from memory until their window ends, without Redis: what the denied
# workload needs); statsd off in every case.
#
# Usage: lab/scripts/bench-rls-peer.sh [ROUNDS=5] [SECONDS=5]
# Env: CALLERS=200 CONNS=2 IDS=10000 HTTP=1 (0: no HTTP subjects) DENY=1
# (0: no denied workload) PIN=1 PEER_ENV=...
# Needs redis-server, redis-cli and go.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
CALLERS=${CALLERS:-200}
CONNS=${CONNS:-2}
IDS=${IDS:-10000}
HTTP=${HTTP:-1}
DENY=${DENY:-1}
PEER_ENV=${PEER_ENV:-REDIS_PIPELINE_WINDOW=150us LOCAL_CACHE_SIZE_IN_BYTES=67108864}
PIN=${PIN:-1}
PEER_MODULE=github.com/envoyproxy/ratelimit
PEER_VERSION=${PEER_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/raterlimiter-bench}
me=bench-rls-peer
. "$(dirname "$0")/lib.sh"
need "apt-get install -y redis-server; go from go.dev" redis-server redis-cli go
hz=$(getconf CLK_TCK)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $(redis-server --version | cut -d' ' -f1-3)"

# The peer, built once from its module directory.
peer=$CACHE/ratelimit-$PEER_VERSION
if [ ! -x "$peer" ]; then
  mkdir -p "$CACHE" "$tmp/gomod"
  dir=$(cd "$tmp/gomod" && GOFLAGS= go mod download -json "$PEER_MODULE@$PEER_VERSION" |
    awk -F'"' '$2 == "Dir" { print $4 }')
  [ -d "$dir" ] || { echo "$me: go mod download $PEER_MODULE@$PEER_VERSION gave no directory" >&2; exit 1; }
  cp -r "$dir" "$tmp/peer-src" && chmod -R u+w "$tmp/peer-src"
  echo "$me: building $PEER_MODULE@$PEER_VERSION into $peer" >&2
  (cd "$tmp/peer-src" && GOFLAGS= go build -o "$peer.new" ./src/service_cmd) && mv "$peer.new" "$peer"
fi
(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter && (cd lab && go build -o "$tmp/rlload" ./rlload && go build -o "$tmp/rlsfloor" ./rlsfloor))

# One configuration for all: the peer's runtime layout, which -rls-config
# reads as a directory of YAML files.
mkdir -p "$tmp/rt/ratelimit/config"
cat >"$tmp/rt/ratelimit/config/bench.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
EOF
{
  echo "domain: deny"
  echo "descriptors:"
  echo "  - key: user"
  echo "    rate_limit: {unit: day, requests_per_unit: 1}"
  for i in $(seq 0 $((IDS / 10 - 1))); do
    echo "  - {key: user, value: user-$i, rate_limit: {unit: minute, requests_per_unit: 1000000000}}"
  done
} >"$tmp/rt/ratelimit/config/deny.yaml"

rport=$(freeport)
start_redis "$rport"
redis_pid=$last_pid
last_cpu=$(($(nproc) - 1))
if [ "$PIN" = 1 ] && command -v taskset >/dev/null && [ "$last_cpu" -gt 0 ]; then
  taskset -cp "$last_cpu" "$redis_pid" >/dev/null
  pinned=1
fi

# waitport NAME PORT: waits until something listens on 127.0.0.1:PORT.
waitport() {
  for _ in $(seq 400); do
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return
    sleep 0.05
  done
  echo "$me: $1 does not listen on $2" >&2; cat "$tmp/$1.log" >&2; exit 1
}

# The servers.
floor_grpc=$(freeport)
"$tmp/rlsfloor" "127.0.0.1:$floor_grpc" 2>"$tmp/floor.log" &
floor_pid=$!
pids+=("$floor_pid")
waitport floor "$floor_grpc"

peer_grpc=$(freeport)
# shellcheck disable=SC2086 # PEER_ENV are words
env $PEER_ENV RUNTIME_ROOT=$tmp/rt RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false RUNTIME_IGNOREDOTFILES=true \
  USE_STATSD=false LOG_LEVEL=warn BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$rport \
  HOST=127.0.0.1 PORT=$(freeport) GRPC_HOST=127.0.0.1 GRPC_PORT=$peer_grpc DEBUG_HOST=127.0.0.1 DEBUG_PORT=$(freeport) \
  "$peer" 2>"$tmp/peer.log" >&2 &
peer_pid=$!
pids+=("$peer_pid")
waitport peer "$peer_grpc"

mem_grpc=$(freeport) mem_http=127.0.0.1:$(freeport)
start ours-memory "$tmp/raterlimiter" -listen "$mem_http" -rls-listen "127.0.0.1:$mem_grpc" -rls-config "$tmp/rt/ratelimit/config"
mem_pid=$last_pid
waitport ours-memory "$mem_grpc"
red_grpc=$(freeport) red_http=127.0.0.1:$(freeport)
start ours-redis "$tmp/raterlimiter" -listen "$red_http" -rls-listen "127.0.0.1:$red_grpc" -rls-config "$tmp/rt/ratelimit/config" \
  -backend redis -redis-url "redis://127.0.0.1:$rport/0"
red_pid=$last_pid
waitport ours-redis "$red_grpc"

load=()
if [ "${pinned:-0}" = 1 ]; then
  for pid in "$floor_pid" "$peer_pid" "$mem_pid" "$red_pid"; do taskset -a -cp 0 "$pid" >/dev/null; done
  load=(taskset -c "$last_cpu")
  echo "servers pinned to CPU 0; redis-server and the load to CPU $last_cpu"
fi

subjects=(floor peer ours-redis ours-memory)
[ "$HTTP" = 1 ] && subjects+=(http-redis http-memory)
[ "$DENY" = 1 ] && subjects+=(peer-deny ours-redis-deny ours-memory-deny)

# target SUBJECT: "PID USES_REDIS RLLOAD-ARGS..." of SUBJECT.
target() {
  case $1 in
  floor) echo "$floor_pid 0 -rls 127.0.0.1:$floor_grpc -conns $CONNS" ;;
  peer-deny) echo "$peer_pid 1 -rls 127.0.0.1:$peer_grpc -conns $CONNS -rls-domain deny" ;;
  ours-redis-deny) echo "$red_pid 1 -rls 127.0.0.1:$red_grpc -conns $CONNS -rls-domain deny" ;;
  ours-memory-deny) echo "$mem_pid 0 -rls 127.0.0.1:$mem_grpc -conns $CONNS -rls-domain deny" ;;
  peer) echo "$peer_pid 1 -rls 127.0.0.1:$peer_grpc -conns $CONNS" ;;
  ours-redis) echo "$red_pid 1 -rls 127.0.0.1:$red_grpc -conns $CONNS" ;;
  ours-memory) echo "$mem_pid 0 -rls 127.0.0.1:$mem_grpc -conns $CONNS" ;;
  http-redis) echo "$red_pid 1 -url http://$red_http" ;;
  http-memory) echo "$mem_pid 0 -url http://$mem_http" ;;
  esac
}

# rcmd: Redis's command time (usec, every command but INFO and CONFIG)
# since the last CONFIG RESETSTAT; rcpu: its main-thread CPU so far (µs).
rcmd() {
  redis-cli -p "$rport" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_/ && $1 !~ /^cmdstat_(info|config)/ { s += $5 } END { printf "%.0f", s }'
}
rcpu() {
  redis-cli -p "$rport" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user)_main_thread:/ { s += $2 } END { printf "%.0f", s * 1e6 }'
}
# rcmds N: each command's calls per call of the run (N calls), for the log.
rcmds() {
  redis-cli -p "$rport" info commandstats | tr -d '\r' |
    awk -F'[:=,]' -v n="$1" '/^cmdstat_/ && $1 !~ /^cmdstat_(info|config)/ {
      c = $1; sub(/^cmdstat_/, "", c); printf "%s %.2f/call %.2fµs; ", c, $3 / n, $7 }'
}

# measure SUBJECT SECONDS: "calls/s p50 p99 cpu-µs/call redis-µs/call
# redis-cpu-µs/call" of one rlload run (the Redis figures 0 without Redis).
measure() {
  local pid uses args out total c0 c1 r0 r1 rates cmd
  read -r pid uses args <<<"$(target "$1")"
  redis-cli -p "$rport" config resetstat >/dev/null
  r0=$(rcpu) c0=$(cputicks "$pid")
  # shellcheck disable=SC2086 # args are words
  out=$("${load[@]}" "$tmp/rlload" $args -c "$CALLERS" -ids "$IDS" -d "${2}s" -timeout 1s -progress 2>"$tmp/rlload.err") ||
    { echo "$me: $1: $out" >&2; cat "$tmp/rlload.err" >&2; exit 1; }
  c1=$(cputicks "$pid") r1=$(rcpu) cmd=$(rcmd)
  total=$(grep -o 'whole run: [0-9]*' "$tmp/rlload.err" | awk '{ print $3 }')
  [ "$uses" = 1 ] && echo "$1: $(rcmds "$total")" >>"$tmp/commands"
  set -- $out
  rates="$2 ${4%ms} ${6%ms}"
  awk -v r="$rates" -v t="$total" -v c="$((c1 - c0))" -v hz="$hz" -v u="$uses" -v cmd="$cmd" -v rc="$((r1 - r0))" \
    'BEGIN { printf "%s %.2f %.2f %.2f\n", r, c / hz * 1e6 / t, u ? cmd / t : 0, u ? rc / t : 0 }'
}

for s in "${subjects[@]}"; do measure "$s" 2 >/dev/null; done # warm-up: connections, records
if [ "$DENY" = 1 ]; then # each denied id's one request a day, spent
  for s in peer-deny ours-redis-deny ours-memory-deny; do measure "$s" 4 >/dev/null; done
fi
: >"$tmp/commands"

echo
echo "$ROUNDS rounds of ${SECS}s, $CALLERS callers, $CONNS gRPC connections, $IDS ids"
echo
echo "| round | subject | calls/s | p50 ms | p99 ms | server CPU µs/call | Redis command µs/call | Redis CPU µs/call |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
: >"$tmp/results"
n=${#subjects[@]}
for round in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    s=${subjects[$(((round - 1 + k) % n))]}
    line=$(measure "$s" "$SECS")
    echo "$s $round $line" >>"$tmp/results"
    read -r rate p50 p99 cpu rus rcp <<<"$line"
    echo "| $round | $s | $rate | $p50 | $p99 | $cpu | $rus | $rcp |"
  done
done

# col SUBJECT N: the Nth figure of SUBJECT's runs, one a line, by round.
col() { awk -v s="$1" -v c="$2" '$1 == s { print $(c + 2) }' "$tmp/results"; }
range() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s–%s", lo, hi }'; }
stat() { local v; v=$(cat); printf "%s (%s)" "$(median <<<"$v")" "$(range <<<"$v")"; }

echo
echo "Medians (ranges) over $ROUNDS rounds:"
echo
echo "| subject | calls/s | p50 ms | p99 ms | server CPU µs/call | Redis command µs/call | Redis CPU µs/call |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in "${subjects[@]}"; do
  echo "| $s | $(col "$s" 1 | stat) | $(col "$s" 2 | stat) | $(col "$s" 3 | stat) | $(col "$s" 4 | stat) | $(col "$s" 5 | stat) | $(col "$s" 6 | stat) |"
done

# ratio A B N INVERT: per round, A's Nth figure over B's (B's over A's with
# INVERT), one a line.
ratio() {
  paste <(col "$1" "$3") <(col "$2" "$3") |
    awk -v inv="${4:-0}" '{ if ($1 == 0 || $2 == 0) print "nan"; else printf "%.2f\n", inv ? $2 / $1 : $1 / $2 }'
}
echo
echo "Ratios in the same round, medians (ranges):"
echo
echo "- ours-redis over the peer: calls/s $(ratio ours-redis peer 1 | stat)," \
  "calls per CPU-second $(ratio ours-redis peer 4 1 | stat), p99 $(ratio ours-redis peer 3 | stat)," \
  "Redis command time per call $(ratio ours-redis peer 5 | stat), Redis CPU per call $(ratio ours-redis peer 6 | stat)"
if [ "$DENY" = 1 ]; then
  echo "- 90 % denied, ours-redis over the peer: calls/s $(ratio ours-redis-deny peer-deny 1 | stat)," \
    "calls per CPU-second $(ratio ours-redis-deny peer-deny 4 1 | stat), p99 $(ratio ours-redis-deny peer-deny 3 | stat)," \
    "Redis command time per call $(ratio ours-redis-deny peer-deny 5 | stat), Redis CPU per call $(ratio ours-redis-deny peer-deny 6 | stat)"
fi
echo "- server CPU per call over the grpc floor's: ours-memory $(ratio ours-memory floor 4 | stat)," \
  "ours-redis $(ratio ours-redis floor 4 | stat), peer $(ratio peer floor 4 | stat)"
echo "- ours-memory over the peer: calls/s $(ratio ours-memory peer 1 | stat)," \
  "calls per CPU-second $(ratio ours-memory peer 4 1 | stat), p99 $(ratio ours-memory peer 3 | stat)"
if [ "$HTTP" = 1 ]; then
  echo "- RLS over HTTP /check_rate, server CPU per call: Redis $(ratio ours-redis http-redis 4 | stat)," \
    "memory $(ratio ours-memory http-memory 4 | stat); calls/s: Redis $(ratio ours-redis http-redis 1 | stat)," \
    "memory $(ratio ours-memory http-memory 1 | stat)"
fi
echo
echo "Redis commands per call (last run of each subject):"
tac "$tmp/commands" | awk '!seen[$1]++' | sed 's/^/- /'
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
