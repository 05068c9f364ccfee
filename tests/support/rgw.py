"""A real Ceph RADOS Gateway (S3) for the suite: one mon, one memstore OSD and radosgw on
127.0.0.1, in a temp dir, over HTTP and HTTPS (a self-signed CA for 127.0.0.1), with one user
made by ``radosgw-admin``. Started once per xdist worker (its own ports, fsid and folder).

The recipe is vstart.sh's (ceph/ceph ``src/vstart.sh``, pacific) cut to what S3 needs: auth off
(``auth_*_required = none``), messenger v2 in ``crc`` mode (radosgw's default ``secure`` mode
waits for an auth handshake that never comes: "auth -13" time-outs), pools of size 1 on one OSD
(``osd crush chooseleaf type = 0``), and ``paxos propose interval = 0.01`` (the default 1 s made
start-up ~9 s; 0.01 s makes it ~2-3 s). Debian packages: ceph-mon ceph-osd radosgw
(``scripts/stack.sh rgw``).

beast runs with ``tcp_nodelay=1``: without it every GET answer waited ~40 ms (Nagle against the
client's delayed ACK; measured 48 ms vs 5 ms a small GET).

``requests`` are the access-log lines of radosgw's beast frontend (``debug rgw = 1``), in the
same ``"METHOD /path HTTP/1.1" status`` form as werkzeug's, so tests count writes server-side.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests as http

from paddlecd import proc
from paddlecd.errors import StorageError
from paddlecd.registry.embedded import free_port

HINT = "bash scripts/stack.sh rgw (apt-get install ceph-mon ceph-osd radosgw)"
_ACCESS = re.compile(r'beast: \S+: (\S+ - \S+ \[[^]]+\] "[A-Z]+ \S+ [^"]+" \d+)')


@dataclass
class RgwServer:
    """A single-node Ceph cluster with radosgw. ``root`` holds ceph.conf, data, logs and certs.

    Attributes:
        endpoint: ``http://127.0.0.1:<port>`` once started.
        https_endpoint: ``https://127.0.0.1:<port>`` (certificate in ``ca_file``).
        key, secret: the S3 credentials of the user ``ci``.
    """

    root: Path
    key: str = field(default_factory=lambda: "CI" + uuid.uuid4().hex[:18].upper())
    secret: str = field(default_factory=lambda: uuid.uuid4().hex + uuid.uuid4().hex[:8])
    kind: str = "rgw"
    processes: list[proc.Background] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mon_port, self.http_port, self.https_port = free_port(), free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{self.http_port}"
        self.https_endpoint = f"https://127.0.0.1:{self.https_port}"
        self.conf = self.root / "ceph.conf"
        self.ca_file = self.root / "certs" / "ca.crt"

    # ------------------------------------------------------------ start-up
    def start(self, *, timeout: float = 60) -> RgwServer:
        """Write ceph.conf, make and start the mon, the OSD and radosgw, create the user, and wait
        until both endpoints answer.

        Raises:
            StorageError: a binary is missing or a daemon does not come up in ``timeout`` s (the
                cause names its log).
        """
        deadline = time.monotonic() + timeout
        for d in ("run", "log", "mon/ceph-a", "osd/ceph-0", "certs"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self._write_certs()
        fsid = str(uuid.uuid4())
        self._write_conf(fsid)
        self._ceph("monmaptool", "--create", "--fsid", fsid, "--addv", "a",
                   f"[v2:127.0.0.1:{self.mon_port}]", str(self.root / "monmap"), conf=False)
        self._ceph("ceph-mon", "--mkfs", "-i", "a", "--monmap", str(self.root / "monmap"))
        self._daemon("ceph-mon", "-i", "a")
        osd_uuid = str(uuid.uuid4())
        osd_id = self._ceph("ceph", "osd", "new", osd_uuid, deadline=deadline).strip()
        self._ceph("ceph-osd", "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
        self._daemon("ceph-osd", "-i", osd_id)
        self._daemon("radosgw", "-n", "client.rgw")
        self._ceph("radosgw-admin", "user", "create", "--uid", "ci", "--display-name", "ci",
                   "--access-key", self.key, "--secret", self.secret, deadline=deadline)
        while not (self._answers(self.endpoint) and self._answers(self.https_endpoint)):
            self._check_running(deadline)
            time.sleep(0.05)
        return self

    def _write_conf(self, fsid: str) -> None:
        r = self.root
        cert, key = r / "certs" / "ca.crt", r / "certs" / "ca.key"
        frontends = (f"beast endpoint=127.0.0.1:{self.http_port} "
                     f"ssl_endpoint=127.0.0.1:{self.https_port} "
                     f"ssl_certificate={cert} ssl_private_key={key} tcp_nodelay=1")
        self.conf.write_text(f"""[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{self.mon_port}
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms mon service mode = crc
ms mon cluster mode = crc
ms client mode = crc
ms service mode = crc
ms cluster mode = crc
run dir = {r}/run
admin socket = {r}/run/$name.asok
log file = {r}/log/$name.log
pid file = {r}/run/$name.pid
mon data = {r}/mon/$cluster-$id
osd data = {r}/osd/$cluster-$id
osd objectstore = memstore
memstore device bytes = 8589934592
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
paxos propose interval = 0.01
mon osd auto mark in = true
osd heartbeat grace = 60
[client.rgw]
rgw frontends = {frontends}
rgw data = {r}/rgw
rgw gc obj min wait = 1
rgw gc processor period = 2
debug rgw = 1
""")

    def _write_certs(self) -> None:
        proc.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3",
                  "-keyout", str(self.root / "certs" / "ca.key"), "-out", str(self.ca_file),
                  "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                 what="creating the RGW test CA")

    def _ceph(self, *cmd: str, conf: bool = True, deadline: float | None = None) -> str:
        """Run one Ceph tool to its end (until ``deadline``, monotonic, default 30 s from now)."""
        argv = [*cmd, "-c", str(self.conf)] if conf else list(cmd)
        left = max(1.0, (deadline or time.monotonic() + 30) - time.monotonic())
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=left, check=False)
        except FileNotFoundError as e:
            raise StorageError(f"{cmd[0]} is not installed", HINT) from e
        except subprocess.TimeoutExpired as e:
            raise StorageError(f"{' '.join(cmd[:3])} timed out in {self.root}",
                               f"see {self.root / 'log'}") from e
        if done.returncode:
            raise StorageError(f"{' '.join(cmd[:3])} failed: {done.stderr.strip()[-400:]}",
                               f"see {self.root / 'log'}")
        return done.stdout

    def _daemon(self, *cmd: str) -> None:
        log = self.root / "log" / f"{cmd[0]}.out"
        self.processes.append(proc.start([*cmd, "-f", "-c", str(self.conf)], log=log,
                                         error=StorageError, hint=HINT))

    def _check_running(self, deadline: float) -> None:
        for p in self.processes:
            if not p.running():
                raise StorageError(f"{p.log.stem} exited during start-up", f"see {p.log}")
        if time.monotonic() > deadline:
            raise StorageError(f"RGW in {self.root} did not answer in time",
                               f"see {self.root / 'log'}")

    def _answers(self, url: str) -> bool:
        try:
            return http.get(url, timeout=2, verify=str(self.ca_file)).status_code < 500
        except http.RequestException:
            return False

    # ------------------------------------------------------------ what tests read
    @property
    def requests(self) -> list[str]:
        """radosgw's access-log lines so far, oldest first, complete up to this call (a marker
        request is sent and waited for: the log is written by a thread of its own)."""
        marker = f"/paddlecd-log-mark-{uuid.uuid4().hex}"
        http.get(self.endpoint + marker, timeout=5)
        log = self.root / "log" / "client.rgw.log"
        for _ in range(500):
            lines = _ACCESS.findall(log.read_text(errors="replace"))
            for i in range(len(lines) - 1, -1, -1):
                if marker in lines[i]:
                    return [line for line in lines[:i] if "/paddlecd-log-mark-" not in line]
            time.sleep(0.01)
        raise AssertionError(f"the marker request never reached {log}")

    def stop(self) -> None:
        """Stop radosgw, the OSD and the mon, newest first: SIGTERM, then SIGKILL after 10 s
        (radosgw: 1 s; its clean shutdown waits ~4 s for its threads, and memstore keeps
        nothing worth a clean close)."""
        for p in reversed(self.processes):
            p.stop(grace=1 if p.log.stem == "radosgw" else 10)
        self.processes.clear()
