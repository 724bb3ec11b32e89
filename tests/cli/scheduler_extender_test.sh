#!/usr/bin/env bash
# End-to-end test of the `tessera scheduler-extender` binary: it restores its state from
# `kubectl get nodes/pods -o json` files (a restart), serves filter/prioritize/preempt on a free
# port, answers 400 to a malformed request, refuses to bind without an API, and exits 0 on SIGTERM;
# then, against a stand-in API server (fake_kube_api.py), preempts for a pod only GPU share keeps
# out (--preempt-shares).
# Usage: scheduler_extender_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: scheduler_extender_test.sh path/to/tessera}
DATA=${TESSERA_SOURCE_DIR:?}/tests/data/extender
WORK=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

python3 - "$DATA" "$WORK" <<'PY'
import json, sys
data, work = sys.argv[1], sys.argv[2]
nodes = [json.load(open(f"{data}/{n}.json")) for n in ("node-h100", "node-l4", "node-cpu")]
json.dump({"apiVersion": "v1", "kind": "List", "items": nodes}, open(f"{work}/nodes.json", "w"))
pods = []
# Seven running pods fill GPU 0..6 of gpu-h100-1 completely and GPU 7 to 700 milli.
for i in range(8):
    p = json.load(open(f"{data}/pod-share.json"))
    p["metadata"]["name"] = f"running-{i}"
    p["metadata"]["uid"] = f"uid-running-{i}"
    p["spec"]["nodeName"] = "gpu-h100-1"
    p["status"]["phase"] = "Running"
    milli = 700 if i == 7 else 1000
    p["metadata"]["annotations"]["tessera.io/gpu-assignment"] = json.dumps(
        {"node": "gpu-h100-1", "gpus": [i], "milliPerGpu": milli})
    pods.append(p)
done = json.load(open(f"{data}/pod-share.json"))
done["metadata"]["name"], done["metadata"]["uid"] = "finished", "uid-finished"
done["spec"]["nodeName"], done["status"]["phase"] = "gpu-l4-1", "Succeeded"
done["metadata"]["annotations"]["tessera.io/gpu-assignment"] = json.dumps(
    {"node": "gpu-l4-1", "gpus": [0], "milliPerGpu": 1000})
pods.append(done)
json.dump({"apiVersion": "v1", "kind": "PodList", "items": pods}, open(f"{work}/pods.json", "w"))
PY

# start_from_files PODS STDERR: the extender restored from nodes.json and PODS, outside a pod;
# sets PID, PORT (its own) and MPORT (--metrics-listen).
start_from_files() {
  env -u KUBERNETES_SERVICE_HOST "$TESSERA" scheduler-extender --listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 --nodes "$WORK/nodes.json" --pods "$1" 2>"$2" &
  PID=$!
  PORT=$(announced_port "$2")
  MPORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$2")
}

start_from_files "$WORK/pods.json" "$WORK/stderr"
check "announces its port" test -n "$PORT"
check "restored 8 running pods, not the finished one" grep -q '8 pods holding GPUs restored' "$WORK/stderr"
# --metrics-listen: /metrics alone on its own port (the extender's own stays private).
check "announces its metrics port" test -n "$MPORT"
check "metrics: the restored pods" bash -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -qx 'tessera_extender_pods 8'"
check "metrics: 7.7 GPUs allocated" bash -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -qx 'tessera_extender_gpu_milli{state=\"allocated\"} 7700'"
check "no extender verb on the metrics port" \
  test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "http://127.0.0.1:$MPORT/bind")" = 404

post() {  # post VERB FILE -> prints "STATUS BODY"
  python3 - "$PORT" "$1" "$2" <<'PY'
import sys, urllib.request, urllib.error
port, verb, path = sys.argv[1:4]
req = urllib.request.Request(f"http://127.0.0.1:{port}/{verb}", data=open(path, "rb").read(),
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
PY
}

# 0.4 of a GPU: the H100 node has only 300 milli left on GPU 7, so only the L4 fits.
python3 - "$DATA" "$WORK" <<'PY'
import json, sys
data, work = sys.argv[1], sys.argv[2]
pod = json.load(open(f"{data}/pod-share.json"))
pod["metadata"]["annotations"]["tessera.io/gpu-memory"] = "8Gi"
pod["metadata"]["annotations"]["tessera.io/gpu-compute"] = "0.4"
json.dump({"pod": pod, "nodenames": ["gpu-h100-1", "gpu-l4-1", "cpu-1"]},
          open(f"{work}/args.json", "w"))
json.dump({"podName": "x", "podNamespace": "inference", "podUID": "u", "node": "gpu-l4-1"},
          open(f"{work}/bind.json", "w"))
open(f"{work}/bad.json", "w").write('{"pod": ')
PY
out=$(post filter "$WORK/args.json")
check "filter answers 200" test "${out%% *}" = 200
check "filter keeps only the L4" python3 -c '
import json, sys
r = json.loads(sys.argv[1].split(" ", 1)[1])
assert r["nodenames"] == ["gpu-l4-1"], r
assert "gpu-h100-1" in r["failedNodes"] and "cpu-1" in r["failedAndUnresolvableNodes"], r' "$out"
out=$(post prioritize "$WORK/args.json")
check "prioritize scores every node" python3 -c '
import json, sys
r = json.loads(sys.argv[1].split(" ", 1)[1])
assert [h["host"] for h in r] == ["gpu-h100-1", "gpu-l4-1", "cpu-1"], r
assert all(0 <= h["score"] <= 10 for h in r), r' "$out"
# Preemption (preemptVerb): the same 0.4 at priority 1000 against the running pods' 0. GPU 7's
# 700-milli pod, the newest, makes room; the L4 never could hold more than it does (left out).
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
args = json.load(open(f"{work}/args.json"))
args["pod"]["spec"]["priority"] = 1000
json.dump({"Pod": args["pod"], "NodeNameToMetaVictims": {
    "gpu-h100-1": {"Pods": [], "NumPDBViolations": 0},
    "cpu-1": {"Pods": [{"UID": "uid-cpu-pod"}], "NumPDBViolations": 0}}},
    open(f"{work}/preempt.json", "w"))
PY
out=$(post preempt "$WORK/preempt.json")
check "preempt answers 200" test "${out%% *}" = 200
check "preempt adds the GPU 7 pod and leaves the CPU node out" python3 -c '
import json, sys
r = json.loads(sys.argv[1].split(" ", 1)[1])
assert r == {"NodeNameToMetaVictims": {"gpu-h100-1": {"Pods": [{"UID": "uid-running-7"}],
                                                      "NumPDBViolations": 0}}}, r' "$out"
out=$(post filter "$WORK/bad.json")
check "malformed request gets 400" test "${out%% *}" = 400
check "with a message" grep -q 'invalid JSON' <<<"$out"
out=$(post bind "$WORK/bind.json")
check "bind without an API is refused in the result" grep -q 'no Kubernetes API' <<<"$out"

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
check "exits 0 on SIGTERM" test "$rc" = 0

# Share preemption end to end (--preempt-shares 1), against a stand-in API server: a pod of
# priority 1000 that only GPU share keeps out (every GPU of gpu-h100-1 900 milli full, held at
# priority 0) is nominated to the node, and the holder that started last is marked as
# preempted and deleted, by the running binary's own loop.
python3 - "$DATA" "$WORK" <<'PY'
import json, sys
data, work = sys.argv[1], sys.argv[2]
pods = []
for i in range(8):
    p = json.load(open(f"{data}/pod-share.json"))
    p["metadata"]["name"], p["metadata"]["uid"] = f"holder-{i}", f"uid-holder-{i}"
    p["spec"]["nodeName"], p["spec"]["priority"] = "gpu-h100-1", 0
    p["status"]["phase"], p["status"]["startTime"] = "Running", f"2026-12-01T10:{30 - i}:00Z"
    p["metadata"]["annotations"]["tessera.io/gpu-assignment"] = json.dumps(
        {"node": "gpu-h100-1", "gpus": [i], "milliPerGpu": 900})
    pods.append(p)
preemptor = json.load(open(f"{data}/pod-nominated.json"))
del preemptor["status"]["nominatedNodeName"]
pods.append(preemptor)
json.dump({"nodes": [json.load(open(f"{data}/node-h100.json"))], "pods": pods},
          open(f"{work}/api-state.json", "w"))
json.dump({"pod": preemptor, "nodenames": ["gpu-h100-1"]}, open(f"{work}/blocked.json", "w"))
PY
python3 "$(dirname "${BASH_SOURCE[0]}")/fake_kube_api.py" "$WORK/api-state.json" \
  "$WORK/api-log.jsonl" "$WORK/api-port" &
FAKE=$!
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; kill "$FAKE" 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/api-port" ] && break; sleep 0.1; done
# The user's token comes from an exec credential plugin (as EKS, GKE and AKS kubeconfigs have
# it), which logs each run.
# shellcheck disable=SC2016 # $PLUGIN_LOG is the plugin's, expanded when it runs
printf '%s\n' '#!/bin/sh' 'echo run >> "$PLUGIN_LOG"' \
  'echo "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"test-token\"}}"' \
  >"$WORK/get-token"
chmod +x "$WORK/get-token"
printf '%s\n' "apiVersion: v1" "kind: Config" "current-context: test" \
  "clusters: [{name: fake, cluster: {server: \"http://127.0.0.1:$(cat "$WORK/api-port")\"}}]" \
  "contexts: [{name: test, context: {cluster: fake, user: sched}}]" \
  "users: [{name: sched, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./get-token, interactiveMode: Never, env: [{name: PLUGIN_LOG, value: '$WORK/plugin-runs'}]}}}]" \
  >"$WORK/kubeconfig"
env -u KUBERNETES_SERVICE_HOST "$TESSERA" scheduler-extender --listen 127.0.0.1:0 \
  --kubeconfig "$WORK/kubeconfig" --preempt-shares 1 --resync 30 2>"$WORK/stderr-preempt" &
PID=$!
PORT=$(announced_port "$WORK/stderr-preempt")
check "share preemption: extender up against the API" test -n "$PORT"
check "share preemption: the holders restored from the API" \
  grep -q '8 pods holding GPUs restored' "$WORK/stderr-preempt"
out=$(post filter "$WORK/blocked.json")
check "share preemption: the pod is refused for GPU room" python3 -c '
import json, sys
r = json.loads(sys.argv[1].split(" ", 1)[1])
assert r["nodenames"] == [] and "gpu-h100-1" in r["failedNodes"], r' "$out"
for _ in $(seq 100); do grep -q 'preempt: ' "$WORK/stderr-preempt" && break; sleep 0.1; done
check "share preemption: logged" grep -q 'preempt: inference/chat-small-7d9f8b6c5-x2x4q (priority 1000) nominated to gpu-h100-1; evicting inference/holder-0 for their GPU share' "$WORK/stderr-preempt"
check "share preemption: nominated, then the victim marked, deleted and given an event" python3 -c '
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
calls = [c for c in calls if c["method"] != "GET"]
base = "/api/v1/namespaces/inference/pods/"
assert [(c["method"], c["path"]) for c in calls] == [
    ("PATCH", base + "chat-small-7d9f8b6c5-x2x4q/status"),
    ("PATCH", base + "holder-0/status"),
    ("DELETE", base + "holder-0"),
    ("POST", "/api/v1/namespaces/inference/events")], calls
nominate, mark, delete, event = (json.loads(c["body"]) for c in calls)
assert event["reason"] == "Preempted" and event["involvedObject"]["name"] == "holder-0", event
assert calls[0]["content_type"] == "application/merge-patch+json", calls[0]
assert nominate == {"metadata": {"uid": "1f2e3d4c-5b6a-4789-8a7b-6c5d4e3f2a10"},
                    "status": {"nominatedNodeName": "gpu-h100-1"}}, nominate
assert calls[1]["content_type"] == "application/strategic-merge-patch+json", calls[1]
c = mark["status"]["conditions"]
assert mark["metadata"]["uid"] == "uid-holder-0" and len(c) == 1, mark
assert (c[0]["type"], c[0]["status"], c[0]["reason"]) == (
    "DisruptionTarget", "True", "PreemptionByScheduler"), c
assert delete == {"apiVersion": "v1", "kind": "DeleteOptions",
                  "preconditions": {"uid": "uid-holder-0"}}, delete' "$WORK/api-log.jsonl"
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
check "share preemption: exits 0 on SIGTERM" test "$rc" = 0
check "the exec plugin ran once for every API call" test "$(wc -l <"$WORK/plugin-runs")" = 1
# A plugin whose login has expired: the extender cannot list the pods it must restore, and stops
# with the plugin's own words.
printf '%s\n' '#!/bin/sh' 'echo "error: the SSO session has expired; run aws sso login" >&2' \
  'exit 255' >"$WORK/get-token"
env -u KUBERNETES_SERVICE_HOST "$TESSERA" scheduler-extender --listen 127.0.0.1:0 \
  --kubeconfig "$WORK/kubeconfig" 2>"$WORK/err"
check "a failing exec plugin at start: exit 1" test $? = 1
check "and the error has the plugin's words" grep -q "initial sync from the API: .*exec plugin $WORK/./get-token of kubeconfig user \"sched\": exit status 255: error: the SSO session has expired; run aws sso login" "$WORK/err"
kill "$FAKE" 2>/dev/null

# Under MPS (pods the webhook marked with tessera.io/mps-user), a GPU shared by pods of two users,
# bound outside the extender's rule, is named at start and counted in the metrics.
python3 - "$DATA" "$WORK" <<'PY'
import json, sys
data, work = sys.argv[1], sys.argv[2]
pods = []
for i, uid in enumerate([0, 1000]):
    p = json.load(open(f"{data}/pod-share.json"))
    p["metadata"]["name"], p["metadata"]["uid"] = f"mps-{i}", f"uid-mps-{i}"
    p["metadata"]["annotations"]["tessera.io/mps-user"] = str(uid)
    p["spec"]["securityContext"] = {"runAsUser": uid}
    p["spec"]["nodeName"], p["status"]["phase"] = "gpu-h100-1", "Running"
    p["metadata"]["annotations"]["tessera.io/gpu-assignment"] = json.dumps(
        {"node": "gpu-h100-1", "gpus": [2], "milliPerGpu": 300})
    pods.append(p)
json.dump({"apiVersion": "v1", "kind": "PodList", "items": pods}, open(f"{work}/mps-pods.json", "w"))
PY
start_from_files "$WORK/mps-pods.json" "$WORK/stderr-mps"
check "MPS: a GPU shared by two users is named at start" grep -q \
  'GPU 2 of node gpu-h100-1 is shared by MPS clients of users 0, 1000 (pods inference/mps-0, inference/mps-1)' \
  "$WORK/stderr-mps"
check "MPS: and counted" bash -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -qx 'tessera_extender_mps_mixed_user_gpus 1'"
curl -s "http://127.0.0.1:$PORT/state?node=gpu-h100-1" >"$WORK/state.json"
check "state: GPU 2's two pods, their users and what is left" python3 - "$WORK/state.json" <<'PY'
import json, sys
gpu = json.load(open(sys.argv[1]))["nodes"][0]["gpus"][2]
assert gpu["freeMilli"] == 400, gpu
assert [(p["pod"], p["user"]) for p in gpu["pods"]] == [
    ("inference/mps-0", "0"), ("inference/mps-1", "1000")], gpu
PY
check "state: not on the metrics port" \
  test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/state")" = 404
kill -TERM "$PID"
wait "$PID"
PID=""

# Bad inputs: exit 1 with the file named.
echo '{"items": [{"metadata": {"name": 5}}]}' >"$WORK/badnodes.json"
"$TESSERA" scheduler-extender --listen 127.0.0.1:0 --nodes "$WORK/badnodes.json" 2>"$WORK/err"
check "bad node list exits 1" test $? = 1
check "names the file and field" grep -q 'badnodes.json: items\[0\].metadata.name' "$WORK/err"
"$TESSERA" scheduler-extender --listen nowhere 2>"$WORK/err"
check "bad --listen exits 1" test $? = 1
# --resync beyond a day, negative or not a number: a watch timeout from it would overflow.
for v in -1 nan inf 1e9; do
  "$TESSERA" scheduler-extender --listen 127.0.0.1:0 --resync "$v" 2>"$WORK/err"
  check "--resync $v exits 1" test $? = 1
  check "--resync $v says what is expected" grep -q 'expected seconds from 0 (no lists, no watch) to 86400' "$WORK/err"
  "$TESSERA" scheduler-extender --listen 127.0.0.1:0 --node-resync "$v" 2>"$WORK/err"
  check "--node-resync $v exits 1" test $? = 1
  check "--node-resync $v says what is expected" grep -q -- "--node-resync .*: expected seconds from 0 (nodes listed with --resync, not watched) to 86400" "$WORK/err"
  "$TESSERA" scheduler-extender --listen 127.0.0.1:0 --preempt-shares "$v" 2>"$WORK/err"
  check "--preempt-shares $v exits 1" test $? = 1
  check "--preempt-shares $v says what is expected" grep -q -- "--preempt-shares .*: expected seconds from 0 (off) to 3600" "$WORK/err"
done
# Share preemption deletes pods through the API and follows their end through the pod watch.
"$TESSERA" scheduler-extender --listen 127.0.0.1:0 --preempt-shares 2 2>"$WORK/err"
check "--preempt-shares without the API exits 1" test $? = 1
check "and says what it needs" grep -q -- "--preempt-shares needs the API (--kubeconfig or in a pod) and --resync above 0" "$WORK/err"

finish scheduler_extender_test
