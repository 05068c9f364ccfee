"""The embedded default registry: CNCF distribution (`docker-registry serve CONFIG`) on 127.0.0.1.

Used by ``scripts/stack.sh`` for the README's first command (plain HTTP on loopback, which Docker
accepts without configuration) and by the integration tests (htpasswd auth + a self-signed TLS CA,
which the engine is told about through ``/etc/docker/certs.d/<host:port>/ca.crt``).
Distribution's configuration reference: https://distribution.github.io/distribution/about/configuration/
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
import yaml

from paddlecd import proc
from paddlecd.errors import RegistryError


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (racy by nature; good enough for test services)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RegistryServer:
    """A distribution registry process. ``root`` holds its config, storage, certs and htpasswd.

    Attributes:
        port: TCP port on 127.0.0.1.
        users: ``{username: password}`` for htpasswd auth; empty means no auth.
        tls: serve HTTPS with a self-signed certificate for 127.0.0.1 (CA written to ``ca_file``).
        delete: allow manifest DELETE (``storage.delete.enabled``; distribution's default is off,
            which ``invoke release.prune`` needs on).
    """

    root: Path
    port: int = 5000
    users: dict[str, str] = field(default_factory=dict)
    tls: bool = False
    delete: bool = True
    process: proc.Background | None = None

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``, the registry part of references."""
        return f"127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate clients must trust when ``tls`` is on."""
        return self.root / "certs" / "ca.crt" if self.tls else None

    def write_config(self) -> Path:
        """Write distribution's config.yml (and certificate/htpasswd files); return its path."""
        self.root.mkdir(parents=True, exist_ok=True)
        cfg: dict = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.root / "data")},
                "delete": {"enabled": self.delete},
            },
            "http": {
                "addr": f"127.0.0.1:{self.port}",
                "headers": {"X-Content-Type-Options": ["nosniff"]},
            },
        }
        if self.users:
            cfg["auth"] = {"htpasswd": {"realm": "paddlecd", "path": str(self._write_htpasswd())}}
        if self.tls:
            cert, key = self._write_certs()
            cfg["http"]["tls"] = {"certificate": str(cert), "key": str(key)}
        path = self.root / "config.yml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def _write_htpasswd(self) -> Path:
        import bcrypt  # test/stack dependency; distribution accepts bcrypt entries only

        path = self.root / "htpasswd"
        lines = [
            f"{u}:{bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=5)).decode()}"
            for u, p in self.users.items()
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    def _write_certs(self) -> tuple[Path, Path]:
        d = self.root / "certs"
        d.mkdir(exist_ok=True)
        cert, key = d / "ca.crt", d / "ca.key"
        if not cert.exists():
            proc.run(
                [
                    "openssl",
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "3",
                    "-keyout",
                    str(key),
                    "-out",
                    str(cert),
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost",
                ],
                what="creating a test CA",
            )
        return cert, key

    def trust_in_engine(self) -> None:
        """Tell dockerd to trust this registry's CA (``/etc/docker/certs.d``, read per request)."""
        if self.ca_file:
            d = Path("/etc/docker/certs.d") / self.host
            d.mkdir(parents=True, exist_ok=True)
            (d / "ca.crt").write_bytes(self.ca_file.read_bytes())

    def start(self, *, timeout: float = 30) -> RegistryServer:
        """Start ``docker-registry serve`` and wait until ``/v2/`` answers.

        ``$PADDLECD_REGISTRY_SERVER`` names another distribution binary to run the same way (e.g.
        a distribution 3 ``registry``, which pages tag lists: benchmarks/bench_ledger.py).

        Raises:
            RegistryError: the binary is missing or the server does not come up in ``timeout`` s.
        """
        config = self.write_config()
        binary = os.environ.get("PADDLECD_REGISTRY_SERVER") or "docker-registry"
        self.process = proc.start([binary, "serve", str(config)],
                                  log=self.root / "registry.log", error=RegistryError,
                                  hint="apt-get install docker-registry")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.process.running():
                raise RegistryError(
                    f"registry on {self.host} exited: see {self.root / 'registry.log'}",
                    "is the port taken?",
                )
            if self.ready():
                return self
            time.sleep(0.2)
        raise RegistryError(
            f"registry on {self.host} did not answer in {timeout}s",
            f"see {self.root / 'registry.log'}",
        )

    def ready(self) -> bool:
        """True when ``/v2/`` answers (200, or 401 when auth is on)."""
        scheme = "https" if self.tls else "http"
        try:
            r = requests.get(f"{scheme}://{self.host}/v2/", timeout=2,
                             verify=str(self.ca_file) if self.ca_file else True)
            return r.status_code in (200, 401)
        except requests.RequestException:
            return False

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.process:
            self.process.stop(grace=10)
        self.process = None

    def docker_config(self, dest: Path, username: str, password: str) -> Path:
        """Write a Docker ``config.json`` holding credentials for this registry into ``dest``."""
        dest.mkdir(parents=True, exist_ok=True)
        auth = base64.b64encode(f"{username}:{password}".encode()).decode()
        (dest / "config.json").write_text(json.dumps({"auths": {self.host: {"auth": auth}}}))
        return dest


def main() -> None:
    """``python -m paddlecd.registry.embedded --port 5000 --root DIR``: run the embedded registry
    in the foreground."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--root", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # stack.sh keeps it in serve.log
    log = logging.getLogger("paddlecd.registry.embedded")
    server = RegistryServer(args.root, port=args.port)
    if server.ready():
        log.info("registry already answering on %s", server.host)
        return
    def stop(signum: int, frame: object) -> None:  # `scripts/stack.sh down` stops the registry too
        # only leave the wait below: stopping the server here, inside that interrupted wait,
        # waits again on the same child and deadlocks on Popen's wait lock (the registry was
        # left a zombie under a supervisor that never exited)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)  # before the start: a stop while it starts stops it too
    signal.signal(signal.SIGINT, stop)
    try:
        server.start()
        log.info("registry serving on http://%s (data: %s)", server.host, args.root / "data")
        assert server.process is not None
        server.process.wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
