# Shared by the scripts in this directory; source it after `set -euo
# pipefail` with $me set to the script's name (for messages). It sets $root
# (the repository) and $tmp (a directory removed on exit, when every process
# added to $pids is killed too), and defines the helpers below.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd) # the repository
tmp=$(mktemp -d)
pids=()
cleanup() {
  exec 2>/dev/null # the script is done: not the shell's "Killed" for each
  for p in "${pids[@]}"; do kill -9 "$p" || true; done
  wait || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# need HINT CMD...: exits unless every CMD is installed; HINT says how to get them.
need() {
  local hint=$1; shift
  for bin in "$@"; do
    command -v "$bin" >/dev/null || { echo "$me: $bin not found ($hint)" >&2; exit 1; }
  done
}

# freeport: a loopback port nothing listens on, below the range the kernel
# gives outgoing connections (net.ipv4.ip_local_port_range, 32768 up by
# default): a port from that range can be taken by a client socket between
# the check and the bind (a cluster node once failed to start so).
freeport() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# start NAME CMD...: runs CMD (a server that logs addr=HOST:PORT once it
# listens) in the background with its stderr in $tmp/NAME.log, waits for that
# line, and sets $addr and $last_pid.
start() {
  local name=$1; shift
  "$@" 2>"$tmp/$name.log" &
  last_pid=$!
  pids+=("$last_pid")
  addr=
  for _ in $(seq 200); do
    addr=$(grep -o 'addr=[0-9.:]*' "$tmp/$name.log" | head -1 | cut -d= -f2 || true)
    [ -n "$addr" ] && return 0
    sleep 0.05
  done
  echo "$me: $name did not start" >&2; cat "$tmp/$name.log" >&2; exit 1
}

# cputicks PID: user+system CPU time of PID so far, in clock ticks.
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# median: the median of the numbers on stdin (the mean of the middle two for
# an even count).
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# median_of FILE KEY COLUMN: the median of field COLUMN over the lines of
# FILE whose first field is KEY.
median_of() { awk -v k="$2" -v c="$3" '$1 == k { print $c }' "$1" | median; }

# extract REV DIR: writes the tree of git revision REV into DIR.
extract() { mkdir -p "$2"; (cd "$root" && git archive "$1") | tar -x -C "$2"; }

# rlload_summary RLLOAD ARGS...: runs the load tool and prints its summary's
# checks/s, p50 and p99 (ms), separated by spaces.
rlload_summary() {
  local line
  line=$("$@" 2>/dev/null | grep '^checks/s:')
  set -- $line
  echo "$2 ${4%ms} ${6%ms}"
}

# peers_runs: reads the output of `go test -bench BenchmarkPeers` (package
# lab/peers) and prints a line per result: goroutines, subject, ns/op.
peers_runs() { awk '/^BenchmarkPeers\// { split($1, p, "/"); g = substr(p[2], 3); s = p[3]; sub(/-[0-9]+$/, "", s); print g, s, $3 }'; }

# start_redis PORT [ARGS...]: starts a private redis-server on 127.0.0.1:PORT
# (no persistence, files under $tmp/rPORT), waits until it answers, and sets
# $last_pid.
start_redis() {
  local port=$1; shift
  mkdir -p "$tmp/r$port"
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$tmp/r$port" \
    --logfile "$tmp/r$port/log" "$@" &
  last_pid=$!
  pids+=("$last_pid")
  for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "$me: redis-server on $port did not start" >&2; cat "$tmp/r$port/log" >&2; exit 1
}
