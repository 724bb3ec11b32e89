#!/usr/bin/env bash
# End-to-end test of `tessera fetch --to DIR` against Debian's nginx on a free port: a manifest
# with checksums, the printed path, the cached second run, and the exit codes for bad input (1)
# and a failed fetch (2). Usage: fetch_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: fetch_test.sh path/to/tessera}
WORK=$(mktemp -d)
NGINX_PID=""
trap '[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/nginx_lib.sh"
mkdir -p "$WORK/www/m/sub"
head -c 3000000 /dev/urandom >"$WORK/www/m/weights.bin"
head -c 70000 /dev/urandom >"$WORK/www/m/sub/tokenizer.bin"
python3 - "$WORK/www/m" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
files = []
for name in ("weights.bin", "sub/tokenizer.bin"):
    data = open(os.path.join(d, name), "rb").read()
    files.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
json.dump({"files": files}, open(os.path.join(d, "tessera-manifest.json"), "w"))
PY
start_nginx "$WORK/www"
PORT=$NGINX_PORT

out=$("$TESSERA" fetch "http://127.0.0.1:$PORT/m/tessera-manifest.json" --to "$WORK/model" \
  --connections 4 --chunk-size 256Ki 2>"$WORK/err")
check "fetch exits 0" test $? = 0
check "prints the local path" test "$out" = "$WORK/model"
check "files identical" cmp -s "$WORK/model/weights.bin" "$WORK/www/m/weights.bin"
check "nested file identical" cmp -s "$WORK/model/sub/tokenizer.bin" "$WORK/www/m/sub/tokenizer.bin"
check "no partial left" test ! -e "$WORK/model.partial"
check "plain progress lines off a terminal" grep -q '^tessera fetch: 100%' "$WORK/err"
"$TESSERA" fetch "http://127.0.0.1:$PORT/m/tessera-manifest.json" --to "$WORK/model" 2>"$WORK/err2" >/dev/null
check "second fetch: already complete" grep -q 'already complete' "$WORK/err2"
"$TESSERA" fetch "http://127.0.0.1:$PORT/m/missing.bin" --to "$WORK/x" 2>"$WORK/err3"
check "404 exits 2" test $? = 2
check "and names the URL" grep -q 'missing.bin' "$WORK/err3"
"$TESSERA" fetch "ftp://h/x" --to "$WORK/y" 2>/dev/null
check "bad source exits 1" test $? = 1
"$TESSERA" fetch "http://127.0.0.1:$PORT/m/weights.bin" --agent unix://"$WORK"/none.sock 2>"$WORK/err4"
check "an agent that is not there: exit 2" test $? = 2
check "naming the agent" grep -q 'none.sock' "$WORK/err4"
"$TESSERA" fetch "http://127.0.0.1:$PORT/m/weights.bin" --to "$WORK/z" --agent unix:///x 2>/dev/null
check "--to with --agent: exit 1" test $? = 1
"$TESSERA" fetch "http://127.0.0.1:$PORT/m/tessera-manifest.json" --to "$WORK/model" --path-file "$WORK/p" >/dev/null 2>&1
check "--path-file holds the path" test "$(cat "$WORK/p")" = "$WORK/model"

finish fetch_test
