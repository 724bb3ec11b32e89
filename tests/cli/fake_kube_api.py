#!/usr/bin/env python3
"""A small stand-in for the Kubernetes API server, for the CLI tests of the scheduler extender.

Usage: fake_kube_api.py STATE.json LOG.jsonl PORTFILE

Serves, on a free port of 127.0.0.1 (written to PORTFILE), the calls the extender makes:
paged lists of nodes, pods and PodDisruptionBudgets (STATE.json: {"nodes": [...], "pods": [...]};
no budgets), watches (answered at once with no event: the watch ends and is asked again),
pod status patches and pod deletions (each applied to the state, a deletion as the start of a
graceful one: deletionTimestamp set), and events (accepted). Every request is appended to LOG.jsonl as
{"method", "path", "content_type", "body"}. Requests without the bearer token "test-token" get
401.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

state_path, log_path, port_path = sys.argv[1:4]
state = json.load(open(state_path))
lock = threading.Lock()
pods = {f'{p["metadata"]["namespace"]}/{p["metadata"]["name"]}': p for p in state["pods"]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, body):
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "content_type": self.headers.get("Content-Type", ""),
                                "body": body}) + "\n")

    def authorized(self):
        if self.headers.get("Authorization") == "Bearer test-token":
            return True
        self.reply(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
        return False

    def do_GET(self):
        self.record("")
        if not self.authorized():
            return
        url = urlparse(self.path)
        query = parse_qs(url.query)
        if query.get("watch") == ["1"]:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        items = {"/api/v1/nodes": lambda: state["nodes"],
                 "/api/v1/pods": lambda: list(pods.values()),
                 "/apis/policy/v1/poddisruptionbudgets": lambda: []}.get(url.path)
        if items is None:
            return self.reply(404, {"kind": "Status", "message": "not found", "code": 404})
        with lock:
            listed = items()
        self.reply(200, {"kind": "List", "apiVersion": "v1",
                         "metadata": {"resourceVersion": "100"}, "items": listed})

    def pod_key(self):
        parts = urlparse(self.path).path.split("/")  # /api/v1/namespaces/NS/pods/NAME[/status]
        return f"{parts[4]}/{parts[6]}" if len(parts) >= 7 else ""

    def do_PATCH(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.record(body)
        if not self.authorized():
            return
        patch = json.loads(body)
        with lock:
            pod = pods.get(self.pod_key())
            if pod is None:
                return self.reply(404, {"kind": "Status", "message": "not found", "code": 404})
            status = pod.setdefault("status", {})
            for key, value in patch.get("status", {}).items():
                if key == "conditions":
                    kept = [c for c in status.get("conditions", [])
                            if c["type"] not in {v["type"] for v in value}]
                    status["conditions"] = kept + value
                else:
                    status[key] = value
            self.reply(200, pod)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.record(body)
        if not self.authorized():
            return
        if not urlparse(self.path).path.endswith("/events"):
            return self.reply(404, {"kind": "Status", "message": "not found", "code": 404})
        self.reply(201, json.loads(body))

    def do_DELETE(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self.record(body)
        if not self.authorized():
            return
        with lock:
            pod = pods.get(self.pod_key())
            if pod is None:
                return self.reply(404, {"kind": "Status", "message": "not found", "code": 404})
            pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:41:09Z"
            self.reply(200, pod)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_path + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))

os.rename(port_path + ".tmp", port_path)  # the port file appears whole
server.serve_forever()
