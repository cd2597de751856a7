#!/usr/bin/env bash
# The embedded core before and after a change, in one run: builds the
# lab/peers test binary and rlload at BASE (a git revision, extracted with
# git archive) and from the work tree, then runs ROUNDS rounds, each running
# both builds in turn (A then B in odd rounds, B then A in even ones), of:
#   - lab/peers: raterlimiter and go-limiter at 128 and 4,096 goroutines
#     (the ratio raterlimiter / go-limiter is taken within one process run);
#   - rlload -embedded at each of CALLERS (checks/s, p99);
#   - a flood on one id from 128 callers: every check allowed (-limit 1e9)
#     against all but the first denied (-limit 1).
# Prints every measurement, then Markdown tables of medians and ratios.
#
# Usage: lab/scripts/bench-core-ab.sh BASE [ROUNDS=5] [DURATION=2s]
# Environment: CALLERS (default "16 128 1024 4096 16384"), PEERTIME (the
# peers' -benchtime, default 1s), SKIP (words among "peers scaling flood").
set -euo pipefail
BASE=${1:?usage: bench-core-ab.sh BASE [ROUNDS] [DURATION]}
ROUNDS=${2:-5}
DURATION=${3:-2s}
CALLERS=${CALLERS:-16 128 1024 4096 16384}
PEERTIME=${PEERTIME:-1s}
SKIP=${SKIP:-}

me=bench-core-ab
. "$(dirname "$0")/lib.sh"

build() { # build NAME SRC: $tmp/NAME-peers and $tmp/NAME-rlload from the tree at SRC
  if [ -d "$2/lab/rlload" ]; then # the lab's own module
    (cd "$2/lab/peers" && go test -c -o "$tmp/$1-peers" .)
    (cd "$2/lab" && go build -o "$tmp/$1-rlload" ./rlload)
  else # a revision from before the lab
    (cd "$2/bench/peers" && go test -c -o "$tmp/$1-peers" .)
    (cd "$2" && go build -o "$tmp/$1-rlload" ./cmd/rlload)
  fi
}
extract "$BASE" "$tmp/base"
build A "$tmp/base"
build B "$root"
echo "A = $(cd "$root" && git rev-parse --short "$BASE"), B = work tree at $(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- . ':!lab' || echo ' (modified)'); GOMAXPROCS $(nproc); $ROUNDS rounds"
echo

skip() { case " $SKIP " in *" $1 "*) return 0 ;; esac; return 1; }
rlload() { # rlload BUILD ARGS...: "checks/s p99ms"
  set -- $(rlload_summary "$tmp/$1-rlload" -embedded -d "$DURATION" -warmup 1s "${@:2}")
  echo "$1 $3"
}
for r in $(seq "$ROUNDS"); do
  order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
  for b in $order; do
    if ! skip peers; then
      "$tmp/$b-peers" -test.run '^$' -test.bench 'BenchmarkPeers/g=(128|4096)/(raterlimiter|go-limiter)$' -test.benchtime "$PEERTIME" 2>/dev/null | peers_runs |
        awk -v b="$b" -v r="$r" '{ v[$1, $2] = $3; gs[$1] = 1 }
          END { for (g in gs) printf "peers %s %s %d %.1f %.1f %.3f\n", r, b, g, v[g, "raterlimiter"], v[g, "go-limiter"], v[g, "raterlimiter"] / v[g, "go-limiter"] }' |
        tee -a "$tmp/peers"
    fi
    if ! skip scaling; then
      for c in $CALLERS; do
        echo "scaling $r $b $c $(rlload "$b" -c "$c")" | tee -a "$tmp/scaling"
      done
    fi
    if ! skip flood; then
      echo "flood $r $b $(rlload "$b" -c 128 -ids 1 -limit 1000000000) $(rlload "$b" -c 128 -ids 1 -limit 1)" | tee -a "$tmp/flood"
    fi
  done
done
echo
if ! skip peers; then
  echo "| goroutines | build | raterlimiter ns/op | go-limiter ns/op | ratio (median of the per-run ratios) |"
  echo "|---|---|---:|---:|---:|"
  for g in 128 4096; do
    for b in A B; do
      sel() { awk -v g="$g" -v b="$b" -v k="$1" '$3 == b && $4 == g { print $k }' "$tmp/peers" | median; }
      printf "| %d | %s | %.0f | %.0f | %.2f |\n" "$g" "$b" "$(sel 5)" "$(sel 6)" "$(sel 7)"
    done
  done
  echo
fi
if ! skip scaling; then
  echo "| callers | A checks/s | A ratio to 128 | A p99 ms | B checks/s | B ratio to 128 | B p99 ms | B p99 / Little | B / A |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  med() { awk -v c="$1" -v b="$2" -v k="$3" '$3 == b && $4 == c { print $k }' "$tmp/scaling" | median; }
  a128=$(med 128 A 5); b128=$(med 128 B 5)
  for c in $CALLERS; do
    a=$(med "$c" A 5); ap=$(med "$c" A 6); b=$(med "$c" B 5); bp=$(med "$c" B 6)
    awk -v c="$c" -v a="$a" -v ap="$ap" -v b="$b" -v bp="$bp" -v a128="$a128" -v b128="$b128" 'BEGIN {
      printf "| %d | %.0f | %.2f | %s | %.0f | %.2f | %s | %.2f | %.2f |\n", c, a, a / a128, ap, b, b / b128, bp, bp / (c / b * 1000), b / a }'
  done
  echo
fi
if ! skip flood; then
  echo "| build | allowed checks/s | denied checks/s | denied / allowed |"
  echo "|---|---:|---:|---:|"
  for b in A B; do
    al=$(awk -v b="$b" '$3 == b { print $4 }' "$tmp/flood" | median)
    de=$(awk -v b="$b" '$3 == b { print $6 }' "$tmp/flood" | median)
    awk -v b="$b" -v al="$al" -v de="$de" 'BEGIN { printf "| %s | %.0f | %.0f | %.2f |\n", b, al, de, de / al }'
  done
fi
