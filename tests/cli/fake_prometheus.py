# A stand-in for Prometheus' query API (/api/v1/query and /api/v1/query_range, GET or POST) for
# the CLI tests: answers each query with the value of the first key of ANSWERS.json it contains
# (a vector of one sample stamped now, or for a range query that value at every step),
# "error" with a bad_data error body (HTTP 400), and no key with an empty vector or matrix; a
# key "range" set to "error" answers every range query with that error, set to any other text
# the range queries that contain it; a key "slowRange" answers the range queries that contain its
# text only after 2 s. Writes the port it listens on (127.0.0.1, any free port) to PORT_FILE.
# Usage: fake_prometheus.py ANSWERS.json PORT_FILE
import http.server, json, sys, urllib.parse, time
answers = json.load(open(sys.argv[1]))
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        u = urllib.parse.urlparse(self.path); self.answer(u.path, u.query)
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.answer(urllib.parse.urlparse(self.path).path, self.rfile.read(n).decode())
    def answer(self, path, qs):
        params = urllib.parse.parse_qs(qs)
        q = params.get("query", [""])[0]
        ranged = path.endswith("/query_range")
        for key, v in answers.items():
            if key in q:
                break
        else:
            v = None
        slow = answers.get("slowRange")
        if ranged and slow is not None and slow in q:
            time.sleep(2)
        fail = answers.get("range")
        if ranged and fail is not None and (fail == "error" or fail in q):
            v = "error"
        if v == "error":
            body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}
            code = 400
        elif ranged:
            start, end, step = (float(params[k][0]) for k in ("start", "end", "step"))
            n = int(round((end - start) / step)) + 1
            values = [[round(start + i * step, 3), str(v)] for i in range(n)]
            res = [] if v is None else [{"metric": {}, "values": values}]
            body = {"status": "success", "data": {"resultType": "matrix", "result": res}}
            code = 200
        else:
            res = [] if v is None else [{"metric": {}, "value": [time.time(), str(v)]}]
            body = {"status": "success", "data": {"resultType": "vector", "result": res}}
            code = 200
        b = json.dumps(body).encode()
        try:
            self.send_response(code); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a timeout under test)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
