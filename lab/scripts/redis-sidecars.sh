#!/usr/bin/env bash
# End-to-end check of the Redis backend with real binaries, all on loopback:
#
#  1. Two sidecars on one private redis-server, then two on a private
#     three-master Redis Cluster: for every algorithm, 300 concurrent
#     GET /check_rate through both (16 at a time, alternating sidecars) on one
#     id with limit 100 in a ten-year window: exactly 100 must get 200.
#  2. Redis killed under load and restarted, for each -redis-fail mode: while
#     it is down closed answers 503, open 200, local 200 then 429 past the
#     limit (this sidecar's own counters); no request takes longer than
#     -redis-timeout plus a margin; after the restart the same sidecar process
#     answers from Redis again. With closed, /healthz answers 503 while down.
#
# Usage: lab/scripts/redis-sidecars.sh        (exit status 0 when every check holds)
# Needs redis-server, redis-cli, curl and go.
set -euo pipefail
me=redis-sidecars
. "$(dirname "$0")/lib.sh"
need "apt-get install -y redis-server curl" redis-server redis-cli curl go
fails=0
check() { # check DESCRIPTION WANT GOT
  if [ "$2" == "$3" ]; then echo "ok   $1: $3"; else echo "FAIL $1: want $2, got $3"; fails=$((fails + 1)); fi
}
(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter)
# sidecar NAME ARGS...: starts a sidecar on Redis; sets $addr and $last_pid.
sidecar() {
  local name=$1; shift
  start "$name" "$tmp/raterlimiter" -listen 127.0.0.1:0 -backend redis "$@"
}

# shared URL NAME: two sidecars on URL, concurrent hits through both.
shared() {
  local url=$1 name=$2
  # A generous timeout: this part is about the count, on a busy machine.
  # The ten-year window (so that none ends mid-test) needs -redis-max-scale.
  sidecar "$name-a" -redis-url "$url" -redis-timeout 2s -timeout 3s -redis-max-scale 87600h; local a=$addr
  sidecar "$name-b" -redis-url "$url" -redis-timeout 2s -timeout 3s -redis-max-scale 87600h; local b=$addr
  for algo in fixed sliding token log slices leaky; do
    local id="shared-$name-$algo-$RANDOM$RANDOM" q="scale=315360000000&limit=100&algo=$algo"
    # leaky: the limit at once, all but one waiting their turn
    if [ "$algo" = leaky ]; then q="$q&queue=99"; fi
    for i in $(seq 300); do
      if ((i % 2)); then echo "http://$a/check_rate?id=$id&$q"
      else echo "http://$b/check_rate?id=$id&$q"; fi
    done >"$tmp/urls"
    xargs -P 16 -n 1 curl -s -o /dev/null -w '%{http_code}\n' <"$tmp/urls" >"$tmp/codes"
    check "$name, two sidecars, $algo: 200s of 300" 100 "$(grep -c '^200$' "$tmp/codes" || true)"
    # The rest are 429, or 503 if a call outlived -redis-timeout on a busy
    # machine (the circuit then fails closed for a probe interval).
    if grep -q -v -E '^(200|429)$' "$tmp/codes"; then
      grep -v -E '^(200|429)$' "$tmp/codes" | sort | uniq -c | sed 's/^/     other status: /'
      grep -h -E 'WARN|ERROR' "$tmp/$name-a.log" "$tmp/$name-b.log" | tail -4 | sed 's/^/     sidecar log: /' || true
    fi
  done
}

echo "## two sidecars on one redis-server"
single=$(freeport)
start_redis "$single"
single_pid=$last_pid
shared "redis://127.0.0.1:$single/0" single

echo "## two sidecars on a three-master cluster"
ports=()
for i in 1 2 3; do
  p=$(freeport); bus=$(freeport)
  start_redis "$p" --cluster-enabled yes --cluster-port "$bus" --cluster-config-file "$tmp/nodes-$p.conf" --cluster-node-timeout 2000
  ports+=("$p")
done
redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}" \
  --cluster-replicas 0 --cluster-yes >"$tmp/cluster-create.log" 2>&1
for p in "${ports[@]}"; do
  for _ in $(seq 200); do redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break; sleep 0.05; done
done
shared "redis://127.0.0.1:${ports[0]}?addr=127.0.0.1:${ports[1]}&addr=127.0.0.1:${ports[2]}" cluster
for p in "${ports[@]}"; do echo "     keys on 127.0.0.1:$p: $(redis-cli -p "$p" dbsize)"; done

echo "## redis-server killed and restarted, each -redis-fail"
for mode in closed open local; do
  sidecar "outage-$mode" -redis-url "redis://127.0.0.1:$single/0" -redis-timeout 50ms -redis-fail "$mode"
  s=$addr
  spid=$last_pid
  q="id=outage-$mode-$RANDOM&scale=60000&limit=5"
  check "$mode, redis up" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://$s/check_rate?$q")"
  kill -9 "$single_pid"; wait "$single_pid" 2>/dev/null || true
  for i in $(seq 10); do curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "http://$s/check_rate?$q"; done >"$tmp/down"
  codes=$(awk '{ print $1 }' "$tmp/down" | sort | uniq -c | awk '{ printf "%s×%s ", $1, $2 }')
  case $mode in
    closed) want="10×503 " ;;
    open) want="10×200 " ;;
    local) want="5×200 5×429 " ;;
  esac
  check "$mode, redis down: codes of 10 requests" "$want" "$codes"
  if [ "$mode" == closed ]; then
    check "$mode, redis down: /healthz" 503 "$(curl -s -o /dev/null -w '%{http_code}' "http://$s/healthz")"
  fi
  slowest=$(awk '{ if ($2 > m) m = $2 } END { printf "%.3f", m }' "$tmp/down")
  check "$mode, redis down: slowest request under 0.2 s (timeout 50 ms)" yes "$(awk -v s="$slowest" -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN { print (s < 0.2) ? "yes" : "no (" s " s, load average " l ")" }')"
  start_redis "$single"
  single_pid=$last_pid
  got=
  for _ in $(seq 40); do
    got=$(curl -s "http://$s/check_rate?$q" | grep -o '"count":[0-9]*' || true)
    [ "$got" == '"count":1' ] && break
    sleep 0.05
  done
  check "$mode, redis back: the same sidecar counts on the new (empty) Redis" '"count":1' "$got"
  check "$mode, the sidecar process is still the same" yes "$(kill -0 "$spid" 2>/dev/null && echo yes || echo no)"
done

echo
if ((fails)); then echo "redis-sidecars: $fails check(s) failed"; exit 1; fi
echo "redis-sidecars: every check holds"
