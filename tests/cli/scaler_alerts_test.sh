#!/usr/bin/env bash
# deploy/scaler/monitoring: the PrometheusRule renders, its rule groups pass `promtool check
# rules`, its alerts fire and clear as scaler_alerts.test.yaml expects (`promtool test rules`),
# and every tessera_scaler_* metric the rules use is one the scaler serves on --metrics-listen.
# Usage: scaler_alerts_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: scaler_alerts_test.sh path/to/tessera}
ROOT=${TESSERA_SOURCE_DIR:?}
HERE=$(dirname "${BASH_SOURCE[0]}")
WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
PID=
source "$HERE/lib.sh"
for tool in kubectl promtool curl; do
  command -v $tool >/dev/null || { echo "scaler_alerts_test: $tool not found (scripts/setup-deps)" >&2; exit 1; }
done

kubectl kustomize "$ROOT/deploy/scaler/monitoring" -o "$WORK/rendered.yaml"
check "the monitoring kustomization renders" test $? = 0
check "a PrometheusRule" grep -q '^kind: PrometheusRule$' "$WORK/rendered.yaml"
# The groups under spec, as a plain Prometheus rule file.
awk '/^spec:/{f=1; next} f{sub(/^  /, ""); print}' "$ROOT/deploy/scaler/monitoring/prometheusrule.yaml" \
  >"$WORK/rules.yaml"
promtool check rules "$WORK/rules.yaml" >"$WORK/check.out" 2>&1
check "promtool check rules" test $? = 0
cp "$HERE/scaler_alerts.test.yaml" "$WORK/"
(cd "$WORK" && promtool test rules scaler_alerts.test.yaml) >"$WORK/test.out" 2>&1
check "promtool test rules: every alert fires and clears as expected" test $? = 0
grep -q SUCCESS "$WORK/test.out" || cat "$WORK/test.out" >&2

# The names the rules use, against what the scaler serves.
cat >"$WORK/scaler.yaml" <<'YAML'
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9", pollInterval: 200ms}
services:
  - {name: chat, server: vllm}
YAML
"$TESSERA" scaler --config "$WORK/scaler.yaml" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  2>"$WORK/log" >/dev/null &
PID=$!
for _ in $(seq 100); do grep -q "metrics on port [0-9]" "$WORK/log" && break; sleep 0.1; done
MPORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$WORK/log")
curl -s "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics"
used=$(grep -o 'tessera_scaler_[a-z_]*' "$WORK/rules.yaml" | sort -u)
check "the rules use scaler metrics" test -n "$used"
for m in $used; do
  check "$m is served" grep -q "^# TYPE $m " "$WORK/metrics"
done
kill "$PID"
wait "$PID" 2>/dev/null
PID=
finish scaler_alerts_test
