#!/usr/bin/env bash
# `tessera node-agent` end to end against Debian's nginx: 32 concurrent `tessera fetch --agent`
# of one model cause exactly one fetch from the origin (nginx's access log shows every byte served
# once) and all 32 get the same verified files; identical files of two models are stored once;
# DELETE is refused while leased; a model over the budget fails clearly; /metrics; a restart
# finds the cache and its live leases as they were. Usage: node_agent_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: node_agent_test.sh path/to/tessera}
WORK=$(mktemp -d)
NGINX_PID=""
AGENT_PID=""
trap '[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null; [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null; wait; rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/nginx_lib.sh"

mkdir -p "$WORK/www/a" "$WORK/www/b"
head -c 20000000 /dev/urandom >"$WORK/www/a/weights.bin"
head -c 300000 /dev/urandom >"$WORK/www/a/tokenizer.bin"
cp "$WORK/www/a/tokenizer.bin" "$WORK/www/b/tokenizer.bin"  # shared by both models
head -c 5000000 /dev/urandom >"$WORK/www/b/weights.bin"
for m in a b; do
  python3 - "$WORK/www/$m" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
files = [{"name": n, "size": os.path.getsize(os.path.join(d, n)),
          "sha256": hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()}
         for n in ("weights.bin", "tokenizer.bin")]
json.dump({"files": files}, open(os.path.join(d, "tessera-manifest.json"), "w"))
PY
done
start_nginx "$WORK/www" "limit_rate 20m;"  # per connection, so a fill lasts long enough to join
SOCK="$WORK/agent.sock"
HTTP_PORT=$(free_port)
start_agent() {
  "$TESSERA" node-agent --cache-dir "$WORK/cache" --max-bytes "${1:-100Mi}" --listen "unix://$SOCK" \
    --listen-http "127.0.0.1:$HTTP_PORT" --chunk-size 1Mi --connections 4 2>>"$WORK/agent.log" &
  AGENT_PID=$!
  for _ in $(seq 100); do curl -s --unix-socket "$SOCK" http://x/healthz >/dev/null && break; sleep 0.05; done
}
api() { curl -s --unix-socket "$SOCK" "$@"; }
start_agent
SRC_A="http://127.0.0.1:$NGINX_PORT/a/tessera-manifest.json"

for i in $(seq 32); do
  "$TESSERA" fetch "$SRC_A" --agent "unix://$SOCK" --holder "pod-$i" --lease-ttl 1h \
    >"$WORK/out.$i" 2>"$WORK/err.$i" &
  pids[$i]=$!
done
fails=0
for i in $(seq 32); do wait "${pids[$i]}" || fails=$((fails + 1)); done
check "32 concurrent fetches all exit 0" test "$fails" = 0
check "all print one path" test "$(sort -u "$WORK"/out.* | wc -l)" = 1
MODEL=$(cat "$WORK/out.1")
check "the path is under the cache" test "${MODEL#"$WORK"/cache/models/}" != "$MODEL"
check "weights identical" cmp -s "$MODEL/weights.bin" "$WORK/www/a/weights.bin"
check "tokenizer identical" cmp -s "$MODEL/tokenizer.bin" "$WORK/www/a/tokenizer.bin"
check "origin served each byte of weights.bin once" test "$(served_bytes /a/weights.bin)" = 20000000
check "origin served each byte of tokenizer.bin once" test "$(served_bytes /a/tokenizer.bin)" = 300000
check "files are read-only" test ! -w "$MODEL/weights.bin" -o "$(id -u)" = 0 -a "$(stat -c %a "$MODEL/weights.bin")" = 444
METRICS=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")
check "one miss in the metrics" grep -q '^tessera_cache_requests_total{result="miss"} 1$' <<<"$METRICS"
check "31 joined or hit" test "$(awk '/^tessera_cache_requests_total\{result="(join|hit)"\}/ { s += $2 } END { print s }' <<<"$METRICS")" = 31
check "origin bytes counted" grep -q '^tessera_cache_origin_bytes_total 20300' <<<"$METRICS"

# A cached model: answered at once. The agent's answer is timed (curl's time_total), not the
# client process, whose start-up alone nears a second under ASan on a loaded machine.
out=$("$TESSERA" fetch "$SRC_A" --agent "unix://$SOCK" --holder late 2>/dev/null)
check "cached fetch returns the same path" test "$out" = "$MODEL"
secs=$(api -o /dev/null -w '%{time_total}' -X POST -d "{\"source\": \"$SRC_A\"}" http://x/v1/models)
check "cached model answered in under 100 ms (was ${secs} s)" python3 -c "import sys; sys.exit(0 if $secs < 0.1 else 1)"

# Sidecar mode: --hold renews the lease past its TTL, and releases it on SIGTERM.
"$TESSERA" fetch "$SRC_A" --agent "unix://$SOCK" --holder sidecar --lease-ttl 3s --hold \
  >"$WORK/hold.out" 2>"$WORK/hold.err" &
HOLD_PID=$!
for _ in $(seq 100); do [ -s "$WORK/hold.out" ] && break; sleep 0.05; done
check "--hold prints the path first" test "$(cat "$WORK/hold.out")" = "$MODEL"
sleep 4.5
leases=$(api "http://x/v1/models/$(basename "$MODEL")")
check "--hold: the lease outlives its 3 s TTL (renewed)" grep -q '"holder":"sidecar"' <<<"$leases"
kill -TERM "$HOLD_PID"; wait "$HOLD_PID"
check "--hold exits 0 on SIGTERM" test $? = 0
leases=$(api "http://x/v1/models/$(basename "$MODEL")")
check "--hold released the lease" test "$(grep -c '"holder":"sidecar"' <<<"$leases")" = 0

# Leases: DELETE is refused while any is live.
ID=$(basename "$MODEL")
code=$(api -o /dev/null -w '%{http_code}' -X DELETE "http://x/v1/models/$ID")
check "DELETE while leased -> 409" test "$code" = 409
for i in $(seq 32) late; do
  [ "$i" = late ] && h=late || h="pod-$i"
  api -o /dev/null -X DELETE "http://x/v1/models/$ID/leases/$h"
done
code=$(api -o /dev/null -w '%{http_code}' -X PUT -d '{"ttlSeconds": -1}' "http://x/v1/models/$ID/leases/x")
check "bad lease TTL -> 400" test "$code" = 400
# A TTL beyond the 30-day bound: formerly granted until "infinite-future", which leases.json could
# not carry over a restart.
code=$(api -o "$WORK/badttl" -w '%{http_code}' -X PUT -d '{"ttlSeconds": 1e300}' "http://x/v1/models/$ID/leases/x")
check "a lease TTL beyond 30 days -> 400" test "$code" = 400
check "and names the bound" grep -q 'at most 2592000' "$WORK/badttl"
code=$(api -o "$WORK/badttl" -w '%{http_code}' -X POST -d "{\"source\": \"$SRC_A\", \"lease\": {\"holder\": \"p\", \"ttlSeconds\": 1e300}}" http://x/v1/models)
check "the same in a POST's lease -> 400" test "$code" = 400
check "naming the field" grep -q 'lease.ttlSeconds' "$WORK/badttl"

# A second model sharing a file: stored once (a hard link to one blob).
SRC_B="http://127.0.0.1:$NGINX_PORT/b/tessera-manifest.json"
MODEL_B=$("$TESSERA" fetch "$SRC_B" --agent "unix://$SOCK" 2>/dev/null)
check "second model fetched" cmp -s "$MODEL_B/weights.bin" "$WORK/www/b/weights.bin"
check "shared file is one inode" test "$(stat -c %i "$MODEL/tokenizer.bin")" = "$(stat -c %i "$MODEL_B/tokenizer.bin")"

# Bad requests.
code=$(api -o "$WORK/bad" -w '%{http_code}' -X POST -d '{"source": "ftp://x/y"}' http://x/v1/models)
check "bad source -> 400" test "$code" = 400
check "and says why" grep -q 'expected an http' "$WORK/bad"
code=$(api -o "$WORK/bad" -w '%{http_code}' -X POST -d '{not json' http://x/v1/models)
check "malformed JSON -> 400" test "$code" = 400
check "and says so" grep -q 'invalid JSON' "$WORK/bad"
# A wait that is not a number of seconds: "nan" parsed as a number and waited the longest.
for w in nan -1 soon; do
  code=$(api -o "$WORK/bad" -w '%{http_code}' "http://x/v1/models/$ID?wait=$w")
  check "GET ?wait=$w -> 400" test "$code" = 400
  check "naming the value" grep -qF "found \\\"$w\\\"" "$WORK/bad"
done
code=$(api -o /dev/null -w '%{http_code}' http://x/v1/models/0123456789abcdef)
check "unknown model -> 404" test "$code" = 404
"$TESSERA" fetch "http://127.0.0.1:$NGINX_PORT/a/missing.bin" --agent "unix://$SOCK" 2>"$WORK/err404"
check "a missing file: fetch exits 2" test $? = 2
check "naming the cause" grep -q 'HTTP 404' "$WORK/err404"

# Unleased now: DELETE removes model a; its blob shared with b stays.
code=$(api -o /dev/null -w '%{http_code}' -X DELETE "http://x/v1/models/$ID")
check "DELETE unleased -> 204" test "$code" = 204
check "model a gone" test ! -e "$MODEL"
check "model b's shared file intact" cmp -s "$MODEL_B/tokenizer.bin" "$WORK/www/b/tokenizer.bin"

# Restart: the index is rebuilt from disk, and live leases survive it (expired ones lapse).
ID_B=$(basename "$MODEL_B")
api -o /dev/null -X PUT -d '{"ttlSeconds": 3600}' "http://x/v1/models/$ID_B/leases/pod-b"
api -o /dev/null -X PUT -d '{"ttlSeconds": 1}' "http://x/v1/models/$ID_B/leases/pod-short"
# A renewal is written only when the file's expiry is within two thirds of the TTL.
saved=$(cat "$WORK/cache/leases.json")
api -o /dev/null -X PUT -d '{"ttlSeconds": 3600}' "http://x/v1/models/$ID_B/leases/pod-b"
check "an early renewal leaves leases.json alone" test "$(cat "$WORK/cache/leases.json")" = "$saved"
api -o /dev/null -X PUT -d '{"ttlSeconds": 7200}' "http://x/v1/models/$ID_B/leases/pod-b"
check "a renewal past two thirds of its TTL is written" test "$(cat "$WORK/cache/leases.json")" != "$saved"
sleep 1.2
kill "$AGENT_PID"; wait "$AGENT_PID"
start_agent 100Mi
got=$(api "http://x/v1/models/$ID_B")
check "model b ready after a restart" grep -q '"state":"ready"' <<<"$got"
check "its live lease restored" grep -q '"holder":"pod-b"' <<<"$got"
check "the expired one lapsed" test "$(grep -c '"holder":"pod-short"' <<<"$got")" = 0
code=$(api -o /dev/null -w '%{http_code}' -X DELETE "http://x/v1/models/$ID_B")
check "DELETE of the restored-leased model -> 409" test "$code" = 409
api -o /dev/null -X DELETE "http://x/v1/models/$ID_B/leases/pod-b"
check "a released lease leaves leases.json" test "$(grep -c pod-b "$WORK/cache/leases.json")" = 0
before=$(served_bytes /b/weights.bin)
"$TESSERA" fetch "$SRC_B" --agent "unix://$SOCK" >/dev/null 2>&1
check "and served from the cache" test "$(served_bytes /b/weights.bin)" = "$before"
# An edited leases.json cannot pin a model forever: expiries past the 30-day bound (a far year, or
# "infinite-future", which RFC 3339 parsing accepts) are cut to 30 days on restore, with a warning.
kill "$AGENT_PID"; wait "$AGENT_PID"
cat >"$WORK/cache/leases.json" <<EOF
{"leases": [{"model": "$ID_B", "holder": "pod-far", "expires": "9999-01-01T00:00:00Z"},
            {"model": "$ID_B", "holder": "pod-inf", "expires": "infinite-future"}]}
EOF
start_agent 100Mi
check "far leases are cut, with a warning" grep -q 'leases.json: 2 leases expiring more than 30 days ahead were cut' "$WORK/agent.log"
check "and both restored" test "$(api "http://x/v1/models/$ID_B" | grep -oE '"holder":"pod-(far|inf)"' | wc -l)" = 2
check "to at most 30 days ahead" python3 - "$WORK/cache/leases.json" <<'PY'
import datetime, json, sys
now = datetime.datetime.now(datetime.timezone.utc)
leases = json.load(open(sys.argv[1]))["leases"]
assert len(leases) == 2, leases
for l in leases:
    left = datetime.datetime.fromisoformat(l["expires"].replace("Z", "+00:00")) - now
    assert datetime.timedelta(days=29, hours=23) < left <= datetime.timedelta(days=30), l
PY
for h in pod-far pod-inf; do api -o /dev/null -X DELETE "http://x/v1/models/$ID_B/leases/$h"; done

# Budget: a model larger than --max-bytes fails with a clear error; the agent keeps serving.
# (And an unreadable leases.json is reported and set aside, not fatal.)
kill "$AGENT_PID"; wait "$AGENT_PID"
echo '{"leases": 7' >"$WORK/cache/leases.json"
start_agent 10Mi
check "a corrupt leases.json is reported" grep -q 'leases.json: expected' "$WORK/agent.log"
"$TESSERA" fetch "$SRC_A" --agent "unix://$SOCK" 2>"$WORK/errbig"
check "over budget: exit 2" test $? = 2
check "naming the budget" grep -q 'budget' "$WORK/errbig"
check "other models still served" test "$("$TESSERA" fetch "$SRC_B" --agent "unix://$SOCK" 2>/dev/null)" = "$MODEL_B"

kill "$AGENT_PID"; wait "$AGENT_PID"
check "agent exits 0 on SIGTERM" test $? = 0
AGENT_PID=""
check "socket removed on exit" test ! -e "$SOCK"

# A disk that fills (a 12 MiB tmpfs under a 100 MiB budget): model a (20 MB) fails with a clear
# error and leaves nothing behind; model b (5 MB) is served before and after.
mkdir -p "$WORK/small"
if mount -t tmpfs -o size=12m tmpfs "$WORK/small" 2>/dev/null; then
  trap '[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null; [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null; wait; umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
  "$TESSERA" node-agent --cache-dir "$WORK/small/cache" --max-bytes 100Mi --listen "unix://$SOCK" \
    --chunk-size 1Mi --connections 4 2>>"$WORK/agent.log" &
  AGENT_PID=$!
  for _ in $(seq 100); do curl -s --unix-socket "$SOCK" http://x/healthz >/dev/null && break; sleep 0.05; done
  B_SMALL=$("$TESSERA" fetch "$SRC_B" --agent "unix://$SOCK" 2>/dev/null)
  check "disk full: a small model fits" cmp -s "$B_SMALL/weights.bin" "$WORK/www/b/weights.bin"
  "$TESSERA" fetch "$SRC_A" --agent "unix://$SOCK" 2>"$WORK/errfull"
  check "disk full: exit 2" test $? = 2
  check "disk full: says so" grep -q "disk full writing .*No space left on device" "$WORK/errfull"
  check "disk full: no partial left" test -z "$(ls "$WORK/small/cache/fill")"
  check "disk full: the other model still served" \
    test "$("$TESSERA" fetch "$SRC_B" --agent "unix://$SOCK" 2>/dev/null)" = "$B_SMALL"
  check "disk full: and intact" cmp -s "$B_SMALL/weights.bin" "$WORK/www/b/weights.bin"
  kill "$AGENT_PID"; wait "$AGENT_PID"; AGENT_PID=""
  umount "$WORK/small"
else
  echo "node_agent_test: cannot mount a tmpfs here (not root?): the disk-full checks did not run" >&2
fi
finish node_agent_test
