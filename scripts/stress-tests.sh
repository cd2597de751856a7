#!/usr/bin/env bash
# Stress run of the test suite (RELIABILITY.md, "The suite under load"): the
# README's test command, with -race, while a second copy of it runs beside it
# on the same machine, ROUNDS times; then -count=COUNT -cpu 1,2 on the tests
# that measure time or wait for other goroutines, one package at a time. A
# test that passes here does not depend on how fast a shared machine is.
#
# Usage: scripts/stress-tests.sh [full|counts]   (default: both)
# Environment (defaults): STRESS_ROUNDS (3), STRESS_COUNT (200),
# STRESS_E2E_COUNT (20: for the tests that flood the built binary),
# STRESS_TIMEOUT (40m: for each go test under the doubled load).
# Prints one line per run and a summary; the logs stay in $STRESS_LOGS
# (a temporary directory by default, printed). Exits 1 if anything failed.
set -euo pipefail
me=stress-tests.sh
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${STRESS_ROUNDS:-3}
count=${STRESS_COUNT:-200}
timeout=${STRESS_TIMEOUT:-40m}
logs=${STRESS_LOGS:-$(mktemp -d /tmp/raterlimiter-stress.XXXXXX)}
mkdir -p "$logs"
what=${1:-both}
failed=0

# The tests that compare a time or wait for a condition: every test that
# has failed on a loaded machine, and their neighbours. One line each:
# package, -run pattern, count. The ones that start the built binary and
# hold thousands of connections (seconds a run) run STRESS_E2E_COUNT times.
e2e=${STRESS_E2E_COUNT:-20}
timing=(
  "./memory ^(TestBatchAcrossShardsKeepsOrder|TestPeriodicSweep|TestConcurrentHitsAllowExactlyTheLimit)$ $count"
  "./cmd/raterlimiter ^(TestHostileClientsDoNotStopHealthyOnes|TestSlowedActorAnswers503WithinTimeoutAndLeaksNothing|TestAbandonedBatchKeepsItsOwnChecks)$ $count"
  "./cmd/raterlimiter ^(TestWellBehavedClientUnderAttack|TestBodyFloodIsBounded|TestE2ESnapshotKill9LosesAtMostOneInterval|TestRedisOutageEngagesTheFailMode)$ $e2e"
  "./cmd/raterlimiter ^TestConnectionHogDoesNotStopOthers$ $e2e"
  "./api ^(TestBodyBudgetRefusesAnnouncedBodies|TestWaitHoldsEachAnswerForItsTurn|TestWaitPastMaxWaitIsRefusedAtOnce|TestAuthWaitsForAPolicyThatWaits|TestUnavailableIs503WithinTimeout|TestSlowClientIsCutOffAfterReadTimeout)$ $count"
  "./middleware/... ^TestMiddlewareWaitsItsTurn$ $count"
  "./redisbackend ^TestOutage$ $e2e"
)

# suite NAME: the README's test command, its output in $logs/NAME.log.
suite() {
  local name=$1 start rc=0
  start=$(date +%s)
  { go vet ./... && go test -race -count=1 -timeout "$timeout" ./... &&
    (cd deploy/kubernetes/check && go vet ./... && go test -race -count=1 -timeout 10m ./...); } >"$logs/$name.log" 2>&1 || rc=$?
  echo "$name rc=$rc $(($(date +%s) - start))s" >"$logs/$name.result"
  return "$rc"
}

if [[ $what == both || $what == full ]]; then
  for r in $(seq 1 "$rounds"); do
    suite "round$r-beside" &
    beside=$!
    rc=0 brc=0
    suite "round$r" || rc=$?
    wait "$beside" || brc=$?
    # The copy beside is a run under the same load: it must pass too.
    echo "$(cat "$logs/round$r.result") (a second copy beside it: $(cat "$logs/round$r-beside.result"))"
    for n in "round$r" "round$r-beside"; do
      if ! grep -q ' rc=0 ' "$logs/$n.result"; then
        failed=1
        grep -E '^(--- FAIL|FAIL|panic:)' "$logs/$n.log" | head -20 || true
      fi
    done
  done
fi

if [[ $what == both || $what == counts ]]; then
  i=0
  for line in "${timing[@]}"; do
    read -r pkg run n <<<"$line"
    i=$((i + 1))
    start=$(date +%s)
    rc=0
    go test -race -count="$n" -cpu 1,2 -timeout 300m -run "$run" "$pkg" >"$logs/count$i.log" 2>&1 || rc=$?
    echo "-count=$n -cpu 1,2 -run '$run' $pkg: rc=$rc $(($(date +%s) - start))s"
    if [[ $rc != 0 ]]; then
      failed=1
      grep -E '^(--- FAIL|FAIL|panic:)' "$logs/count$i.log" | head -20 || true
    fi
  done
fi

echo "logs: $logs"
if [[ $failed != 0 ]]; then
  echo "$me: FAILED" >&2
  exit 1
fi
echo "$me: all passed"
