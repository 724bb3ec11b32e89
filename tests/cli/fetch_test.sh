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
mkdir -p "$WORK/www/m/sub" "$WORK/nginx"
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
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/nginx/nginx.conf" <<EOF2
daemon off;
worker_processes 1;
user root;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events {}
http {
  access_log $WORK/nginx/access.log;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  server { listen 127.0.0.1:$PORT; root $WORK/www; }
}
EOF2
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" 2>"$WORK/nginx/stderr" &
NGINX_PID=$!
for _ in $(seq 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/m/tessera-manifest.json')" 2>/dev/null && break
  sleep 0.05
done

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
