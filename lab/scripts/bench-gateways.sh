#!/usr/bin/env bash
# What the gateway mode costs a proxy, against the proxy alone: CPU per
# request of the proxy and the sidecar together, in one run, the subjects
# alternated round by round:
#
#   nginx-limit_req  nginx's own limiter (limit_req, a rate nothing reaches)
#   nginx-auth       nginx + auth_request to the sidecar, as docs/gateways/nginx.conf
#   caddy            Caddy alone
#   caddy-auth       Caddy + forward_auth, as docs/gateways/Caddyfile
#   traefik          Traefik alone
#   traefik-auth     Traefik + forwardAuth, as docs/gateways/traefik-dynamic.yml
#
# nginx and Caddy serve a static file of 612 bytes; Traefik serves no
# files, so it proxies to an nginx that does (on CPU 1 with wrk, not
# counted). Each gateway has a sidecar of its own, started with the
# documented flags and a policy that matches every request and allows it
# (a fixed window of 2^32-1 a minute, by client address): every request is
# a real check. The proxies and the sidecars are pinned to CPU 0, wrk to
# CPU 1. CPU per request is the utime+stime of the proxy (nginx runs as
# one process, without a master) and of its sidecar from /proc/PID/stat
# over the run, divided by the requests wrk made; the sidecar's share is
# shown too. After each run, ss counts the connections to the sidecar in
# TIME-WAIT (each one opened and closed within the last minute) and those
# established (the proxy's pool).
#
# Prints every round, the medians, and per proxy the ratio of the
# gateway's CPU per request to the proxy's own in each round (the two ran
# back to back) and the median of those ratios, as Markdown tables.
#
# Usage: lab/scripts/bench-gateways.sh [ROUNDS=3] [DURATION=10s] [CONNS=32]
# PROXIES="nginx caddy traefik" picks the proxies. Needs nginx, caddy,
# traefik (.ci/run builds it into ~/.cache/raterlimiter-ci/bin), wrk,
# taskset and ss.
set -euo pipefail
ROUNDS=${1:-3}
DURATION=${2:-10s}
CONNS=${3:-32}
PROXIES=${PROXIES:-nginx caddy traefik}

me=bench-gateways
. "$(dirname "$0")/lib.sh"
PATH=$PATH:${XDG_CACHE_HOME:-$HOME/.cache}/raterlimiter-ci/bin
need "apt-get install -y wrk util-linux iproute2" wrk taskset ss go
for p in $PROXIES; do need "docs/gateways.md" "$p"; done
[ "$(nproc)" -ge 2 ] || { echo "$me: needs 2 CPUs (the subjects on one, wrk on the other)" >&2; exit 1; }
(cd "$root" && go build -o "$tmp/raterlimiter" ./cmd/raterlimiter)
docs=$root/docs/gateways

chmod 755 "$tmp" # nginx's worker reads the file as another user
mkdir -p "$tmp/www"
head -c 612 /dev/zero | tr '\0' x >"$tmp/www/index.html"
cat >"$tmp/policies.yaml" <<'EOF'
trusted_proxies: [127.0.0.1]
policies:
  - name: all
    key: ip
    limit: 4294967295
    scale: 1m
EOF

# waitport PORT: waits until something listens on 127.0.0.1:PORT.
waitport() {
  for _ in $(seq 400); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return
    sleep 0.05
  done
  echo "$me: nothing listens on port $1" >&2
  tail -n 20 "$tmp"/*.log >&2
  exit 1
}

# sidecar GATEWAY: starts a sidecar for -auth-headers GATEWAY on CPU 0 and
# sets $sport and $last_pid.
sidecar() {
  sport=$(freeport)
  taskset -c 0 "$tmp/raterlimiter" -listen "127.0.0.1:$sport" -policies "$tmp/policies.yaml" -auth-headers "$1" \
    2>"$tmp/sidecar-$1.log" &
  last_pid=$!
  pids+=("$last_pid")
  waitport "$sport"
}

# nginx_start NAME SERVER_CONF [CPU]: runs nginx as one process (no master:
# nothing is left behind when it is killed) with SERVER_CONF inside
# http { } on CPU (default 0), and sets $last_pid.
nginx_start() {
  local dir=$tmp/$1
  mkdir -p "$dir"
  printf '%s\n' "$2" >"$dir/server.conf"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    include $dir/server.conf;
}
EOF
  taskset -c "${3:-0}" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" 2>"$tmp/$1.log" &
  last_pid=$!
  pids+=("$last_pid")
}

# caddy_start NAME CADDYFILE_SITE: runs Caddy on CPU 0, no admin endpoint,
# no automatic HTTPS, and sets $last_pid.
caddy_start() {
  local dir=$tmp/$1
  mkdir -p "$dir"
  printf '{\n\tadmin off\n\tauto_https off\n}\n\n%s\n' "$2" >"$dir/Caddyfile"
  HOME=$dir XDG_DATA_HOME=$dir XDG_CONFIG_HOME=$dir taskset -c 0 caddy run --config "$dir/Caddyfile" --adapter caddyfile \
    2>"$tmp/$1.log" &
  last_pid=$!
  pids+=("$last_pid")
}

# traefik_start NAME STATIC DYNAMIC: runs Traefik on CPU 0 with the two
# files, and sets $last_pid.
traefik_start() {
  local dir=$tmp/$1
  mkdir -p "$dir"
  printf '%s\n' "${2//\/etc\/traefik\//$dir/}" >"$dir/traefik.yml"
  printf '%s\n' "$3" >"$dir/traefik-dynamic.yml"
  HOME=$dir taskset -c 0 traefik --configFile="$dir/traefik.yml" >"$tmp/$1.log" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
}

# ports TEXT PROXY SIDECAR APP: the documented addresses (proxy :8000,
# sidecar :8080, app :9000) rewritten, as the gateway tests do.
ports() {
  sed -e "s/127\.0\.0\.1:8080/127.0.0.1:$3/g" -e "s/127\.0\.0\.1:9000/127.0.0.1:$4/g" \
    -e "s/listen 8000;/listen 127.0.0.1:$2;/" -e "s/^:8000 {/http:\/\/:$2 {\n\tbind 127.0.0.1/" \
    -e "s/address: \":8000\"/address: \"127.0.0.1:$2\"/" <<<"$1"
}

subjects=()
declare -A url pidlist sidecar_port
# add NAME PORT SIDECAR_PORT PIDS...: a subject served on PORT.
add() {
  local name=$1 port=$2 sp=$3; shift 3
  waitport "$port"
  subjects+=("$name")
  url[$name]="http://127.0.0.1:$port/index.html"
  sidecar_port[$name]=$sp
  pidlist[$name]="$*"
}

for p in $PROXIES; do
  case $p in
  nginx)
    port=$(freeport)
    nginx_start nginx-limit_req "limit_req_zone \$binary_remote_addr zone=all:1m rate=1000000r/s;
server {
    listen 127.0.0.1:$port;
    location / {
        limit_req zone=all burst=1000000 nodelay;
        root $tmp/www;
    }
}"
    add nginx-limit_req "$port" - "$last_pid"
    sidecar nginx
    spid=$last_pid port=$(freeport)
    # The documented file, its location / serving the file instead of the app.
    nginx_start nginx-auth "$(ports "$(cat "$docs/nginx.conf")" "$port" "$sport" 9 |
      sed "0,/proxy_pass http:\/\/app;/s||root $tmp/www;|")"
    add nginx-auth "$port" "$sport" "$last_pid" "$spid"
    ;;
  caddy)
    port=$(freeport)
    caddy_start caddy "http://:$port {
	bind 127.0.0.1
	root * $tmp/www
	file_server
}"
    add caddy "$port" - "$last_pid"
    sidecar caddy
    spid=$last_pid port=$(freeport)
    caddy_start caddy-auth "$(ports "$(cat "$docs/Caddyfile")" "$port" "$sport" 9 |
      sed "s|^\treverse_proxy 127.0.0.1:9.*|\troot * $tmp/www\n\tfile_server|")"
    add caddy-auth "$port" "$sport" "$last_pid" "$spid"
    ;;
  traefik)
    app=$(freeport)
    nginx_start traefik-app "server { listen 127.0.0.1:$app; location / { root $tmp/www; } }" 1
    waitport "$app"
    port=$(freeport)
    traefik_start traefik "$(ports "$(cat "$docs/traefik.yml")" "$port" 9 "$app")" \
      "$(ports "$(cat "$docs/traefik-dynamic.yml")" "$port" 9 "$app" | grep -v '^      middlewares: ')"
    add traefik "$port" - "$last_pid"
    sidecar traefik
    spid=$last_pid port=$(freeport) hop=$(freeport)
    traefik_start traefik-auth "$(ports "$(cat "$docs/traefik.yml")" "$port" "$sport" "$app" | sed "s/127.0.0.1:8001/127.0.0.1:$hop/")" \
      "$(ports "$(cat "$docs/traefik-dynamic.yml")" "$port" "$sport" "$app" | sed "s/127.0.0.1:8001/127.0.0.1:$hop/")"
    add traefik-auth "$port" "$sport" "$last_pid" "$spid"
    ;;
  *)
    echo "$me: unknown proxy $p (nginx, caddy, traefik)" >&2
    exit 1
    ;;
  esac
done

# Every subject answers 200 before the runs begin (Traefik loads its
# routes a moment after its port opens).
for s in "${subjects[@]}"; do
  for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "${url[$s]}")" = 200 ] && continue 2
    sleep 0.05
  done
  echo "$me: $s does not answer 200 at ${url[$s]}" >&2
  tail -n 20 "$tmp"/*.log >&2
  exit 1
done

# usec TICKS REQUESTS: CPU microseconds per request.
usec() { awk -v d="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d * 1e6 / hz / n }'; }

# run NAME: one wrk run; appends "name rps cpu sidecar-cpu tw est non2xx"
# to results.
run() {
  local s=$1 p0 p1 s0=0 s1=0 out
  read -r -a ps <<<"${pidlist[$s]}"
  local proxy=${ps[0]} side=${ps[1]:-}
  p0=$(cputicks "$proxy")
  [ -z "$side" ] || s0=$(cputicks "$side")
  out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "${url[$s]}")
  p1=$(cputicks "$proxy")
  [ -z "$side" ] || s1=$(cputicks "$side")
  local rps n cpu scpu=- bad tw=- est=- sp=${sidecar_port[$s]}
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  n=$(awk '/requests in/ { print $1 }' <<<"$out")
  bad=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")
  cpu=$(usec $((p1 - p0 + s1 - s0)) "$n")
  if [ -n "$side" ]; then
    scpu=$(usec $((s1 - s0)) "$n")
    tw=$(ss -Htan state time-wait "( sport = :$sp or dport = :$sp )" | wc -l)
    est=$(ss -Htan state established "( dport = :$sp )" | wc -l)
  fi
  echo "$s $rps $cpu $scpu $tw $est ${bad:-0}" >>"$tmp/results"
  printf '| %d | %s | %s | %s | %s | %s | %s | %s |\n' "$round" "$s" "$rps" "$cpu" "$scpu" "$tw" "$est" "${bad:-0}"
}

echo "rev $(cd "$root" && git rev-parse --short HEAD); nginx $(nginx -v 2>&1 | cut -d/ -f2), $(caddy version 2>/dev/null | cut -d' ' -f1 || true), traefik $(traefik version 2>/dev/null | awk '/^Version:/ { print $2 }' || true)"
echo "taskset -c 1 wrk -t1 -c$CONNS -d$DURATION; the proxy and the sidecar on CPU 0; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | subject | req/s | CPU µs/req (proxy + sidecar) | of which the sidecar | sidecar conns in TIME-WAIT | established | non-2xx |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for s in "${subjects[@]}"; do run "$s"; done
done
echo
echo "load after $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| subject | median req/s | median CPU µs/req | of which the sidecar |"
echo "|---|---|---|---|"
for s in "${subjects[@]}"; do
  side=-
  [ "${sidecar_port[$s]}" = - ] || side=$(median_of "$tmp/results" "$s" 4)
  printf '| %s | %s | %s | %s |\n' "$s" "$(median_of "$tmp/results" "$s" 2)" "$(median_of "$tmp/results" "$s" 3)" "$side"
done
echo
echo "| gateway / baseline | CPU per request, each round | median |"
echo "|---|---|---|"
for pair in nginx-auth:nginx-limit_req caddy-auth:caddy traefik-auth:traefik; do
  g=${pair%%:*} b=${pair#*:}
  [ -n "${url[$g]:-}" ] || continue
  per=$(awk -v g="$g" -v b="$b" '$1 == b { c = $3 } $1 == g && c { printf "%.2f ", $3 / c }' "$tmp/results")
  printf '| %s / %s | %s| %s |\n' "$g" "$b" "$per" "$(tr ' ' '\n' <<<"$per" | grep . | median)"
done
