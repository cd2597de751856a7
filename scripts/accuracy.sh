#!/usr/bin/env bash
# Regenerates ACCURACY.md's figures: the default replay (its tables and the
# boundary attack's plot) and the wrong-decision share by limit.
set -euo pipefail
me=accuracy
. "$(dirname "$0")/lib.sh"
cd "$root"
go build -o "$tmp/rlaccuracy" ./cmd/rlaccuracy
"$tmp/rlaccuracy" -svg docs/boundary-attack.svg
"$tmp/rlaccuracy" -limits-svg docs/accuracy-by-limit.svg
