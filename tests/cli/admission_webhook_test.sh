#!/usr/bin/env bash
# End-to-end test of `tessera admission-webhook`: served over HTTPS with a throw-away CA, it
# answers an AdmissionReview of a sharing pod with the JSON Patch that adds the env reading the
# extender's bind annotations, refuses a pod with a wrong annotation, answers 400 to what is not
# a review, counts each answer and TLS handshake (a client that does not trust its certificate
# among them) on its --metrics-listen port, with --mps-directory adds the MPS daemon's volumes,
# exits 0 on SIGTERM and 1 on bad flags.
# Usage: admission_webhook_test.sh TESSERA
set -u
TESSERA=${1:?usage: admission_webhook_test.sh path/to/tessera}
ROOT=${TESSERA_SOURCE_DIR:?}
WORK=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(
  cd "$WORK" &&
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca &&
    openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr \
      -subj /CN=tessera-webhook.tessera-system.svc &&
    printf 'subjectAltName=DNS:tessera-webhook.tessera-system.svc,IP:127.0.0.1\n' >ext &&
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 2 \
      -extfile ext &&
    openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 \
      -subj /CN=other-ca
) >"$WORK/openssl.log" 2>&1
check "test certificates made" test -s "$WORK/tls.crt"

"$TESSERA" admission-webhook --listen 127.0.0.1:0 --tls-cert "$WORK/tls.crt" \
  --tls-key "$WORK/tls.key" --metrics-listen 127.0.0.1:0 2>"$WORK/stderr" &
PID=$!
PORT=$(announced_port "$WORK/stderr")
check "announces its port" test -n "$PORT"
MPORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$WORK/stderr")
check "and its metrics port" test -n "$MPORT"
# A client given another CA, as an API server whose caBundle is stale: curl refuses the
# certificate, and the webhook counts the alert it sends.
curl -s --cacert "$WORK/other.crt" -o /dev/null "https://127.0.0.1:$PORT/healthz"
check "a client that does not trust the certificate fails" test $? = 60

post() {  # post FILE -> prints "STATUS BODY", verifying the server against the test CA
  curl -s --cacert "$WORK/ca.crt" -o "$WORK/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "@$1" "https://127.0.0.1:$PORT/mutate"
  echo " $(cat "$WORK/body")"
}
out=$(post "$ROOT/tests/data/extender/admission-review-pod.json")
check "review answered 200" test "${out%% *}" = 200
echo "${out#* }" >"$WORK/response.json"
check "the pod gets the env and the extender's scheduler" python3 - "$WORK/response.json" <<'PY'
import base64, json, sys
r = json.load(open(sys.argv[1]))["response"]
assert r["uid"] == "0df28fbd-5f5f-11e8-bc74-36e6bb280816" and r["allowed"] is True, r
ops = json.loads(base64.b64decode(r["patch"]))
assert {"op": "replace", "path": "/spec/schedulerName", "value": "tessera-scheduler"} in ops, ops
first = [o for o in ops if o["path"] == "/spec/containers/0/env"][0]["value"]
assert first[0] == {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {
    "apiVersion": "v1", "fieldPath": "metadata.annotations['tessera.io/visible-devices']"}}}, first
assert len([o for o in ops if o["path"] == "/spec/containers/1/env/-"]) == 4, ops
PY
python3 - "$ROOT/tests/data/extender/admission-review-pod.json" >"$WORK/bad.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["request"]["object"]["metadata"]["annotations"]["tessera.io/gpu-compute"] = "2.5"
print(json.dumps(r))
PY
out=$(post "$WORK/bad.json")
check "a wrong annotation is refused" grep -q '"allowed":false' <<<"$out"
check "naming the annotation" grep -q 'tessera.io/gpu-compute' <<<"$out"
echo 'not a review' >"$WORK/junk"
out=$(post "$WORK/junk")
check "what is not a review gets 400" test "${out%% *}" = 400
refusal='tessera_webhook_tls_handshake_failures_total{refused_by="client",alert="unknown_ca"} 1'
for _ in $(seq 50); do  # the server counts the refusal on its own thread
  curl -s "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics"
  grep -qxF "$refusal" "$WORK/metrics" && break
  sleep 0.1
done
for line in 'tessera_webhook_reviews_total{outcome="patched"} 1' \
  'tessera_webhook_reviews_total{outcome="refused"} 1' \
  'tessera_webhook_reviews_total{outcome="malformed"} 1' \
  'tessera_webhook_tls_reloads_total{outcome="refused"} 0' \
  'tessera_webhook_tls_handshakes_completed_total 3' "$refusal"; do
  check "metrics: $line" grep -qxF "$line" "$WORK/metrics"
done
expiry=$(date -d "$(openssl x509 -enddate -noout -in "$WORK/tls.crt" | cut -d= -f2)" +%s)
check "metrics: the certificate's notAfter" \
  grep -qx "tessera_webhook_tls_certificate_expiry_timestamp_seconds $expiry" "$WORK/metrics"
check "healthz" bash -c "curl -s --cacert '$WORK/ca.crt' https://127.0.0.1:$PORT/healthz | grep -qx ok"
check "plain HTTP is not served" bash -c "! curl -s -m 5 http://127.0.0.1:$PORT/healthz | grep -q ok"

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
check "exits 0 on SIGTERM" test "$rc" = 0

# With the nodes' MPS daemons (deploy/mps): the same pod also gets their pipes and shared
# memory, and the pipe directory of its GPU's daemon.
"$TESSERA" admission-webhook --listen 127.0.0.1:0 --tls-cert "$WORK/tls.crt" \
  --tls-key "$WORK/tls.key" --mps-directory /run/tessera/mps 2>"$WORK/stderr" &
PID=$!
PORT=$(announced_port "$WORK/stderr")
check "with --mps-directory: says where pods reach the daemon" \
  grep -q 'sharing pods reach the MPS daemons at /run/tessera/mps' "$WORK/stderr"
out=$(post "$ROOT/tests/data/extender/admission-review-pod.json")
echo "${out#* }" >"$WORK/response.json"
check "with --mps-directory: the daemons' volumes, mounts and pipe directory, and the user mark" \
  python3 - "$WORK/response.json" <<'PY'
import base64, json, sys
r = json.load(open(sys.argv[1]))["response"]
ops = json.loads(base64.b64decode(r["patch"]))
vols = [o["value"] for o in ops if o["path"] == "/spec/volumes/-"]
assert {"name": "tessera-mps-shm", "hostPath": {"path": "/run/tessera/mps/shm",
        "type": "Directory"}} in vols, ops
mounts = [o["value"] for o in ops if o["path"] == "/spec/containers/0/volumeMounts/-"]
assert {"name": "tessera-mps-shm", "mountPath": "/dev/shm"} in mounts, mounts
env = [o["value"] for o in ops if o["path"] == "/spec/containers/0/env"][0]
assert {"name": "CUDA_MPS_PIPE_DIRECTORY",
        "value": "/run/tessera/mps/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES)"} in env, env
assert {"op": "add", "path": "/metadata/annotations/tessera.io~1mps-user",
        "value": "image:vllm/vllm-openai:latest"} in ops, ops
# The sidecar (nginx:1.27, so maybe another user) gets the share's env, not the daemon's pipes.
side = [o["value"]["name"] for o in ops if o["path"] == "/spec/containers/1/env/-"]
assert "NVIDIA_VISIBLE_DEVICES" in side and "CUDA_MPS_PIPE_DIRECTORY" not in side, side
assert not [o for o in ops if o["path"].startswith("/spec/containers/1/volumeMounts")], ops
assert any("container metrics-proxy runs as image:nginx:1.27" in w for w in r["warnings"]), r
PY
check "with --mps-directory: the pod whose sidecar is left outside MPS is named on stderr" \
  grep -q 'tessera admission-webhook: pod inference/chat-small-7d9f8b6c5-\*: metrics-proxy (image:nginx:1.27) runs as another user than the main container and is left outside MPS' "$WORK/stderr"
# kubectl debug on a running sharing pod: the ephemeral container it adds gets the share's env
# (its CUDA image would see every GPU of the node), the rest of the pod is left alone.
out=$(post "$ROOT/tests/data/extender/admission-review-ephemeral.json")
echo "${out#* }" >"$WORK/response.json"
check "with --mps-directory: an ephemeral container added by kubectl debug gets the share" \
  python3 - "$WORK/response.json" <<'PY'
import base64, json, sys
r = json.load(open(sys.argv[1]))["response"]
assert r["uid"] == "9b3e5a71-2c4d-4e6f-8a0b-1c2d3e4f5a6b" and r["allowed"] is True, r
ops = json.loads(base64.b64decode(r["patch"]))
assert [o["path"] for o in ops] == ["/spec/ephemeralContainers/1/env"], ops
names = [e["name"] for e in ops[0]["value"]]
assert names == ["NVIDIA_VISIBLE_DEVICES", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "TESSERA_GPU_MEMORY_FRACTION"], names
assert any("ephemeral container debugger-7xk2q runs as image:nvidia/cuda" in w
           for w in r["warnings"]), r
PY
check "with --mps-directory: and the pod it was added to is named on stderr" \
  grep -q 'pod inference/chat-small-7d9f8b6c5-x2x9w: debugger-7xk2q (image:nvidia/cuda:12.4.1-base-ubuntu22.04) runs as another user' "$WORK/stderr"
kill -TERM "$PID"
wait "$PID"
PID=""
"$TESSERA" admission-webhook --listen 127.0.0.1:0 --tls-cert "$WORK/tls.crt" \
  --tls-key "$WORK/tls.key" --mps-directory run/mps 2>"$WORK/err"
check "a relative --mps-directory exits 1" test $? = 1
check "and says what was expected" \
  grep -q -- '--mps-directory: MPS directory "run/mps": expected an absolute path' "$WORK/err"

"$TESSERA" admission-webhook --listen 127.0.0.1:0 --tls-cert "$WORK/tls.crt" \
  --tls-key "$WORK/ca.key" 2>"$WORK/err"
check "a key that is not the certificate's exits 1" test $? = 1
check "and says so" grep -q 'cannot load a PEM certificate chain and its private key' "$WORK/err"
"$TESSERA" admission-webhook --listen nowhere --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" \
  2>"$WORK/err"
check "bad --listen exits 1" test $? = 1
"$TESSERA" admission-webhook --listen 127.0.0.1:0 2>"$WORK/err"
check "no certificate exits non-zero" test $? != 0

finish admission_webhook_test
