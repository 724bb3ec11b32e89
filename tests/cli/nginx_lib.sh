# Shared by the CLI tests that need an origin: start_nginx ROOT [EXTRA_SERVER_CONFIG
# [EXTRA_HTTP_CONFIG]] starts Debian's nginx on a free 127.0.0.1 port serving ROOT, logging "$status $body_bytes_sent $uri"
# per request to $WORK/nginx/access.log; sets NGINX_PID and NGINX_PORT. served_bytes URI sums the
# body bytes sent for URI.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
start_nginx() {
  local root=$1 extra=${2:-} extra_http=${3:-}
  NGINX_PORT=$(free_port)
  mkdir -p "$WORK/nginx"
  cat >"$WORK/nginx/nginx.conf" <<EOF2
daemon off;
worker_processes 1;
user root;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 1024; }
http {
  log_format bytes '\$status \$body_bytes_sent \$uri';
  access_log $WORK/nginx/access.log bytes;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  server { listen 127.0.0.1:$NGINX_PORT; root $root; $extra }
  $extra_http
}
EOF2
  nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" 2>"$WORK/nginx/stderr" &
  NGINX_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/" && break
    sleep 0.05
  done
}
served_bytes() {
  awk -v u="$1" '$3 == u { s += $2 } END { print s + 0 }' "$WORK/nginx/access.log"
}
