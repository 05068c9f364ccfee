"""A scripted loopback registry WITH the OCI 1.1 referrers API: the path no real registry here has.

CNCF distribution 2.8 (the embedded default, and the registry of the other integration tests) has no
referrers API, and no registry with it can be installed on the test machines. This server speaks
just the parts of distribution-spec 1.1 that paddlecd uses — blob HEAD/GET/POST/PUT, manifest
HEAD/GET/PUT, and ``GET /v2/<name>/referrers/<digest>`` — in memory over plain HTTP on 127.0.0.1,
and answers a manifest PUT that carries a ``subject`` with the ``OCI-Subject`` header, as the spec
says a registry with the API must. ``log`` records every request line; ``reject_manifests`` makes
manifest PUTs fail with the spec's error body.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
_PATH = re.compile(
    r"^/v2/(?P<repo>.+?)/(?P<kind>blobs/uploads|blobs|manifests|referrers)/(?P<rest>[^/]*)$"
)


class ScriptedRegistry:
    """Start with :meth:`start`; ``host`` is ``127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.log: list[str] = []
        self.reject_manifests: str | None = None
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet; requests are in registry.log
                pass

            def do_GET(self):
                registry._handle(self, "GET")

            def do_HEAD(self):
                registry._handle(self, "HEAD")

            def do_POST(self):
                registry._handle(self, "POST")

            def do_PUT(self):
                registry._handle(self, "PUT")

            def do_DELETE(self):
                registry._handle(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> ScriptedRegistry:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        self.log.append(f"{method} {url.path}")
        body = (
            h.rfile.read(int(h.headers.get("Content-Length") or 0))
            if method in ("PUT", "POST")
            else b""
        )
        if url.path == "/v2/":
            return self._send(h, 200, b"{}", "application/json")
        m = _PATH.match(url.path)
        if not m:
            return self._send(h, 404, b"404 page not found", "text/plain")
        repo, kind, rest = m.group("repo"), m.group("kind"), m.group("rest")
        if kind == "blobs/uploads":
            mount = parse_qs(url.query).get("mount", [""])[0]
            if (
                method == "POST" and mount in self.blobs
            ):  # cross-repository mount (blobs are global here)
                return self._send(h, 201, b"", headers={"Location": f"/v2/{repo}/blobs/{mount}"})
            if method == "DELETE":
                return self._send(h, 204, b"")
            if method == "POST":
                return self._send(
                    h, 202, b"", headers={"Location": f"/v2/{repo}/blobs/uploads/{uuid.uuid4()}"}
                )
            digest = parse_qs(url.query)["digest"][0]
            if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
                return self._error(h, 400, "DIGEST_INVALID")
            self.blobs[digest] = body
            return self._send(h, 201, b"", headers={"Docker-Content-Digest": digest})
        if kind == "blobs":
            data = self.blobs.get(rest)
            if data is None:
                return self._error(h, 404, "BLOB_UNKNOWN")
            return self._send(
                h, 200, data if method == "GET" else b"", "application/octet-stream", len(data)
            )
        if kind == "referrers":
            return self._referrers(h, repo, rest)
        if method == "PUT":
            return self._put_manifest(h, repo, rest, body)
        found = self.manifests.get((repo, rest))
        if not found:
            return self._error(h, 404, "MANIFEST_UNKNOWN")
        raw, ctype = found
        return self._send(
            h,
            200,
            raw if method == "GET" else b"",
            ctype,
            length=len(raw),
            headers={"Docker-Content-Digest": "sha256:" + hashlib.sha256(raw).hexdigest()},
        )

    def _put_manifest(self, h: BaseHTTPRequestHandler, repo: str, ref: str, raw: bytes) -> None:
        if self.reject_manifests:
            return self._error(h, 400, "MANIFEST_INVALID", self.reject_manifests)
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        ctype = h.headers.get("Content-Type", "")
        self.manifests[(repo, ref)] = self.manifests[(repo, digest)] = (raw, ctype)
        headers = {"Docker-Content-Digest": digest}
        subject = (json.loads(raw).get("subject") or {}).get("digest")
        if subject:
            headers["OCI-Subject"] = subject
        self._send(h, 201, b"", headers=headers)

    def _referrers(self, h: BaseHTTPRequestHandler, repo: str, digest: str) -> None:
        entries = []
        for (r, ref), (raw, ctype) in self.manifests.items():
            doc = json.loads(raw)
            if (
                r == repo
                and ref.startswith("sha256:")
                and (doc.get("subject") or {}).get("digest") == digest
            ):
                entries.append(
                    {
                        "mediaType": ctype,
                        "digest": ref,
                        "size": len(raw),
                        "artifactType": doc.get("artifactType"),
                        "annotations": doc.get("annotations", {}),
                    }
                )
        index = json.dumps(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        ).encode()
        self._send(h, 200, index, OCI_INDEX)

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str, message: str = "") -> None:
        body = json.dumps({"errors": [{"code": code, "message": message or code.lower()}]}).encode()
        self._send(h, status, body, "application/json")

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        ctype: str = "",
        length: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        if ctype:
            h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if body:
            h.wfile.write(body)
