# A stand-in for Prometheus' instant-query API (/api/v1/query, GET or POST) for the CLI tests:
# answers each query with the value of the first key of ANSWERS.json it contains (a vector of one
# sample stamped now), "error" with a bad_data error body (HTTP 400), and no key with an empty
# vector. Writes the port it listens on (127.0.0.1, any free port) to PORT_FILE.
# Usage: fake_prometheus.py ANSWERS.json PORT_FILE
import http.server, json, sys, urllib.parse, time
answers = json.load(open(sys.argv[1]))
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self): self.answer(urllib.parse.urlparse(self.path).query)
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0)); self.answer(self.rfile.read(n).decode())
    def answer(self, qs):
        q = urllib.parse.parse_qs(qs).get("query", [""])[0]
        for key, v in answers.items():
            if key in q:
                break
        else:
            v = None
        if v == "error":
            body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}
            code = 400
        else:
            res = [] if v is None else [{"metric": {}, "value": [time.time(), str(v)]}]
            body = {"status": "success", "data": {"resultType": "vector", "result": res}}
            code = 200
        b = json.dumps(body).encode()
        self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
