#!/usr/bin/env bash
# `tessera scaler` as a process: refuses a config it cannot use (exit 1, the file and field
# named, nothing served), starts on a free port with one it can (ready on /readyz), and stops
# cleanly on SIGTERM; with `tls`, serves a renewed certificate without a restart and keeps the
# last good one through a broken renewal.
# (The protocol itself, against a real Prometheus, is ScalerIntegration.* in the unit tests.)
# Usage: scaler_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: scaler_test.sh path/to/tessera}
WORK=$(mktemp -d)
trap 'kill "$PID" "$FAKE" 2>/dev/null; rm -rf "$WORK"' EXIT
PID=
FAKE=
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

wait_log() {  # wait_log TEXT: up to 10 s for TEXT in the scaler's log
  for _ in $(seq 100); do
    grep -q "$1" "$WORK/log" && break
    sleep 0.1
  done
}
start_scaler() {  # start_scaler CONFIG [ARGS]: serves it on free ports (PID), once it says it listens
  "$TESSERA" scaler --config "$@" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
    2>"$WORK/log" >/dev/null &
  PID=$!
  wait_log "listening on port"
}

refuse() {  # refuse CONFIG [env ARGS]: a start that should fail; stderr in $WORK/err
  local config=$1
  shift
  env "$@" "$TESSERA" scaler --config "$config" --listen 127.0.0.1:0 2>"$WORK/err" >/dev/null
}
check_once() {  # check_once CONFIG [env ARGS]: --check; stdout in $WORK/out, stderr in $WORK/err
  local config=$1
  shift
  env "$@" "$TESSERA" scaler --config "$config" --check 2>"$WORK/err" >"$WORK/out"
}

config "  bearerTokenFile: $WORK/missing-token" >"$WORK/missing.yaml"
refuse "$WORK/missing.yaml"
check "an unreadable credential file: exit 1" test $? = 1
check "naming the field and the file" grep -q "prometheus.bearerTokenFile: .*missing-token" "$WORK/err"

config "  headers: {'Bad Name': x}" >"$WORK/header.yaml"
refuse "$WORK/header.yaml"
check "a bad header name: exit 1" test $? = 1
check "located" grep -q "header.yaml:6:.*expected an HTTP header name" "$WORK/err"

# Amazon Managed Service for Prometheus: signing needs credentials from the environment. None
# there, or a profile that is not in the named file, stops the scaler at once; an STS that does
# not answer does not (a warning: queries fail until it does).
no_aws_credentials=(-u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_WEB_IDENTITY_TOKEN_FILE
  -u AWS_CONTAINER_CREDENTIALS_FULL_URI -u AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
  -u AWS_SHARED_CREDENTIALS_FILE -u AWS_PROFILE HOME="$WORK")
config "  sigv4: {region: us-west-2}" >"$WORK/amp.yaml"
refuse "$WORK/amp.yaml" "${no_aws_credentials[@]}"
check "sigv4 without AWS credentials: exit 1" test $? = 1
check "  saying where they were looked for" \
  grep -q "amp.yaml: prometheus.sigv4: no AWS credentials in the environment (expected .*IRSA" \
  "$WORK/err"
printf '[default]\naws_access_key_id = AKID\naws_secret_access_key = s3cr3t-k3y\n' >"$WORK/aws"
refuse "$WORK/amp.yaml" AWS_SHARED_CREDENTIALS_FILE="$WORK/aws" AWS_PROFILE=prod
check "sigv4 with a profile missing from the file: exit 1" test $? = 1
check "  naming the profile, quoting no key" \
  bash -c "grep -q 'prometheus.sigv4: .*prod' '$WORK/err' && ! grep -q s3cr3t-k3y '$WORK/err'"
printf 'token' >"$WORK/sa-token"
check_once "$WORK/amp.yaml" -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$WORK" \
  AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/sa-token" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/r \
  AWS_ENDPOINT_URL_STS=http://127.0.0.1:9
check "sigv4 with an STS that does not answer: warned" \
  grep -q "warning: prometheus.sigv4: STS AssumeRoleWithWebIdentity at http://127.0.0.1:9" \
  "$WORK/err"
check "  and --check still asks (each query failing on the credentials)" \
  grep -q "prometheus.sigv4: AWS credentials: STS" "$WORK/out"
check "  and says so on its credentials line" \
  grep -q "^credentials error: STS AssumeRoleWithWebIdentity at http://127.0.0.1:9" "$WORK/out"
check_once "$WORK/amp.yaml" -u AWS_WEB_IDENTITY_TOKEN_FILE AWS_ACCESS_KEY_ID=AKIDCHECK \
  AWS_SECRET_ACCESS_KEY=s3cr3t-k3y
check "--check names where the AWS credentials came from, not the key" \
  bash -c "grep -qx 'credentials AWS (SigV4 for aps in us-west-2) from AWS_ACCESS_KEY_ID, read again at every query' '$WORK/out' && ! grep -q 'AKIDCHECK\\|s3cr3t-k3y' '$WORK/out'"
# A workspace in another account: queries as a role there (sigv4.roleArn), assumed with the
# environment's credentials.
config "  sigv4: {region: us-west-2, roleArn: 'arn:aws:iam::111122223333:role/amp-query'}" \
  >"$WORK/amp-role.yaml"
refuse "$WORK/amp-role.yaml" "${no_aws_credentials[@]}"
check "sigv4.roleArn without AWS credentials to assume it with: exit 1" test $? = 1
check "  naming the role" \
  grep -q "prometheus.sigv4: no AWS credentials to assume arn:aws:iam::111122223333:role/amp-query with" "$WORK/err"
check_once "$WORK/amp-role.yaml" -u AWS_WEB_IDENTITY_TOKEN_FILE AWS_ACCESS_KEY_ID=AKIDCHECK \
  AWS_SECRET_ACCESS_KEY=s3cr3t-k3y AWS_ENDPOINT_URL_STS=http://127.0.0.1:9
check "sigv4.roleArn with an STS that does not answer: warned" \
  grep -q "warning: prometheus.sigv4: STS AssumeRole of arn:aws:iam::111122223333:role/amp-query at http://127.0.0.1:9" \
  "$WORK/err"

# Azure Monitor and Google Cloud: a token from the pod's cloud identity. Azure's variables
# missing stop the scaler; a metadata server that does not answer only warns.
config "  azureWorkloadIdentity: {}" >"$WORK/azure.yaml"
refuse "$WORK/azure.yaml" -u AZURE_TENANT_ID -u AZURE_CLIENT_ID -u AZURE_FEDERATED_TOKEN_FILE
check "azureWorkloadIdentity without its environment: exit 1" test $? = 1
check "  naming the variables" \
  grep -q "azure.yaml: prometheus.azureWorkloadIdentity: .*AZURE_TENANT_ID, AZURE_CLIENT_ID" \
  "$WORK/err"
config "  googleWorkloadIdentity: {}" >"$WORK/google.yaml"
check_once "$WORK/google.yaml" GCE_METADATA_HOST=127.0.0.1:9
check "googleWorkloadIdentity with no metadata server: warned" \
  grep -q "warning: prometheus.googleWorkloadIdentity: the GKE metadata server at 127.0.0.1:9" \
  "$WORK/err"
check "  and each query fails on the token" \
  grep -q "error: prometheus.googleWorkloadIdentity: the GKE metadata server" "$WORK/out"

printf 's3cr3t-t0ken\n' >"$WORK/token"
config "  bearerTokenFile: $WORK/token
  headers: {X-Scope-OrgID: team-a}" >"$WORK/good.yaml"
start_scaler "$WORK/good.yaml"
check "a usable config: serving" grep -q "1 services, Prometheus http://127.0.0.1:9, listening on port [1-9]" "$WORK/log"
wait_log "chat: .*127.0.0.1:9"  # a whole line: "chat: " alone may be half of one being written
# Prometheus is not there: the first decision holds (never zero on missing data), logged with why.
check "the decision is logged with its reason" \
  grep -qE "^[0-9T:-]+Z chat: 1 replicas, data missing: holding at 1: no fresh .*127.0.0.1:9" "$WORK/log"
wait_log "chat: history"
# Nor is its history: the range queries fail, logged with why and when it is tried again, and the
# scaler serves on.
check "the history that could not be rebuilt is logged with why" \
  grep -qE "^[0-9T:-]+Z chat: history not rebuilt \(.*query_range.*\); tried again in 10s \(failed 1 time\), meanwhile it builds up from its polls" "$WORK/log"
check "and no credential in the log" bash -c "! grep -q s3cr3t-t0ken '$WORK/log'"
MPORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$WORK/log")
check "--metrics-listen: its port announced" test -n "$MPORT"
curl -s "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics"
check "/metrics: the held decision, not fresh" \
  grep -qx 'tessera_scaler_desired_replicas{service="chat"} 1' "$WORK/metrics"
check "  (fresh 0)" grep -qx 'tessera_scaler_fresh{service="chat"} 0' "$WORK/metrics"
check "  (polls without data counted)" \
  grep -qE '^tessera_scaler_polls_without_data_total\{service="chat"\} [1-9]' "$WORK/metrics"
check "  (in the text format)" grep -q '^# TYPE tessera_scaler_query_failures_total counter$' "$WORK/metrics"
curl -s "http://127.0.0.1:$MPORT/status" >"$WORK/status"
check "/status: the decision held, KEDA's fallback named" \
  grep -q '^chat: 1 replicas, held on missing or stale data (GetMetrics answers UNAVAILABLE' "$WORK/status"
check "  and why, with the query's failure" grep -qE '^  why: holding at 1: .*127.0.0.1:9' "$WORK/status"
check "another path: 404" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/")" = 404
check "/readyz: ok once the gRPC port serves" \
  test "$(curl -s -w ' %{http_code}' "http://127.0.0.1:$MPORT/readyz")" = "ok
 200"
kill -TERM "$PID"
wait "$PID"
check "SIGTERM: exit 0" test $? = 0
PID=

# The config as a ConfigMap volume holds it (the file linked through ..data, updated by swapping
# that link), read again every second: a service's change is taken without a restart, an invalid
# edit is refused and logged once while the last good config serves on, and a change to the
# prometheus section is left for a restart. A service added has its history rebuilt, as at start,
# and so has one whose query changed (here Prometheus is not there, so each attempt is logged as
# failed).
cm_config() {  # cm_config VERSION SERVICES [PROMETHEUS_URL]: a config in $WORK/cm/VERSION
  mkdir -p "$WORK/cm/$1"
  cat >"$WORK/cm/$1/scaler.yaml" <<YAML
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "${3:-http://127.0.0.1:9}", pollInterval: 200ms}
services:
$2
YAML
}
cm_publish() { ln -sfn "$1" "$WORK/cm/..data_tmp" && mv -T "$WORK/cm/..data_tmp" "$WORK/cm/..data"; }
cm_metrics() { curl -s "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics"; }
cm_config v1 "  - {name: chat, server: vllm}"
cm_config v2 "  - {name: chat, server: vllm, maxReplicas: 7}
  - {name: code, server: vllm}"
cm_config v2q "  - {name: chat, server: vllm, maxReplicas: 7, queueQuery: 'sum(gateway_waiting{model=\"chat\"})'}
  - {name: code, server: vllm}"
cm_config v3 "  - {name: chat, server: vllm, maxReplicas: -1}"
cm_config v4 "  - {name: chat, server: vllm}" http://127.0.0.1:10
cm_publish v1
ln -s ..data/scaler.yaml "$WORK/cm/scaler.yaml"
start_scaler "$WORK/cm/scaler.yaml" --config-recheck 1s
MPORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$WORK/log")
cm_publish v2
wait_log "reloaded: "
check "a ConfigMap's change to its services: taken without a restart" \
  grep -qE "^[0-9T:-]+Z config $WORK/cm/scaler.yaml reloaded: chat changed; code added, its history to be rebuilt$" "$WORK/log"
wait_log "^[0-9T:-]*Z code: [0-9]* replicas"  # its first poll (its history line also begins "code: ")
wait_log "code: history"
check "  the added service's history rebuilt after the reload (attempted: no Prometheus)" \
  grep -qE "^[0-9T:-]+Z code: history not rebuilt \(.*query_range.*\); tried again in 10s \(failed 1 time\)" "$WORK/log"
cm_metrics
check "  the new ceiling in force" grep -qx 'tessera_scaler_max_replicas{service="chat"} 7' "$WORK/metrics"
check "  the added service polled" grep -qx 'tessera_scaler_max_replicas{service="code"} 100' "$WORK/metrics"
check "  counted" grep -qx 'tessera_scaler_config_reloads_total{outcome="applied"} 1' "$WORK/metrics"
# A changed query: what chat learned from the old series is dropped and rebuilt from the new.
cm_publish v2q
wait_log "reloaded: chat changed its queries"
check "a changed query: what the service learned is dropped, its history rebuilt from the new one" \
  grep -qE "^[0-9T:-]+Z config $WORK/cm/scaler.yaml reloaded: chat changed its queries: what it learned is dropped, its history to be rebuilt from the new queries$" "$WORK/log"
# (the lines after the reload's: a retry of the start's failed rebuild may come between)
after_reload() { sed -n '/reloaded: chat changed its queries/,$p' "$WORK/log"; }
for _ in $(seq 100); do
  after_reload | grep -q "Z chat: history not rebuilt (.*query_range.*); tried again in 10s (failed 1 time)" && break
  sleep 0.1
done
check "  its rebuild attempted anew, as at start (no Prometheus)" \
  bash -c "sed -n '/reloaded: chat changed its queries/,\$p' '$WORK/log' | grep -q 'Z chat: history not rebuilt (.*query_range.*); tried again in 10s (failed 1 time)'"
cm_publish v3
wait_log "is not taken"
sleep 2.5  # read twice more
check "an invalid edit: refused, located, logged once" test "$(grep -c "config $WORK/cm/scaler.yaml changed and is not taken ($WORK/cm/scaler.yaml:5:.*maxReplicas.*; serving the config read before$" "$WORK/log")" = 1
cm_metrics
check "  the last good config serving on" grep -qx 'tessera_scaler_max_replicas{service="chat"} 7' "$WORK/metrics"
check "  shown as not current" grep -qx 'tessera_scaler_config_current 0' "$WORK/metrics"
cm_publish v4
wait_log "restart the scaler to apply it"
check "another Prometheus: left for a restart, said so" \
  grep -q "config $WORK/cm/scaler.yaml changed: a setting outside .services. changed (prometheus, tls): restart the scaler to apply it; nothing of this config was taken" "$WORK/log"
cm_metrics
check "  counted" grep -qx 'tessera_scaler_config_reloads_total{outcome="needs_restart"} 1' "$WORK/metrics"
kill -TERM "$PID"
wait "$PID"
check "SIGTERM: exit 0" test $? = 0
PID=
"$TESSERA" scaler --config "$WORK/cm/scaler.yaml" --config-recheck soon 2>"$WORK/err" >/dev/null
check "a bad --config-recheck: refused" grep -q 'config-recheck soon: expected a duration' "$WORK/err"

# TLS through the binary: a Secret volume as the kubelet writes it (files linked through ..data,
# renewed by swapping that link), the files read again every second.
pki() {  # pki DIR: a CA and a server certificate for 127.0.0.1 it signed
  mkdir -p "$1"
  (cd "$1" && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
      -subj /CN=test-ca &&
    openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=scaler &&
    printf 'subjectAltName=IP:127.0.0.1\n' >ext &&
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 2 \
      -extfile ext) >/dev/null 2>&1
}
publish() {  # publish VERSION_DIR: the volume's ..data now points there
  ln -sfn "$1" "$WORK/secret/..data_tmp" && mv -T "$WORK/secret/..data_tmp" "$WORK/secret/..data"
}
pki "$WORK/pki1"
pki "$WORK/pki2"
mkdir -p "$WORK/secret/v1" "$WORK/secret/v2" "$WORK/secret/v3"
cp "$WORK/pki1/tls.crt" "$WORK/pki1/tls.key" "$WORK/secret/v1/"
cp "$WORK/pki2/tls.crt" "$WORK/pki2/tls.key" "$WORK/secret/v2/"
cp "$WORK/pki2/tls.key" "$WORK/secret/v3/tls.crt"  # a broken renewal: a key for a certificate
cp "$WORK/pki2/tls.key" "$WORK/secret/v3/tls.key"
publish v1
ln -s ..data/tls.crt "$WORK/secret/tls.crt"
ln -s ..data/tls.key "$WORK/secret/tls.key"
config "tls: {certFile: $WORK/secret/tls.crt, keyFile: $WORK/secret/tls.key, reloadInterval: 1s}" \
  >"$WORK/tls.yaml"
start_scaler "$WORK/tls.yaml"
GPORT=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$WORK/log")
MPORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$WORK/log")
check "with tls: serving" test -n "$GPORT"
verify_code() {  # verify_code CA: openssl's verdict on the gRPC port's certificate against CA
  # (read from its output: its exit status also counts the server closing the connection after
  # the handshake, which a gRPC server may do when nothing follows)
  openssl s_client -connect "127.0.0.1:$GPORT" -CAfile "$1" -alpn h2 </dev/null 2>&1 |
    sed -n 's/^Verify return code: \([0-9]*\).*/\1/p' | head -1
}
served_by() { test "$(verify_code "$1")" = 0; }
check "  its certificate is the first CA's" served_by "$WORK/pki1/ca.crt"
not_served_by() { local code; code=$(verify_code "$1"); test -n "$code" && test "$code" != 0; }
check "  (not the second's)" not_served_by "$WORK/pki2/ca.crt"
check "  /readyz ok over plain HTTP (the kubelet's grpc probe speaks no TLS)" \
  test "$(curl -s "http://127.0.0.1:$MPORT/readyz")" = ok
publish v3
wait_log "TLS: the files changed but do not load"
check "a broken renewal is refused and logged with why" \
  grep -q "TLS: the files changed but do not load; the certificate served so far stays in use: .*secret/tls.crt: expected a PEM certificate chain" "$WORK/log"
check "  and the first certificate is still served" served_by "$WORK/pki1/ca.crt"
publish v2
wait_log "TLS: serving the renewed"
check "the mended renewal is served without a restart" served_by "$WORK/pki2/ca.crt"
check "  and logged" grep -q "TLS: serving the renewed $WORK/secret/tls.crt from the next connection" "$WORK/log"
curl -s "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics"
check "  and counted" grep -qx 'tessera_scaler_tls_reloads_total{outcome="renewed"} 1' "$WORK/metrics"
check "  (the refusal too)" grep -qx 'tessera_scaler_tls_reloads_total{outcome="refused"} 1' "$WORK/metrics"
check "  with the new certificate's expiry" grep -qE '^tessera_scaler_tls_certificate_expiry_timestamp_seconds [0-9]{10}$' "$WORK/metrics"
kill -TERM "$PID"
wait "$PID"
check "SIGTERM: exit 0" test $? = 0
PID=
# --check: one poll against a Prometheus (here a stand-in speaking its query API), every query's
# answer and the decision printed, exit 0 when all data is fresh, 2 when some is missing.
check_config() {  # check_config PORT [MORE_PROMETHEUS_KEYS]
  cat <<YAML
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:$1", timeout: 1s${2:+, $2}}
services:
  - {name: chat, server: vllm, model: chat, deployment: chat, namespace: default}
  - name: batch
    queueQuery: 'sum(batch_queue)'
    readyQuery: 'sum(batch_ready)'
    activationQuery: 'sum(gateway_pending{service="batch"})'
YAML
}
fake_prometheus() {  # fake_prometheus ANSWERS_JSON [MORE_PROMETHEUS_KEYS]: starts it (stopping
  # the previous one), sets FAKE and FAKE_PORT, and writes check.yaml for it
  if [ -n "${FAKE:-}" ]; then kill "$FAKE"; wait "$FAKE" 2>/dev/null; fi
  echo "$1" >"$WORK/answers.json"
  rm -f "$WORK/port"
  python3 "$(dirname "${BASH_SOURCE[0]}")/fake_prometheus.py" "$WORK/answers.json" "$WORK/port" &
  FAKE=$!
  for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.05; done
  FAKE_PORT=$(cat "$WORK/port")
  check_config "$FAKE_PORT" "${2:-}" >"$WORK/check.yaml"
}
run_check() {  # run_check ANSWERS_JSON [MORE_PROMETHEUS_KEYS]: --check against a fresh stand-in;
  # its output in out, its exit status in RC
  fake_prometheus "$@"
  "$TESSERA" scaler --config "$WORK/check.yaml" --check >"$WORK/out" 2>&1
  RC=$?
}
# Every series both services read, for the checks that want all of them there.
EVERY_SERIES='"replicas_available": 2, "replicas_unavailable": 0, "num_requests_waiting": 9,
  "num_requests_running": 40, "DCGM_FI_DEV_GPU_UTIL": 0.8, "request_success_total": 5,
  "batch_ready": 0, "batch_queue": 0, "gateway_pending": 3'
run_check "{$EVERY_SERIES}"
check "--check with every series there: exit 0" test "$RC" = 0
check "each query with its answer" grep -A1 -q 'queue       sum(vllm:num_requests_waiting{model_name="chat"})' "$WORK/out"
check "  (the value)" grep -q '^      = 9$' "$WORK/out"
check "the decision it leads to, with why" grep -qE '^  decision    [3-9] replicas: scale up to [3-9]: queue: 9 waiting \+ 40 running' "$WORK/out"
check "at zero the activation query is read, the queue not" \
  bash -c "grep -A1 '^  activation' '$WORK/out' | grep -q '= 3' && grep -A1 'sum(batch_queue)' '$WORK/out' | grep -q 'not read: no replica is ready'"
check "its utilisation read but not used at zero" grep -q '^      = 0.8 (not used while no replica is ready)$' "$WORK/out"
check "and wakes the service" grep -q '^  decision    1 replica: .*activation from zero' "$WORK/out"
check "a service without a throughput query is told what it goes without" \
  bash -c "test \$(grep -c '^  throughput  none: idleness is read from the waiting and running gauges alone' '$WORK/out') = 1 && sed -n '/^batch$/,\$p' '$WORK/out' | grep -q '^  throughput  none: '"
check "range queries checked for the history rebuilt on start" \
  grep -q '^  history     range queries answer (the last 5m in 60 steps; with a sample: ready 60, starting 60, queue 60, running 60, utilization 60, throughput 60); 72h3m rebuilt on start$' "$WORK/out"
check "  every query the backfill asks, the activation query too" \
  grep -q '^  history     range queries answer (the last 5m in 60 steps; with a sample: ready 60, starting 60, queue 60, activation 60, utilization 60); 72h3m rebuilt on start$' "$WORK/out"
# server: sglang reads SGLang's own gauges and counter.
fake_prometheus '{"replicas_available": 2, "replicas_unavailable": 0, "num_queue_reqs": 12,
  "num_running_reqs": 30, "DCGM_FI_DEV_GPU_UTIL": 0.8, "num_requests_total": 4}'
cat >"$WORK/sglang.yaml" <<YAML
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:$FAKE_PORT", timeout: 1s}
services:
  - {name: agents, server: sglang}
YAML
"$TESSERA" scaler --config "$WORK/sglang.yaml" --check >"$WORK/out" 2>&1
check "server: sglang: every query answers, exit 0" test $? = 0
check "  SGLang's queue gauge" grep -q 'queue       sum(sglang:num_queue_reqs{model_name="agents"})' "$WORK/out"
check "  the decision on its gauges" grep -qE '^  decision    [0-9]+ replicas?: .*queue: 12 waiting \+ 30 running' "$WORK/out"
run_check '{"replicas_unavailable": 0, "num_requests_waiting": 9, "num_requests_running": 40,
  "batch_ready": "error"}'
check "a series missing: exit 2" test "$RC" = 2
check "the query named as finding none" grep -A1 -q 'kube_deployment_status_replicas_available{namespace="default",deployment="chat"}' "$WORK/out"
check "  (no series)" grep -q '^      = no series$' "$WORK/out"
check "Prometheus' error shown" grep -q '^      = error: .*parse error at char 5' "$WORK/out"
check "the decision held" grep -q '^  decision    1 replica (data missing: held): holding at 1' "$WORK/out"
check "the activation query not read while readiness is unknown" \
  bash -c "grep -A1 '^  activation' '$WORK/out' | grep -q 'not read: it stands in for the queue only while no replica is ready'"
run_check "{$EVERY_SERIES, \"range\": \"error\"}"
check "range queries refused (a proxy that allows instant ones): still exit 0" test "$RC" = 0
check "  the history named as not rebuilt, with why, once for all" \
  grep -q '^  history     error: every range query (6): Prometheus error (bad_data, HTTP 400): parse error at char 5 (the scaler serves, and rebuilds no history until they answer: it tries again, every 5m at most)$' "$WORK/out"
run_check "{$EVERY_SERIES, \"range\": \"vllm:\"}"
check "three of a service's range queries refused while the others answer: still exit 0" \
  test "$RC" = 0
check "  each refused query named, its service's history not rebuilt" \
  grep -q '^  history     error: sum(vllm:num_requests_waiting{model_name="chat"}): Prometheus error (bad_data, HTTP 400): parse error at char 5; sum(vllm:num_requests_running{model_name="chat"}): Prometheus error (bad_data, HTTP 400): parse error at char 5; sum(rate(vllm:request_success_total{model_name="chat"}\[1m\])): Prometheus error (bad_data, HTTP 400): parse error at char 5; the others answer (the scaler serves, and rebuilds no history until they answer: it tries again, every 5m at most)$' "$WORK/out"
check "  the other service's answers" grep -q '^  history     range queries answer (the last 5m in 60 steps; with a sample: ready 60, starting 60, queue 60, activation 60, utilization 60)' "$WORK/out"
run_check "{$EVERY_SERIES, \"slowRange\": \"vllm:\"}" "backfillTimeout: 1s"
check "a range query past backfillTimeout: still exit 0" test "$RC" = 0
check "  named, and the service's queries after it not asked (each could wait as long)" \
  grep -qE '^  history     error: sum\(vllm:num_requests_waiting\{model_name="chat"\}\): .*; the rest not asked \(each could wait as long\) \(the scaler serves, and rebuilds no history until they answer: it tries again, every 5m at most\)$' "$WORK/out"
kill "$FAKE"; wait "$FAKE" 2>/dev/null
"$TESSERA" scaler --config "$WORK/check.yaml" --check >"$WORK/out" 2>&1
check "Prometheus gone: exit 2" test $? = 2
check "  with the reason" grep -q "= error: .*127.0.0.1:$FAKE_PORT" "$WORK/out"
# --check-scaledobjects, offline: the shipped ScaledObject (as kustomize renders deploy/scaler,
# read from standard input) pairs with the shipped config with nothing to say; one written with
# KEDA's defaults gets its warnings (exit 0), one naming a service the config lacks an error
# (exit 2); input holding no ScaledObject is refused (exit 1).
SRC=${TESSERA_SOURCE_DIR:?}
kubectl kustomize "$SRC/deploy/scaler" |
  "$TESSERA" scaler --config "$SRC/deploy/scaler/scaler.yaml" --check-scaledobjects - >"$WORK/pair.out" 2>&1
check "the shipped pairing: exit 0" test $? = 0
check "and nothing to say of it" grep -q '^default/chat-small -> service chat-small: paired as deploy/scaler/scaledobject.yaml pairs it$' "$WORK/pair.out"
check "the summary" grep -q "^1 ScaledObject, 1 paired with $SRC/deploy/scaler/scaler.yaml: 0 errors, 0 warnings$" "$WORK/pair.out"
cat >"$WORK/so.yaml" <<'YAML'
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat, namespace: ml}
spec:
  scaleTargetRef: {name: chat}
  fallback: {failureThreshold: 3, replicas: 2}
  triggers:
    - type: external
      metadata: {scalerAddress: "tessera-scaler:9095", service: chat}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: typo, namespace: ml}
spec:
  triggers:
    - type: external
      metadata: {scalerAddress: "tessera-scaler:9095", service: caht}
YAML
config "" >"$WORK/pair.yaml"
"$TESSERA" scaler --config "$WORK/pair.yaml" --check-scaledobjects "$WORK/so.yaml" >"$WORK/pair.out" 2>&1
check "a pairing broken: exit 2" test $? = 2
check "KEDA's static fallback is named where it is" grep -q "^  warning $WORK/so.yaml:6:13: documents\[0\].spec.fallback: behavior static (KEDA's default): while Tessera answers UNAVAILABLE" "$WORK/pair.out"
check "an unknown service is an error at its field" grep -q "^  error   $WORK/so.yaml:17:65: documents\[1\].spec.triggers\[0\].metadata.service: service \"caht\" is not in the scaler's config (its services: chat)" "$WORK/pair.out"
check "each object with its count" grep -q '^ml/typo -> service caht: 1 error, ' "$WORK/pair.out"
printf 'apiVersion: apps/v1\nkind: Deployment\n' >"$WORK/none.yaml"
"$TESSERA" scaler --config "$WORK/pair.yaml" --check-scaledobjects "$WORK/none.yaml" >/dev/null 2>"$WORK/err"
check "no ScaledObject: exit 1" test $? = 1
check "saying so" grep -q "none.yaml: no ScaledObject (apiVersion keda.sh/v1alpha1, kind ScaledObject)" "$WORK/err"
finish scaler_test
