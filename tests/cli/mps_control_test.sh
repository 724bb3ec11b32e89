#!/usr/bin/env bash
# Tests deploy/mps/mps-control.sh, the MPS DaemonSet's script, with stand-ins for nvidia-smi and
# nvidia-cuda-mps-control on PATH (there is no GPU here): one daemon per GPU outside MIG mode,
# each given its GPU's UUID and its own pipe and log directories; earlier daemons' pipes
# removed, and all of them when it stops; `ready` only while every daemon answers; SIGTERM tells each to quit (exit 0); a daemon
# that dies is started again without touching the others; no GPU, or only MIG ones, exits 1. Usage: mps_control_test.sh TESSERA (unused: the script is the subject)
set -u
ROOT=${TESSERA_SOURCE_DIR:?}
SCRIPT="$ROOT/deploy/mps/mps-control.sh"
WORK=$(mktemp -d)
PID=""
cleanup() {  # the script, then any stand-in daemon it left
  [ -n "$PID" ] && kill "$PID" 2>/dev/null
  [ -f "$FAKE_PIDS" ] && xargs -r kill <"$FAKE_PIDS" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mkdir -p "$WORK/bin"
# nvidia-smi: the GPUs in $FAKE_GPUS (the CSV nvidia-smi prints for the script's query), or
# failure when it is unset.
cat >"$WORK/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
[ "$*" = "--query-gpu=index,uuid,mig.mode.current --format=csv,noheader" ] || exit 9
[ -n "${FAKE_GPUS+x}" ] || { echo "NVIDIA-SMI has failed" >&2; exit 9; }
printf '%s' "$FAKE_GPUS"
EOF
# nvidia-cuda-mps-control: -f logs its environment, leaves a control pipe with its pid (and adds
# it to $FAKE_PIDS, for the clean-up) and runs until killed; with no flag it reads one command from stdin and answers for the daemon whose
# pipes are in CUDA_MPS_PIPE_DIRECTORY (quit kills it).
cat >"$WORK/bin/nvidia-cuda-mps-control" <<'EOF'
#!/usr/bin/env bash
if [ "${1:-}" = -f ]; then
  echo "start $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >>"$FAKE_LOG"
  echo $$ >"$CUDA_MPS_PIPE_DIRECTORY/control"
  echo $$ >>"$FAKE_PIDS"
  exec sleep 1000 </dev/null >/dev/null 2>&1  # holding none of the test's pipes
fi
read -r command
pid=$(cat "$CUDA_MPS_PIPE_DIRECTORY/control" 2>/dev/null) && kill -0 "$pid" 2>/dev/null || exit 1
echo "$command $CUDA_MPS_PIPE_DIRECTORY" >>"$FAKE_LOG"
case "$command" in
  quit) kill "$pid" ;;
  get_default_active_thread_percentage) echo 100.0 ;;
esac
EOF
chmod +x "$WORK/bin/"*
export PATH="$WORK/bin:$PATH" FAKE_LOG="$WORK/log" FAKE_PIDS="$WORK/pids" TESSERA_MPS_DIRECTORY="$WORK/mps"
: >"$FAKE_LOG"
waitfor() {  # waitfor N PATTERN: until the log has N lines matching PATTERN (5 s at most)
  for _ in $(seq 50); do
    [ "$(grep -c -- "$2" "$FAKE_LOG" 2>/dev/null)" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

reap() {  # reap PID: its exit status, waiting 10 s at most (then killed: 124)
  for _ in $(seq 100); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$1" 2>/dev/null && { kill -9 "$1"; wait "$1"; return 124; }
  wait "$1"
}

# Three GPUs, the second in MIG mode; pipes left by earlier daemons, of GPU 0 and of a GPU 7 the
# node no longer has.
export FAKE_GPUS=$'0, GPU-aaaa, Disabled\n1, GPU-bbbb, Enabled\n2, GPU-cccc, [N/A]\n'
mkdir -p "$WORK/mps/pipes/gpu-0" "$WORK/mps/pipes/gpu-7"
touch "$WORK/mps/pipes/gpu-0/stale" "$WORK/mps/pipes/gpu-7/control"
bash "$SCRIPT" 2>"$WORK/stderr" &
PID=$!
check "a daemon for each GPU outside MIG mode" waitfor 2 '^start'
check "GPU 0's: its UUID, pipes and logs" \
  grep -qx "start GPU-aaaa $WORK/mps/pipes/gpu-0 $WORK/mps/logs/gpu-0" "$FAKE_LOG"
check "GPU 2's" grep -qx "start GPU-cccc $WORK/mps/pipes/gpu-2 $WORK/mps/logs/gpu-2" "$FAKE_LOG"
check "none for the MIG GPU" bash -c "! grep -q GPU-bbbb '$FAKE_LOG' && ! test -e '$WORK/mps/pipes/gpu-1'"
check "and says why" grep -q 'GPU 1 (GPU-bbbb) is in MIG mode: no MPS daemon for it' "$WORK/stderr"
check "the earlier daemons' pipes are gone" bash -c "! test -e '$WORK/mps/pipes/gpu-0/stale' &&
  ! test -e '$WORK/mps/pipes/gpu-7'"
for _ in $(seq 50); do [ -s "$WORK/mps/daemons" ] && break; sleep 0.1; done
check "ready while both answer" bash "$SCRIPT" ready
check "asking each" waitfor 2 '^get_default_active_thread_percentage'
daemons="$(cat "$WORK/mps/pipes/gpu-0/control") $(cat "$WORK/mps/pipes/gpu-2/control")"
kill -TERM "$PID"
reap "$PID"
rc=$?
PID=""
check "SIGTERM: exits 0" test "$rc" = 0
check "after telling each daemon to quit" bash -c "grep -qx 'quit $WORK/mps/pipes/gpu-0' '$FAKE_LOG' &&
  grep -qx 'quit $WORK/mps/pipes/gpu-2' '$FAKE_LOG'"
check "no daemon left running" bash -c "for p in $daemons; do kill -0 \$p 2>/dev/null && exit 1; done; exit 0"
check "not ready once stopped" bash -c "! bash '$SCRIPT' ready"
check "and no pipes: new sharing pods wait for the daemons" test ! -e "$WORK/mps/pipes"

# A daemon that dies is started again, alone: the other GPU's keeps its clients.
: >"$FAKE_LOG"
TESSERA_MPS_RESTART_DELAY=2 bash "$SCRIPT" 2>"$WORK/stderr" &
PID=$!
waitfor 2 '^start'
for _ in $(seq 50); do [ -s "$WORK/mps/daemons" ] && break; sleep 0.1; done
first=$(cat "$WORK/mps/pipes/gpu-0/control")
dead=$(cat "$WORK/mps/pipes/gpu-2/control")
kill "$dead"
for _ in $(seq 50); do kill -0 "$dead" 2>/dev/null || break; sleep 0.05; done
check "not ready while it is down" bash -c "! bash '$SCRIPT' ready"
check "started again" waitfor 2 "^start GPU-cccc $WORK/mps/pipes/gpu-2 $WORK/mps/logs/gpu-2\$"
for _ in $(seq 50); do
  again=$(cat "$WORK/mps/pipes/gpu-2/control" 2>/dev/null)
  [ -n "$again" ] && [ "$again" != "$dead" ] && break
  sleep 0.1
done
check "as a new daemon" test -n "$again" -a "$again" != "$dead"
check "the other daemon untouched" bash -c "kill -0 $first && ! grep -q '^quit' '$FAKE_LOG' &&
  test \"\$(cat '$WORK/mps/pipes/gpu-0/control')\" = $first"
check "and says so" \
  grep -q 'GPU GPU-cccc: MPS control daemon exited (status [0-9]*) after [0-9]* s; starting it again' \
  "$WORK/stderr"
check "ready again" bash "$SCRIPT" ready
kill -TERM "$PID"
reap "$PID"
check "SIGTERM after a restart: exits 0" test $? = 0
PID=""
check "telling the new daemon to quit" grep -qx "quit $WORK/mps/pipes/gpu-2" "$FAKE_LOG"

# Only MIG GPUs, or none visible: nothing to run, exit 1 with why.
FAKE_GPUS=$'0, GPU-aaaa, Enabled\n' bash "$SCRIPT" 2>"$WORK/stderr"
check "only MIG GPUs: exit 1" test $? = 1
check "and says so" grep -q 'no GPU outside MIG mode on this node' "$WORK/stderr"
mkdir -p "$WORK/mps/pipes/gpu-0"
(unset FAKE_GPUS && bash "$SCRIPT" 2>"$WORK/stderr")
check "nvidia-smi fails: exit 1" test $? = 1
check "leaving no earlier daemon's pipes" test ! -e "$WORK/mps/pipes"
check "and says what is needed" grep -q 'NVIDIA_VISIBLE_DEVICES=all and the NVIDIA runtime' "$WORK/stderr"
bash "$SCRIPT" start 2>"$WORK/stderr"
check "an unknown argument: exit 2" test $? = 2

finish mps_control_test
