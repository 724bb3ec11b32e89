#!/usr/bin/env bash
# Renders every kustomization under deploy/ with `kubectl kustomize` and checks what each must
# contain; the shipped ScalerConfig must load in `tessera scaler`. Usage: deploy_render_test.sh TESSERA
set -u
TESSERA=${1:?usage: deploy_render_test.sh path/to/tessera}
ROOT=${TESSERA_SOURCE_DIR:?}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
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
for verb in 'filterVerb: filter' 'prioritizeVerb: prioritize' 'bindVerb: bind' 'preemptVerb: preempt' \
  'nodeCacheCapable: true' 'urlPrefix: "http://127.0.0.1:8888"'; do
  check "extender: $verb" grep -q "$verb" "$R"
done
cm=$(sed -n 's/^  name: \(tessera-scheduler-config-[a-z0-9]*\)$/\1/p' "$R" | head -1)
check "config map has a content hash" test -n "$cm"
check "deployment mounts that config map" grep -q "name: $cm" <(sed -n '/kind: Deployment/,$p' "$R")
check "extender container runs scheduler-extender" grep -q -- '- scheduler-extender' "$R"
check "extender: metrics on their own port" grep -q -- '--metrics-listen=0.0.0.0:9097' "$R"
check "extender: and says where" grep -q 'prometheus.io/port: "9097"' "$R"
check "extender may create bindings" grep -q 'pods/binding' "$R"
check "extender may patch pods" grep -q -- '- patch' "$R"
check "extender may watch pods and nodes, list PDBs and preempt" python3 -c '
import sys
role = [d for d in open(sys.argv[1]).read().split("\n---\n")
        if "kind: ClusterRole\n" in d and "  name: tessera-scheduler-extender\n" in d]
rules = role[0].split("\n- apiGroups:")[1:]
assert any("\n  - pods\n" in r and "\n  - watch" in r for r in rules), rules
assert any("\n  - nodes\n" in r and "\n  - watch" in r for r in rules), rules
assert any("\n  - poddisruptionbudgets\n" in r and "\n  - list" in r for r in rules), rules
# Share preemption: delete the victims, nominate the preemptor and mark the victims.
assert any("\n  - pods\n" in r and "\n  - delete" in r for r in rules), rules
assert any("\n  - pods/status\n" in r and "\n  - patch" in r for r in rules), rules
assert any("\n  - events\n" in r and "\n  - create" in r for r in rules), rules' "$R"
check "extender: share preemption on" grep -q -- '--preempt-shares=2' "$R"
# A rolling update would run two extenders, the new one missing the old one's last binds.
check "extender: one replica, recreated on update" grep -q 'type: Recreate' <(sed -n '/kind: Deployment/,$p' "$R")
check "everything in tessera-system" test "$(grep -c 'namespace: tessera-system' "$R")" -ge 5

S="$WORK/scaler.yaml"
check "scaler: ScaledObject with an external trigger" grep -q 'type: external' "$S"
check "scaler: metric type AverageValue" grep -q 'metricType: AverageValue' "$S"
check "scaler: the service key" grep -q 'service: chat-small' "$S"
check "scaler: HPA windows off" grep -q 'stabilizationWindowSeconds: 0' "$S"
check "scaler: fallback replicas" grep -q 'failureThreshold: 3' "$S"
# KEDA's default (static) fallback would take a loaded service down to 2 in a Prometheus outage.
check "scaler: the fallback never below the replicas there" \
  grep -q 'behavior: currentReplicasIfHigher' <(sed -n '/^  fallback:/,/^  [a-z]/p' "$S")
check "scaler: runs tessera scaler" grep -q -- '- scaler' "$S"
# Two replicas that KEDA's round_robin channel reaches each by its address, one at a time drained.
check "scaler: two replicas" grep -q 'replicas: 2' <(sed -n '/^kind: Deployment/,/^---/p' "$S")
check "scaler: a headless Service" grep -q 'clusterIP: None' <(sed -n '/^kind: Service$/,/^---/p' "$S")
check "scaler: a PodDisruptionBudget keeps one" \
  grep -q 'minAvailable: 1' <(sed -n '/^kind: PodDisruptionBudget/,/^---/p' "$S")
check "scaler: the replicas ask Prometheus for the same instants" grep -q 'queryOffset: 1s' "$S"
check "scaler: serves its metrics" grep -q -- '--metrics-listen=0.0.0.0:9096' "$S"
check "scaler: and says where" grep -q 'prometheus.io/port: "9096"' "$S"
check "scaler: its own service account, for a managed Prometheus' cloud identity" \
  grep -q 'serviceAccountName: tessera-scaler' "$S"
check "scaler: the service account is shipped, without a mounted API token" \
  bash -c "grep -q '^kind: ServiceAccount' '$S' && grep -q 'automountServiceAccountToken: false' '$S'"
# The ConfigMap's scaler.yaml, as rendered, must start the scaler.
python3 - "$S" >"$WORK/scaler-config.yaml" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
i = next(n for n, l in enumerate(lines) if l.strip() == "scaler.yaml: |")
out = []
for l in lines[i + 1:]:
    if l.startswith("    ") or not l.strip():
        out.append(l[4:])
    else:
        break
print("\n".join(out))
PY
timeout 10 "$TESSERA" scaler --config "$WORK/scaler-config.yaml" --listen 127.0.0.1:0 \
  2>"$WORK/scaler.err" &
pid=$!
for _ in $(seq 50); do grep -q 'listening on' "$WORK/scaler.err" && break; sleep 0.1; done
kill "$pid" 2>/dev/null
wait "$pid"
check "scaler: the shipped config loads" grep -q 'listening on' "$WORK/scaler.err"

N="$WORK/node-agent.yaml"
check "node-agent: a DaemonSet" grep -q 'kind: DaemonSet' "$N"
check "node-agent: runs node-agent on a Unix socket" grep -q -- '--listen=unix:///run/tessera/agent.sock' "$N"
check "node-agent: cache on a hostPath" grep -q 'path: /var/lib/tessera/cache' "$N"
check "node-agent: its own service account (IRSA / Pod Identity)" grep -q 'serviceAccountName: tessera-node-agent' "$N"
check "node-agent: and the ServiceAccount itself" grep -q 'kind: ServiceAccount' "$N"
check "node-agent: example init container fetches via the agent" grep -q -- '--agent=unix:///run/tessera/agent.sock' "$N"
check "node-agent: a sidecar holds the lease" grep -q -- '- --hold' "$N"
check "node-agent: the server mounts the cache read-only" \
  python3 -c 'import sys; t=open(sys.argv[1]).read(); i=t.index("name: vllm"); sys.exit(0 if "readOnly: true" in t[i:] else 1)' "$N"

G="$WORK/shared-gpu-example.yaml"
check "shared-gpu-example: scheduled by the extender's profile" grep -q 'schedulerName: tessera-scheduler' "$G"
check "shared-gpu-example: asks the device plugin for no GPU" bash -c '! grep -q "nvidia.com/gpu:" "$1"' _ "$G"
check "shared-gpu-example: the GPU comes from the bind annotation" \
  grep -q "fieldPath: metadata.annotations\['tessera.io/visible-devices'\]" "$G"

W="$WORK/admission-webhook.yaml"
check "webhook: a MutatingWebhookConfiguration for pod CREATE" grep -q 'kind: MutatingWebhookConfiguration' "$W"
check "webhook: and the ephemeral containers kubectl debug adds to them" \
  bash -c "grep -B3 -- '- pods/ephemeralcontainers' '$W' | grep -q -- '- UPDATE'"
check "webhook: only pods that ask for a share are sent" grep -q "'tessera.io/gpu-memory' in object.metadata.annotations" "$W"
check "webhook: refuses sharing pods while it cannot answer" grep -q 'failurePolicy: Fail' "$W"
check "webhook: review v1, no side effects" bash -c "grep -q 'sideEffects: None' '$W' && grep -q -- '- v1' '$W'"
check "webhook: served by the Service's /mutate" grep -q 'path: /mutate' "$W"
check "webhook: CA injected from its Certificate" grep -q 'cert-manager.io/inject-ca-from: tessera-system/tessera-webhook' "$W"
check "webhook: runs admission-webhook with the Secret's files" \
  bash -c "grep -q -- '- admission-webhook' '$W' && grep -q -- '--tls-cert=/etc/tessera/tls/tls.crt' '$W' && grep -q 'secretName: tessera-webhook-tls' '$W'"
check "webhook: the certificate names the Service" grep -q 'tessera-webhook.tessera-system.svc$' "$W"
check "webhook: two replicas" grep -q 'replicas: 2' "$W"
check "webhook: metrics on the scraped port" \
  bash -c "grep -q -- '--metrics-listen=0.0.0.0:9098' '$W' && grep -q 'prometheus.io/port: \"9098\"' '$W'"

check "webhook: no MPS directory unless deploy/mps is applied" bash -c "! grep -q -- '--mps-directory' '$W'"

M="$WORK/mps.yaml"
check "mps: includes the webhook, told where the daemons are" \
  bash -c "grep -q -- '- admission-webhook' '$M' && grep -q -- '- --mps-directory=/run/tessera/mps' '$M'"
check "mps: a DaemonSet on the GPU nodes" bash -c "grep -q 'kind: DaemonSet' '$M' &&
  grep -q 'nvidia.com/gpu.present: \"true\"' '$M'"
check "mps: never rolled out by itself (a restart ends the sharing pods' contexts)" \
  grep -q 'type: OnDelete' "$M"
check "mps: the daemons' directory is the webhook's" python3 - "$M" <<'PY'
import re, sys
docs = open(sys.argv[1]).read().split("\n---\n")
ds = [d for d in docs if "kind: DaemonSet\n" in d][0]
dirs = set(re.findall(r"- --mps-directory=(\S+)", open(sys.argv[1]).read()))
assert dirs == {"/run/tessera/mps"}, dirs
assert "name: TESSERA_MPS_DIRECTORY\n          value: /run/tessera/mps\n" in ds, ds
assert "path: /run/tessera/mps\n" in ds and "path: /run/tessera/mps/shm\n" in ds, ds
assert "mountPath: /dev/shm\n" in ds, ds
# The shared memory is mounted by a privileged init container, visible on the host.
assert "mountPropagation: Bidirectional" in ds, ds
PY
cm=$(sed -n 's/^  name: \(tessera-mps-control-[a-z0-9]*\)$/\1/p' "$M" | head -1)
check "mps: the script's ConfigMap has a content hash" test -n "$cm"
check "mps: the DaemonSet runs it and probes it" bash -c "grep -q 'name: $cm' '$M' &&
  grep -q -- '- /opt/tessera/mps-control.sh' '$M' && grep -q -- '- ready' '$M'"
check "mps: the ConfigMap holds deploy/mps/mps-control.sh" grep -q 'tessera-mps-control: \$\*' "$M"

finish deploy_render_test
