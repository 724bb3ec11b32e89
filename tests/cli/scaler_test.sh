#!/usr/bin/env bash
# `tessera scaler` as a process: refuses a config it cannot use (exit 1, the file and field
# named, nothing served), starts on a free port with one it can, and stops cleanly on SIGTERM.
# (The protocol itself, against a real Prometheus, is ScalerIntegration.* in the unit tests.)
# Usage: scaler_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: scaler_test.sh path/to/tessera}
WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
PID=
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

config() {  # config PROMETHEUS_EXTRA_LINES
  cat <<YAML
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus:
  url: http://127.0.0.1:9
  pollInterval: 200ms
$1
services:
  - {name: chat, server: vllm}
YAML
}

config "  bearerTokenFile: $WORK/missing-token" >"$WORK/missing.yaml"
"$TESSERA" scaler --config "$WORK/missing.yaml" --listen 127.0.0.1:0 2>"$WORK/err" >/dev/null
check "an unreadable credential file: exit 1" test $? = 1
check "naming the field and the file" grep -q "prometheus.bearerTokenFile: .*missing-token" "$WORK/err"

config "  headers: {'Bad Name': x}" >"$WORK/header.yaml"
"$TESSERA" scaler --config "$WORK/header.yaml" --listen 127.0.0.1:0 2>"$WORK/err" >/dev/null
check "a bad header name: exit 1" test $? = 1
check "located" grep -q "header.yaml:6:.*expected an HTTP header name" "$WORK/err"

printf 's3cr3t-t0ken\n' >"$WORK/token"
config "  bearerTokenFile: $WORK/token
  headers: {X-Scope-OrgID: team-a}" >"$WORK/good.yaml"
"$TESSERA" scaler --config "$WORK/good.yaml" --listen 127.0.0.1:0 2>"$WORK/log" >/dev/null &
PID=$!
for _ in $(seq 100); do
  grep -q "listening on port" "$WORK/log" && break
  sleep 0.1
done
check "a usable config: serving" grep -q "1 services, Prometheus http://127.0.0.1:9, listening on port [1-9]" "$WORK/log"
for _ in $(seq 50); do
  grep -q "chat: " "$WORK/log" && break
  sleep 0.1
done
# Prometheus is not there: the first decision holds (never zero on missing data), logged with why.
check "the decision is logged with its reason" \
  grep -qE "^[0-9T:-]+Z chat: 1 replicas, data missing: holding at 1: no fresh .*127.0.0.1:9" "$WORK/log"
check "and no credential in the log" bash -c "! grep -q s3cr3t-t0ken '$WORK/log'"
kill -TERM "$PID"
wait "$PID"
check "SIGTERM: exit 0" test $? = 0
PID=
finish scaler_test
