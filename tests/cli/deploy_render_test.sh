#!/usr/bin/env bash
# Renders every kustomization under deploy/ with `kubectl kustomize` and checks what each must
# contain. Usage: deploy_render_test.sh path/to/tessera (unused; kept for the CLI test runner)
set -u
ROOT=${TESSERA_SOURCE_DIR:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0
check() {
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name" >&2; fi
}
if ! command -v kubectl >/dev/null; then
  echo "deploy_render_test: kubectl not found (scripts/setup-deps installs it)" >&2
  exit 1
fi
for dir in "$ROOT"/deploy/*/; do
  name=$(basename "$dir")
  check "$name renders" kubectl kustomize "$dir" -o "$WORK/$name.yaml"
done

R="$WORK/scheduler-extender.yaml"
check "scheduler config with the extender stanza" grep -q 'kind: KubeSchedulerConfiguration' "$R"
for verb in 'filterVerb: filter' 'prioritizeVerb: prioritize' 'bindVerb: bind' \
  'nodeCacheCapable: true' 'urlPrefix: "http://127.0.0.1:8888"'; do
  check "extender: $verb" grep -q "$verb" "$R"
done
cm=$(sed -n 's/^  name: \(tessera-scheduler-config-[a-z0-9]*\)$/\1/p' "$R" | head -1)
check "config map has a content hash" test -n "$cm"
check "deployment mounts that config map" grep -q "name: $cm" <(sed -n '/kind: Deployment/,$p' "$R")
check "extender container runs scheduler-extender" grep -q -- '- scheduler-extender' "$R"
check "extender may create bindings" grep -q 'pods/binding' "$R"
check "extender may patch pods" grep -q -- '- patch' "$R"
check "everything in tessera-system" test "$(grep -c 'namespace: tessera-system' "$R")" -ge 5

echo "deploy_render_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
