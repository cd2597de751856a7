#!/usr/bin/env bash
# Sidecar benchmark: GET /check_rate req/s under wrk on loopback over 10,000
# distinct ids, alternated in one run with lab/barecheck (a bare fasthttp
# handler that only parses the same query and answers a short body), with
# lab/barecheck -same ("bare-same": the same parse answering the
# sidecar's bytes for an allowed check, headers and JSON body, without a
# limiter: issue 36's baseline) and with lab/barecheck -api (the
# sidecar's API on a limiter that answers at once: the API's own cost
# without the actors). Prints every round, then the medians and the ratios
# to bare and to bare-same, as Markdown tables.
#
# Usage: lab/scripts/bench-sidecar.sh [ROUNDS=3] [DURATION=10s] [CONNS=50] [THREADS=2]
# API_FLAGS are passed to the sidecar and to barecheck -api (both serve
# package api), e.g. API_FLAGS="-max-conns-per-ip 4096" for more connections
# than the default bound on one client address allows.
# BASE_REV=REV adds the sidecar built at git revision REV ("sidecar-base"),
# alternated with the others, for a before-and-after in one run.
# SERVERS (words among bare, bare-same, api-nop, sidecar, sidecar-base) runs
# only those, e.g. SERVERS="sidecar sidecar-base" for an A/B of two builds.
# Needs wrk (apt-get install -y wrk) and go.
set -euo pipefail
ROUNDS=${1:-3}
DURATION=${2:-10s}
CONNS=${3:-50}
THREADS=${4:-2}
QUERY=${QUERY:-scale=60000&limit=1000000}
read -r -a api_flags <<<"${API_FLAGS:-}"

me=bench-sidecar
. "$(dirname "$0")/lib.sh"
need "apt-get install -y wrk" wrk go
(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter && (cd lab && go build -o "$tmp/barecheck" ./barecheck))
servers=(bare bare-same api-nop sidecar)
if [ -n "${BASE_REV:-}" ]; then
  extract "$BASE_REV" "$tmp/base"
  (cd "$tmp/base" && go build -o "$tmp/raterlimiter-base" ./cmd/raterlimiter)
  servers+=(sidecar-base)
fi
if [ -n "${SERVERS:-}" ]; then read -r -a servers <<<"$SERVERS"; fi
has() { case " ${servers[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

start sidecar "$tmp/raterlimiter" -listen 127.0.0.1:0 "${api_flags[@]}"
sidecar=$addr pid_sidecar=$last_pid
start bare "$tmp/barecheck" -listen 127.0.0.1:0
bare=$addr pid_bare=$last_pid
start bare-same "$tmp/barecheck" -same -listen 127.0.0.1:0
same=$addr pid_same=$last_pid
start apinop "$tmp/barecheck" -api -listen 127.0.0.1:0 "${api_flags[@]}"
apinop=$addr pid_apinop=$last_pid
if [ -n "${BASE_REV:-}" ]; then
  start sidecar-base "$tmp/raterlimiter-base" -listen 127.0.0.1:0 "${api_flags[@]}"
  base=$addr pid_base=$last_pid
fi

# ms VALUE: wrk's latency (e.g. 812.00us, 1.50ms, 1.02s) in milliseconds.
ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'; }

# run NAME ADDR PID: one wrk run; appends "name rps p50 p99 non2xx cpu" to
# results, cpu being the server's CPU time per request in microseconds (less
# sensitive than req/s to what else the shared machine runs).
run() {
  local out t0 t1
  t0=$(cputicks "$3")
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$root/lab/scripts/sidecar-ids.lua" "http://$2" -- "$QUERY")
  t1=$(cputicks "$3")
  local rps p50 p99 bad n cpu
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  n=$(awk '/requests in/ { print $1 }' <<<"$out")
  cpu=$(awk -v d=$((t1 - t0)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d * 1e6 / hz / n }')
  p50=$(ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99=$(ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  bad=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")
  echo "$1 $rps $p50 $p99 ${bad:-0} $cpu" >>"$tmp/results"
  printf '| %d | %s | %s | %s | %s | %s | %s |\n' "$round" "$1" "$rps" "$p50" "$p99" "$cpu" "${bad:-0}"
}

echo "wrk -t$THREADS -c$CONNS -d$DURATION --latency -s lab/scripts/sidecar-ids.lua, query $QUERY, $(nproc) CPUs"
echo
echo "| round | server | req/s | p50 ms | p99 ms | server CPU µs/req | non-2xx |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  if has bare; then run bare "$bare" "$pid_bare"; fi
  if has bare-same; then run bare-same "$same" "$pid_same"; fi
  if has api-nop; then run api-nop "$apinop" "$pid_apinop"; fi
  if has sidecar; then run sidecar "$sidecar" "$pid_sidecar"; fi
  if has sidecar-base; then run sidecar-base "$base" "$pid_base"; fi
done

echo
echo "| server | median req/s | median p50 ms | median p99 ms | median CPU µs/req |"
echo "|---|---|---|---|---|"
for s in "${servers[@]}"; do
  printf '| %s | %s | %s | %s | %s |\n' "$s" "$(median_of "$tmp/results" $s 2)" "$(median_of "$tmp/results" $s 3)" \
    "$(median_of "$tmp/results" $s 4)" "$(median_of "$tmp/results" $s 6)"
done
echo
if has sidecar && has sidecar-base; then
  awk '$1 == "sidecar" { s = $6 } $1 == "sidecar-base" && s { print s / $6; s = 0 }' "$tmp/results" | median |
    awk '{ printf "median per-round sidecar / sidecar-base CPU: %.3f\n", $1 }'
fi
if ! has bare || ! has bare-same; then exit 0; fi
# ratios BASE SERVER...: each server's req/s and CPU a request over BASE's
# (medians of the rounds).
ratios() {
  local base=$1 b bc s m c
  shift
  b=$(median_of "$tmp/results" "$base" 2)
  bc=$(median_of "$tmp/results" "$base" 6)
  for s in "$@"; do
    m=$(median_of "$tmp/results" "$s" 2)
    c=$(median_of "$tmp/results" "$s" 6)
    awk -v b="$b" -v m="$m" -v bc="$bc" -v c="$c" -v s="$s" -v base="$base" \
      'BEGIN { printf "ratio %s / %s: %.3f of the req/s, %.2fx the CPU per request (%s / %s CPU %.3f)\n", s, base, m / b, c / bc, base, s, bc / c }'
  done
}
ratios bare "${servers[@]:1}"
ratios bare-same "${servers[@]:2}"
# Per round, each baseline's CPU over each server's (the servers ran back
# to back), and the median of those ratios: steadier than the ratio of
# medians when the machine's load moves between rounds.
for base in bare bare-same; do
  for s in "${servers[@]:1}"; do
    [ "$s" = "$base" ] && continue
    awk -v s="$s" -v base="$base" '$1 == base { b = $6 } $1 == s && b { print b / $6 }' "$tmp/results" | median |
      awk -v s="$s" -v base="$base" '{ printf "median per-round %s / %s CPU: %.3f\n", base, s, $1 }'
  done
done
