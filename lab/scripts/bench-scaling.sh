#!/usr/bin/env bash
# Scaling curve of the embedded limiter: rlload -embedded at a list of caller
# counts, the counts alternated round by round in one run so that the
# machine's other load spreads over all of them. Prints every round, then a
# Markdown table of medians: checks/s, its ratio to the median at 128
# callers, p50 and p99, and the mean latency Little's law gives for the
# measured throughput (callers / checks/s) with p99's ratio to it. With SVG
# set, also writes a small SVG plot of checks/s against callers there.
#
# Usage: lab/scripts/bench-scaling.sh [ROUNDS=3] [DURATION=3s]
# Environment: CALLERS (default "16 128 1024 4096 16384"), ARGS (more rlload
# flags), SVG (a file to write the plot to).
set -euo pipefail
ROUNDS=${1:-3}
DURATION=${2:-3s}
CALLERS=${CALLERS:-16 128 1024 4096 16384}
ARGS=${ARGS:-}
SVG=${SVG:-}

me=bench-scaling
. "$(dirname "$0")/lib.sh"
(cd "$root" && (cd lab && go build -o "$tmp/rlload" ./rlload))
echo "rev $(cd "$root" && git rev-parse --short HEAD), GOMAXPROCS $(nproc), $ROUNDS rounds of $DURATION, rlload -embedded $ARGS"
echo
echo "| round | callers | checks/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  for c in $CALLERS; do
    # shellcheck disable=SC2086
    read -r cps p50 p99 <<<"$(rlload_summary "$tmp/rlload" -embedded -c "$c" -d "$DURATION" -warmup 1s $ARGS)"
    echo "$c $cps $p50 $p99" >>"$tmp/rounds"
    echo "| $r | $c | $cps | $p50 | $p99 |"
  done
done
echo
echo "| callers | checks/s (median) | ratio to 128 | p50 ms | p99 ms | Little's law mean ms | p99 / Little |"
echo "|---|---|---|---|---|---|---|"
for c in $CALLERS; do
  echo "$c $(median_of "$tmp/rounds" "$c" 2) $(median_of "$tmp/rounds" "$c" 3) $(median_of "$tmp/rounds" "$c" 4)" >>"$tmp/medians"
done
base=$(awk '$1 == 128 { print $2 }' "$tmp/medians")
awk -v base="${base:-0}" '{
  little = $1 / $2 * 1000
  printf "| %d | %.0f | %s | %s | %s | %.3f | %.2f |\n", $1, $2, (base > 0 ? sprintf("%.2f", $2 / base) : "-"), $3, $4, little, $4 / little
}' "$tmp/medians"
if [ -n "$SVG" ]; then
  # checks/s against log2(callers), scaled to a 480x240 plot.
  awk 'BEGIN { w = 480; h = 240; m = 40 }
  { n++; c[n] = $1; v[n] = $2; if ($2 > top) top = $2; lc = log($1) / log(2); if (n == 1 || lc < lo) lo = lc; if (lc > hi) hi = lc }
  END {
    top *= 1.1; if (hi == lo) hi = lo + 1
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"11\">\n", w + 2 * m, h + 2 * m
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    printf "<text x=\"%d\" y=\"16\" text-anchor=\"middle\">embedded checks/s against concurrent callers (medians)</text>\n", m + w / 2
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", m, m + h, m + w, m + h
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", m, m, m, m + h
    for (k = 0; k <= 4; k++) {
      y = m + h - h * k / 4
      printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", m, y, m + w, y
      printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1fM</text>\n", m - 4, y + 4, top * k / 4 / 1e6
    }
    pts = ""
    for (i = 1; i <= n; i++) {
      x = m + w * (log(c[i]) / log(2) - lo) / (hi - lo); y = m + h - h * v[i] / top
      pts = pts sprintf("%.1f,%.1f ", x, y)
      printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"steelblue\"/>\n", x, y
      printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x, m + h + 16, c[i]
    }
    printf "<polyline points=\"%s\" fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\"/>\n", pts
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">callers (log scale)</text>\n", m + w / 2, m + h + 32
    print "</svg>"
  }' "$tmp/medians" >"$SVG"
  echo
  echo "plot: $SVG"
fi
