#!/usr/bin/env bash
# Regenerates ACCURACY.md's figures: the default replay (its tables and the
# boundary attack's plot) and the wrong-decision share by limit.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o /tmp/rlaccuracy.$$ ./cmd/rlaccuracy
trap 'rm -f /tmp/rlaccuracy.$$' EXIT
/tmp/rlaccuracy.$$ -svg docs/boundary-attack.svg
/tmp/rlaccuracy.$$ -limits-svg docs/accuracy-by-limit.svg
