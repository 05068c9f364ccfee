"""A scripted Kubernetes API over real HTTP, for the cluster tests (no API server can run on the
test machines). Unknown routes answer 404 with the "PaddleJob CRD missing" body the recorded v1.30
API server returned (tests/data/cluster/k8s-api.json)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from support.project import ROOT

API = json.loads((ROOT / "tests" / "data" / "cluster" / "k8s-api.json").read_text())


class ScriptedAPI:
    """A real HTTP server replaying scripted responses: ``routes[(method, path)]`` is a list of
    ``(status, body)`` served in order, the last one repeating; a route ``(method, "path?query")``
    (the query as sent, e.g. a pod list's ``labelSelector``) is preferred when it matches. Every
    request is recorded."""

    def __init__(self, routes: dict[tuple[str, str], list[tuple[int, object]]]):
        self.routes = {k: list(v) for k, v in routes.items()}
        self.requests: list[tuple[str, str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def calls(self, method: str) -> list[str]:
        return [path for m, path, _ in self.requests if m == method]

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                api.requests.append((self.command, url.path, url.query))
                self.rfile.read(length)
                script = api.routes.get(
                    (self.command, f"{url.path}?{url.query}")
                ) or api.routes.get((self.command, url.path))
                status, body = (
                    (script.pop(0) if len(script) > 1 else script[0])
                    if script
                    else (404, API["paddlejob_crd_missing"])
                )
                raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type", "text/plain" if isinstance(body, str) else "application/json"
                )
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _reply

            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
