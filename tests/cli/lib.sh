# Shared by the CLI tests: `check NAME COMMAND...` runs COMMAND and counts a pass or a failure
# (naming NAME on stderr); `finish TEST` prints the tally and returns non-zero on any failure;
# `azure_trace OUT SEED` writes a 20-minute Azure-format LLM trace (a base load with two
# one-minute bursts) for the `sim autoscale` tests; `announced_port LOG` the port a server
# announced on stderr.
passed=0
failed=0
check() {
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name" >&2; fi
}
finish() {
  echo "$1: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
azure_trace() {
  python3 - "$1" "$2" <<'PY'
import datetime, random, sys
random.seed(int(sys.argv[2]))
t0 = datetime.datetime(2023, 11, 16, 18, 0, 0)
t = 0.0
with open(sys.argv[1], "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    while True:
        t += random.expovariate(4.0 if (300 < t < 360 or 900 < t < 960) else 0.6)
        if t >= 1200:
            break
        stamp = (t0 + datetime.timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f")
        f.write(f"{stamp}0,{random.randint(200, 4000)},{random.randint(10, 400)}\n")
PY
}
# `announced_port LOG`: waits up to 10 s for a server's "listening on HOST:PORT" line in LOG and
# prints PORT (nothing if it never came).
announced_port() {
  for _ in $(seq 100); do
    grep -q 'listening on' "$1" && break
    sleep 0.1
  done
  sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$1" | head -1
}
