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


ROLE = ROOT / "docs" / "paddlecd-role.yaml"  # the Role docs/kubernetes.md tells users to apply


def rbac_attributes(method: str, path: str, query: str = "") -> tuple[str, str, str] | None:
    """``(apiGroup, resource[/subresource], verb)`` of a namespaced API request as the API server's
    authorizer derives them (kubernetes.io/docs/reference/access-authn-authz/authorization,
    "Determine the request verb": POST create, GET one get, GET many list/watch, DELETE delete);
    None for a request outside a namespace (``/version``: public to any authenticated user)."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if parts[0] not in ("api", "apis") or rest[:1] != ["namespaces"] or len(rest) < 3:
        return None
    group = "" if parts[0] == "api" else parts[1]
    resource, name, sub = rest[2], rest[3] if len(rest) > 3 else None, rest[4:5]
    verbs = {"POST": "create", "DELETE": "delete", "PUT": "update", "PATCH": "patch"}
    verb = verbs.get(method) or ("get" if name else "watch" if "watch=true" in query else "list")
    return group, "/".join([resource, *sub]), verb


def role_allows(role: dict, method: str, path: str, query: str = "") -> bool:
    """Whether Role ``role`` (a parsed rbac.authorization.k8s.io/v1 Role) permits the request."""
    attrs = rbac_attributes(method, path, query)
    if attrs is None:
        return True
    group, resource, verb = attrs
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               for r in role["rules"])
