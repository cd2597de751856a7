#!/usr/bin/env bash
# The tests: the product module, the module that checks the Kubernetes
# manifests and the Helm chart, and the lab's build. Every part runs even
# when an earlier one fails; the script fails if any did.
set -uo pipefail
cd "$(dirname "$0")/.."
failed=()
part() {
  local name=$1; shift
  echo "== $name"
  if ! (set -e; "$@"); then failed+=("$name"); fi
}
part "gofmt" bash -c 'out=$(gofmt -l $(git ls-files "*.go" 2>/dev/null || find . -name "*.go")); test -z "$out" || { echo "gofmt would change:"; echo "$out"; exit 1; }'
# go mod download first: the snippets' test builds offline against the
# module cache, which must then hold every module go.sum names.
part "main module" bash -c 'go mod download && go vet ./... && go test -race -count=1 -timeout 20m ./...'
part "deploy/kubernetes/check" bash -c 'cd deploy/kubernetes/check && go vet ./... && go test -race -count=1 -timeout 10m ./...'
part "lab" bash -c 'cd lab && go vet ./... && go build ./...'
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all passed"
