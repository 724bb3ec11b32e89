#!/usr/bin/env bash
# One NVIDIA MPS control daemon per GPU of the node, for the pods that share GPUs through Tessera
# (docs/scheduler-extender.md, "Enforcing shares with MPS"). GPU i's daemon sees that GPU only
# (CUDA_VISIBLE_DEVICES=its UUID), keeps its pipes in $DIR/pipes/gpu-i and its logs in
# $DIR/logs/gpu-i. The admission webhook (--mps-directory=$DIR) mounts $DIR/pipes into each
# container of a sharing pod and points it at $DIR/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES): the daemon
# of the GPU the extender assigned, where the pod sees one GPU, as device 0, and
# CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=... and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE apply to it. GPUs in
# MIG mode get no daemon. $DIR/pipes exists only while this script runs its daemons (made when
# they start, removed when they stop), so a sharing pod does not start on the node meanwhile
# (the kubelet waits for its hostPath volume) rather than start unenforced.
#
#   mps-control.sh        start the daemons and run until SIGTERM (each daemon is told to quit,
#                         exit 0). A daemon that exits is started again, on its own: the other
#                         GPUs' clients keep their daemons (its own clients lost their MPS server
#                         with it); TESSERA_MPS_RESTART_DELAY (10) seconds later if it had run
#                         less long than that.
#   mps-control.sh ready  exit 0 when every daemon started answers on its pipes (readiness probe)
#
# Env: TESSERA_MPS_DIRECTORY (default /run/tessera/mps), TESSERA_MPS_RESTART_DELAY. Needs nvidia-smi and
# nvidia-cuda-mps-control (the NVIDIA Container Toolkit mounts both with the utility and compute
# capabilities).
set -uo pipefail
dir=${TESSERA_MPS_DIRECTORY:-/run/tessera/mps}
delay=${TESSERA_MPS_RESTART_DELAY:-10}  # seconds before restarting a daemon that ran less long
started="$dir/daemons"  # the pipe directories of the daemons running, one per line

log() { echo "tessera-mps-control: $*" >&2; }

ask() {  # ask PIPE_DIRECTORY COMMAND: one command to that daemon, its answer on stdout
  echo "$2" | CUDA_MPS_PIPE_DIRECTORY=$1 nvidia-cuda-mps-control
}

if [ "${1:-}" = ready ]; then
  [ -s "$started" ] || exit 1
  while read -r pipe; do
    ask "$pipe" get_default_active_thread_percentage >/dev/null || exit 1
  done <"$started"
  exit 0
elif [ $# -gt 0 ]; then
  log "usage: mps-control.sh [ready]"
  exit 2
fi

pipes=()   # by slot: GPU i's pipe directory
uuids=()
logs=()
pids=()    # by slot: its daemon's pid
starts=()  # by slot: when it was started (seconds since the epoch)
stop() {
  rm -f "$started"
  local pipe
  for pipe in "${pipes[@]}"; do ask "$pipe" quit >/dev/null 2>&1 || true; done
  wait
  rm -rf "$dir/pipes"  # new sharing pods wait for the daemons to be back
}
trap 'log "SIGTERM: telling each daemon to quit"; stop; exit 0' TERM INT

start() {  # start SLOT: (re)start that GPU's daemon on clean pipes
  local k=$1
  # An earlier daemon's pipes: a client must find this daemon's or none.
  find "${pipes[k]}" -mindepth 1 -delete
  CUDA_VISIBLE_DEVICES=${uuids[k]} CUDA_MPS_PIPE_DIRECTORY=${pipes[k]} \
    CUDA_MPS_LOG_DIRECTORY=${logs[k]} nvidia-cuda-mps-control -f &
  pids[k]=$!
  starts[k]=$(date +%s)
  log "GPU ${uuids[k]}: MPS control daemon (pid $!), pipes in ${pipes[k]}"
}

# Pipes of daemons that are gone (this container's last run): clients must find running daemons'
# pipes or none.
rm -rf "$started" "$dir/pipes"
if ! gpus=$(nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv,noheader); then
  log "nvidia-smi failed: no GPU visible to this container (NVIDIA_VISIBLE_DEVICES=all and the NVIDIA runtime are needed)"
  exit 1
fi
while IFS=', ' read -r index uuid mig; do
  [ -n "$index" ] || continue
  if [ "$mig" = Enabled ]; then
    log "GPU $index ($uuid) is in MIG mode: no MPS daemon for it"
    continue
  fi
  k=${#pipes[@]}
  pipes[k]="$dir/pipes/gpu-$index"
  logs[k]="$dir/logs/gpu-$index"
  uuids[k]=$uuid
  mkdir -p "${pipes[k]}" "${logs[k]}"
  start "$k"
done <<<"$gpus"
if [ ${#pipes[@]} -eq 0 ]; then
  log "no GPU outside MIG mode on this node: no MPS daemon to run"
  exit 1
fi
printf '%s\n' "${pipes[@]}" >"$started.tmp" && mv "$started.tmp" "$started"

while :; do
  wait -n -p exited "${pids[@]}"
  rc=$?
  for k in "${!pids[@]}"; do
    [ "${pids[k]}" = "$exited" ] || continue
    ran=$(($(date +%s) - starts[k]))
    log "GPU ${uuids[k]}: MPS control daemon exited (status $rc) after $ran s; starting it again"
    if [ "$ran" -lt "$delay" ]; then
      sleep "$delay" &
      wait $!  # SIGTERM is handled at once, not after the sleep
    fi
    start "$k"
  done
done
