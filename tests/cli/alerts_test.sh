#!/usr/bin/env bash
# The alerts shipped in deploy/*/monitoring (the scaler's, the scheduler extender's, the
# admission webhook's and the MPS daemons'): each PrometheusRule renders, its rule groups pass
# `promtool check rules`, its alerts fire and clear as tests/cli/<name>_alerts.test.yaml expects
# (`promtool test rules`), and every tessera_* metric the rules use is one the running binary serves on its
# --metrics-listen port (the MPS daemons' alert reads kube-state-metrics instead).
# Usage: alerts_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: alerts_test.sh path/to/tessera}
ROOT=${TESSERA_SOURCE_DIR:?}
HERE=$(dirname "${BASH_SOURCE[0]}")
WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
PID=
source "$HERE/lib.sh"
for tool in kubectl promtool curl; do
  command -v $tool >/dev/null || { echo "alerts_test: $tool not found (scripts/setup-deps)" >&2; exit 1; }
done

# rules NAME DEPLOY_DIR: renders and unit-tests deploy/DEPLOY_DIR/monitoring, leaving its rule
# file in $WORK/NAME-rules.yaml.
rules() {
  local name=$1 dir=$ROOT/deploy/$2/monitoring
  kubectl kustomize "$dir" -o "$WORK/$name-rendered.yaml"
  check "$name: the monitoring kustomization renders" test $? = 0
  check "$name: a PrometheusRule" grep -q '^kind: PrometheusRule$' "$WORK/$name-rendered.yaml"
  # The groups under spec, as a plain Prometheus rule file.
  awk '/^spec:/{f=1; next} f{sub(/^  /, ""); print}' "$dir/prometheusrule.yaml" >"$WORK/$name-rules.yaml"
  promtool check rules "$WORK/$name-rules.yaml" >"$WORK/$name-check.out" 2>&1
  check "$name: promtool check rules" test $? = 0
  cp "$HERE/${name}_alerts.test.yaml" "$WORK/"
  (cd "$WORK" && promtool test rules "${name}_alerts.test.yaml") >"$WORK/$name-test.out" 2>&1
  check "$name: promtool test rules: every alert fires and clears as expected" test $? = 0
  grep -q SUCCESS "$WORK/$name-test.out" || cat "$WORK/$name-test.out" >&2
}

# served NAME LOG: the metric names NAME's rules use, each served on the port LOG announces.
served() {
  local name=$1 log=$2 port used m
  for _ in $(seq 100); do grep -q "metrics on port [0-9]" "$log" && break; sleep 0.1; done
  port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$log")
  curl -s "http://127.0.0.1:$port/metrics" >"$WORK/$name-metrics"
  used=$(grep -o 'tessera_[a-z_]*' "$WORK/$name-rules.yaml" | sort -u)
  check "$name: the rules use its metrics" test -n "$used"
  for m in $used; do
    check "$name: $m is served" grep -q "^# TYPE $m " "$WORK/$name-metrics"
  done
  kill "$PID"
  wait "$PID" 2>/dev/null
  PID=
}

rules scaler scaler
cat >"$WORK/scaler.yaml" <<'YAML'
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9", pollInterval: 200ms}
services:
  - {name: chat, server: vllm}
YAML
"$TESSERA" scaler --config "$WORK/scaler.yaml" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  2>"$WORK/scaler.log" >/dev/null &
PID=$!
served scaler "$WORK/scaler.log"

rules extender scheduler-extender
echo '{"apiVersion": "v1", "kind": "List", "items": []}' >"$WORK/none.json"
env -u KUBERNETES_SERVICE_HOST "$TESSERA" scheduler-extender --listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --nodes "$WORK/none.json" --pods "$WORK/none.json" \
  2>"$WORK/extender.log" >/dev/null &
PID=$!
served extender "$WORK/extender.log"

rules webhook admission-webhook
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/tls.key" -out "$WORK/tls.crt" -days 1 \
  -subj /CN=tessera-webhook.tessera-system.svc >"$WORK/openssl.log" 2>&1
check "webhook: a test certificate" test -s "$WORK/tls.crt"
"$TESSERA" admission-webhook --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" 2>"$WORK/webhook.log" >/dev/null &
PID=$!
served webhook "$WORK/webhook.log"

# The MPS daemons' alert reads kube-state-metrics, not a Tessera binary: only the rules and
# their unit tests.
rules mps mps
check "mps: the alert reads kube-state-metrics' DaemonSet metric" \
  grep -q 'kube_daemonset_status_number_unavailable{namespace="tessera-system",daemonset="tessera-mps-control"}' \
  "$WORK/mps-rules.yaml"
finish alerts_test
