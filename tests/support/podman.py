"""podman's Docker-compatible API service for the podman tier, started by the suite itself.

Everything it reads and writes is under one temp folder: ``containers.conf``,
``storage.conf`` and ``registries.conf`` (``CONTAINERS_CONF``, ``CONTAINERS_STORAGE_CONF``,
``CONTAINERS_REGISTRIES_CONF``: the machine's /etc/containers is not read), the image store
(overlay driver: vfs copies the 1.1 GB base for every layer), the run state, the network
definitions, the signature policy (``$HOME/.config/containers/policy.json``, ``HOME`` being the
folder). In this VM podman needs ``cgroup_manager = "cgroupfs"`` (no systemd) and explicit
``default_ulimits`` no higher than the service's hard limits (runc: "error setting rlimit type 7"
otherwise). A registry on plain HTTP must be listed as insecure: podman, unlike Docker, does not
treat 127.0.0.0/8 so. Facts measured with podman 4.3.1 (Debian 12): /work/shared/reference.

The netavark state (``/run/containers/networks``) is the one place shared with the machine; the
tier's tests run on one xdist worker (``xdist_group("podman")``) so two services never allocate
the same bridge subnet.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# the service's own nproc limit: podman sets 32768 for itself whatever it inherits
NPROC_CAP = 32768


@dataclass
class PodmanService:
    """``podman system service`` on ``root/podman.sock``; ``insecure`` are the ``host:port``
    registries it may reach over plain HTTP (the session's seed registry)."""

    root: Path
    insecure: tuple[str, ...] = ()
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        """``DOCKER_HOST`` for this service: ``unix://<root>/podman.sock``."""
        return f"unix://{self.root}/podman.sock"

    def write_config(self) -> dict[str, str]:
        """Write the three configuration files and the policy; return the service's environment
        additions."""
        r = self.root
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], NPROC_CAP)
        ulimits = [f"nofile={nofile}:{nofile}", f"nproc={nproc}:{nproc}"]
        (r / "containers.conf").write_text(
            "[containers]\n"
            f"default_ulimits = {json.dumps(ulimits)}\n"
            "[engine]\n"
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            f'events_logfile_path = "{r}/events.log"\n'
            f'tmp_dir = "{r}/tmp"\n'
            "exit_command_delay = 5\n"
            "[network]\n"
            'network_backend = "netavark"\n'
            f'network_config_dir = "{r}/networks"\n')
        (r / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\nrunroot = "{r}/runroot"\ngraphroot = "{r}/graph"\n')
        (r / "registries.conf").write_text(
            "unqualified-search-registries = []\n" + "".join(
                f'[[registry]]\nlocation = "{h}"\ninsecure = true\n' for h in self.insecure))
        policy = r / "home" / ".config" / "containers" / "policy.json"
        policy.parent.mkdir(parents=True, exist_ok=True)
        policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
        return {"HOME": str(r / "home"), "CONTAINERS_CONF": str(r / "containers.conf"),
                "CONTAINERS_STORAGE_CONF": str(r / "storage.conf"),
                "CONTAINERS_REGISTRIES_CONF": str(r / "registries.conf")}

    def start(self, *, timeout: float = 30) -> PodmanService:
        """Start the service and wait until its socket answers ``/_ping``.

        Raises:
            RuntimeError: podman is missing (scripts/stack.sh engine installs it) or the service
                did not answer within ``timeout`` seconds (its log's tail in the message).
        """
        exe = shutil.which("podman")
        if not exe:
            raise RuntimeError("podman is not installed: run scripts/stack.sh engine")
        self.root.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               **self.write_config()}
        log = open(self.root / "service.log", "wb")  # noqa: SIM115 — the child keeps it
        self.process = subprocess.Popen(
            [exe, "system", "service", "--time=0", self.host], env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        tail = (self.root / "service.log").read_text(errors="replace")[-1500:]
        self.stop()
        raise RuntimeError(f"podman system service did not answer on {self.host}:\n{tail}")

    def ready(self) -> bool:
        """True when the socket answers ``GET /_ping`` with ``OK``."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(str(self.root / "podman.sock"))
                s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                return b"OK" in s.recv(1024)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the service, unmount what its overlay store left mounted under ``root`` and
        remove the image store (1-2 GB: pytest keeps its last three temp folders)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        for point in sorted(_mounts_under(self.root), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        for folder in ("graph", "runroot", "tmp"):
            shutil.rmtree(self.root / folder, ignore_errors=True)


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (/proc/self/mountinfo's fifth field)."""
    prefix = str(root.resolve())
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]
