#!/usr/bin/env bash
# Regenerates the figures of lab/notes/accuracy.md and docs/algorithms.md: the default replay (its tables and the
# boundary attack's plot) and the wrong-decision share by limit.
set -euo pipefail
me=accuracy
. "$(dirname "$0")/lib.sh"
cd "$root"
(cd lab && go build -o "$tmp/rlaccuracy" ./rlaccuracy)
"$tmp/rlaccuracy" -svg docs/boundary-attack.svg
"$tmp/rlaccuracy" -limits-svg docs/accuracy-by-limit.svg
