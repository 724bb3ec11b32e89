#!/usr/bin/env bash
# Crash safety of `tessera node-agent`: kill -9 at 20 random moments while fills run (nginx
# throttled per connection so fills last a while; each moment a random time after the requests,
# so a random amount of progress and any phase of a chunk). After every kill: every model under
# models/ verifies against its manifest's SHA-256 and holds no partial or temporary file. After
# the last kill the agent restarts, resumes every interrupted fill, and fetches at most 1.1x the
# bytes that were missing (missing = size - the chunks its log lists that still hash right,
# computed here).
# Usage: node_agent_crash_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: node_agent_crash_test.sh path/to/tessera}
WORK=$(mktemp -d)
NGINX_PID=""
AGENT_PID=""
trap '[ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null; [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null; wait; rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/nginx_lib.sh"
MODELS="m1 m2 m3 m4 m5 m6"
for m in $MODELS; do
  mkdir -p "$WORK/www/$m"
  head -c 15000000 /dev/urandom >"$WORK/www/$m/$m.bin"
  head -c 100000 /dev/urandom >"$WORK/www/$m/$m-config.bin"
  python3 - "$WORK/www/$m" "$m" <<'PY'
import hashlib, json, os, sys
d, m = sys.argv[1], sys.argv[2]
files = [{"name": n, "size": os.path.getsize(os.path.join(d, n)),
          "sha256": hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()}
         for n in (m + ".bin", m + "-config.bin")]
json.dump({"files": files}, open(os.path.join(d, "tessera-manifest.json"), "w"))
PY
done
start_nginx "$WORK/www" "limit_rate 1m;"
SOCK="$WORK/agent.sock"
start_agent() {
  "$TESSERA" node-agent --cache-dir "$WORK/cache" --max-bytes 1Gi --listen "unix://$SOCK" \
    --chunk-size 256Ki --connections 2 2>>"$WORK/agent.log" &
  AGENT_PID=$!
  for _ in $(seq 200); do curl -s --unix-socket "$SOCK" http://x/healthz >/dev/null && break; sleep 0.02; done
}
request_all() {
  for m in $MODELS; do
    curl -s --unix-socket "$SOCK" -o /dev/null -X POST \
      -d "{\"source\": \"http://127.0.0.1:$NGINX_PORT/$m/tessera-manifest.json\"}" http://x/v1/models
  done
}
# Prints "ok" when every ready model verifies and nothing partial is visible under models/;
# then "missing BYTES" over the unfinished models.
inspect() {
  python3 - "$WORK/cache" "$WORK/www" <<'PY'
import hashlib, json, os, sys
cache, www = sys.argv[1], sys.argv[2]
expected = {}
for m in os.listdir(www):
    for f in json.load(open(os.path.join(www, m, "tessera-manifest.json")))["files"]:
        expected[f["name"]] = (f["size"], f["sha256"])
ok = True
ready = set()
for mid in os.listdir(os.path.join(cache, "models")):
    d = os.path.join(cache, "models", mid)
    names = sorted(os.listdir(d))
    for n in names:
        if n not in expected:
            print("unexpected file under a ready model:", mid, n); ok = False; continue
        data = open(os.path.join(d, n), "rb").read()
        if (len(data), hashlib.sha256(data).hexdigest()) != expected[n]:
            print("ready model does not verify:", mid, n); ok = False
        ready.add(n)
    stems = {n.split("-config")[0].split(".bin")[0] for n in names}
    if len(names) != 2 or len(stems) != 1:
        print("ready model incomplete:", mid, names); ok = False
missing = 0
fill = os.path.join(cache, "fill")
verified = {}
for entry in os.listdir(fill):
    p = os.path.join(fill, entry)
    for n in os.listdir(p):
        if n.endswith(".tessera-chunks"):
            f = n[: -len(".tessera-chunks")]
            data = open(os.path.join(p, f), "rb").read() if os.path.exists(os.path.join(p, f)) else b""
            got = set()
            for line in open(os.path.join(p, n)):
                parts = line.split()
                if len(parts) != 3: continue
                i, size = int(parts[0]), int(parts[1])
                chunk = data[i * size:(i + 1) * size]
                if chunk and hashlib.sha256(chunk).hexdigest() == parts[2]:
                    got.add((i, len(chunk)))
            verified[f] = verified.get(f, 0) + sum(l for _, l in got)
        elif not entry.endswith(".partial") and n in expected:
            verified[n] = expected[n][0]  # fetched and verified, waiting for its commit
for n, (size, _) in expected.items():
    if n not in ready:
        missing += size - verified.get(n, 0)
print("ok" if ok else "BAD")
print("missing", missing)
PY
}
served_total() {
  awk '{ s += $2 } END { print s + 0 }' "$WORK/nginx/access.log"
}

# Ready models are deleted at the start of each round, so every kill lands while fills run. A
# ready model is a directory models/<id>/, named by the id the API takes.
delete_ready() {
  local id
  for id in $(ls "$WORK/cache/models"); do
    curl -s --unix-socket "$SOCK" -o /dev/null -X DELETE "http://x/v1/models/$id"
  done
}

bad=0
k=0
missing=0
# 20 kills; more (up to 30) only if the 20th found every fill finished (nothing left to refill).
while [ "$k" -lt 20 ] || { [ "$missing" -eq 0 ] && [ "$k" -lt 30 ]; }; do
  k=$((k + 1))
  start_agent
  delete_ready
  request_all
  # A random moment: 0-0.75 s after the requests, uniformly. The origin's rate limit, not the
  # agent's speed, sets how far the fills get (so a slower build, e.g. under ASan, is killed at
  # about the same progress): up to about 3 chunks per connection, at any phase of a chunk, at
  # times before the last model's manifest is fetched. (Waiting for the origin's log to show a
  # drawn number of bytes instead killed every time just after the connections' chunks completed
  # together: the log shows a chunk only once it is sent, and the 12 connections advance in step.)
  before_round=$(served_total)
  ms=$((RANDOM % 750))
  sleep "0.$(printf %03d "$ms")"
  kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=""
  result=$(inspect)
  served=$(( $(served_total) - before_round ))
  ready=$(ls "$WORK/cache/models" | wc -l)
  echo "kill $k after $ms ms, $served bytes served: $(tr "\n" " " <<<"$result") ready=$ready" >&2
  if [ "$(head -1 <<<"$result")" != ok ]; then bad=$((bad + 1)); echo "after kill $k: $result" >&2; fi
  missing=$(awk '/^missing/ { print $2 }' <<<"$result")
done
check "after each of $k kill -9: every ready model verifies, nothing partial visible" test "$bad" = 0
check "fills were still in flight at the last kill (missing $missing bytes)" test "$missing" -gt 0
before=$(served_total)
start_agent
request_all
for m in $MODELS; do
  "$TESSERA" fetch "http://127.0.0.1:$NGINX_PORT/$m/tessera-manifest.json" --agent "unix://$SOCK" \
    --timeout 2m >/dev/null 2>>"$WORK/fetch.err" || bad=$((bad + 1))
done
check "every model completes after the last restart" test "$bad" = 0
refill=$(( $(served_total) - before ))
echo "node_agent_crash_test: missing $missing bytes after the last kill, refill fetched $refill" >&2
check "refill <= 1.1 x missing ($refill vs $missing)" python3 -c "import sys; sys.exit(0 if $refill <= 1.1 * $missing else 1)"
check "all six models verify" test "$(inspect | head -1)" = ok
check "nothing left in fill/" test -z "$(ls "$WORK/cache/fill")"
kill "$AGENT_PID"; wait "$AGENT_PID"; AGENT_PID=""
finish node_agent_crash_test
