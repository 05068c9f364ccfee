"""Promotion of a ≥1 GB image: ``paddlecd`` vs ``docker pull``+``tag``+``push`` vs ``skopeo copy``.

Usage: .venv/bin/python benchmarks/bench_promote.py [--mb 1024] [--files 8] [--rounds 3] [--quick]

Setup (not timed): a tarball of ``--files`` files of random bytes (``--mb`` MiB in total, so gzip
cannot shrink it) is ``docker import``-ed and pushed as the candidate ``bench/candidate`` to a fresh
distribution registry on 127.0.0.1 (plain HTTP; the engine treats loopback registries as insecure).
Every client then reaches the registry through a byte-counting TCP relay, so "bytes moved" is what
crossed the wire in both directions, for each method alike. Each method promotes the same digest
into its own fresh repository of the same registry:

* paddlecd   ``release.promote`` (plan, evidence, mount blobs, ledger, 4 tags, verify);
* docker     ``docker pull repo@digest`` (local copy removed first) + ``docker tag`` +
  ``docker push`` of
             the immutable tag and the 3 moving tags;
* skopeo     ``skopeo copy`` of the immutable tag + 3 more ``skopeo copy`` for the moving tags. Its
             blob-info cache (/var/lib/containers/cache) does not know the fresh random blobs in
             round 0 (as on a fresh CI runner), so round 0 uploads every byte; later rounds mount.
             Both are shown.

Each method runs ``--rounds`` times into fresh repositories (the docker method's pulled image is
removed between rounds); medians are reported. Also reported: growth of the registry's blob
storage. Issue 3 targets: paddlecd moves ≤ 64 KiB and is ≥ 50× faster than pull+tag+push. Then
the upgrade gate alone: what comparing a next candidate (1.4.1) with round 0's 1.4.0 asks of the
release registry beyond the plan's own reads (issue 25 target: ≤ 2 requests, ≤ 10 KiB). Needs
dockerd, skopeo, docker-registry and ~5 GB of disk; ``--quick`` (8 MiB, one round) is what
tests/integration/test_benchmarks.py runs. paddlecd's state folder is a temporary one: the project's
``.paddlecd/`` is never touched.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import semver  # noqa: E402
from attested import build_provenance, key_flags, passing_candidate  # noqa: E402

from paddlecd import config, engine, proc  # noqa: E402
from paddlecd.registry.embedded import RegistryServer, free_port  # noqa: E402
from paddlecd.release import promote as release  # noqa: E402

TAGS = ("1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu")


class CountingRelay:
    """A TCP relay 127.0.0.1:<port> → target port that counts bytes each way (the wire, as seen by
    clients)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.up = self.down = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.sock.accept()
            server = socket.create_connection(("127.0.0.1", self.target_port))
            for s in (client, server):  # no Nagle delay: the relay must not add latency per request
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while data := src.recv(1 << 20):
                dst.sendall(data)
                with self.lock:
                    setattr(self, way, getattr(self, way) + len(data))
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def reset(self) -> tuple[int, int]:
        with self.lock:
            out, self.up, self.down = (self.up, self.down), 0, 0
        return out


def storage_bytes(server: RegistryServer) -> int:
    blobs = server.root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data"))


def make_rootfs(path: Path, mb: int, files: int) -> None:
    chunk = 1 << 20
    with tarfile.open(path, "w") as tar:
        for i in range(files):
            data_path = path.parent / f"random-{i}.bin"
            with open(data_path, "wb") as fh:
                for _ in range(mb // files):
                    fh.write(os.urandom(chunk))
            tar.add(data_path, arcname=f"data/random-{i}.bin")
            data_path.unlink()


def paddlecd_settings(host: str, state: Path, n: int) -> config.Settings:
    flags = {"registry.url": host, "registry.repository": "bench/candidate",
             "state_dir": str(state), "release.repository": f"bench/release-paddlecd-{n}"}
    return config.load({**flags, **key_flags(state)}, root=ROOT, environ={})


def attest_once(host: str, state: Path, digest: str) -> None:
    """One passing, signed verify run of the candidate and the build provenance push attaches,
    made before any round is timed: a promotion's cost, not verify's, is measured, and every
    round sees the usual one run per digest (attesting again each round made later rounds
    verify 2, 3, … runs). A promotion copies four artifacts: the bundle, the .att tag, the
    JUnit/log referrer and the provenance."""
    settings, reference = paddlecd_settings(host, state, 0), f"{host}/bench/candidate@{digest}"
    passing_candidate(settings, digest, reference)
    build_provenance(settings, digest, reference)


def run_paddlecd(host: str, state: Path, digest: str, n: int) -> None:
    release.promote(paddlecd_settings(host, state, n), variant="cpu", version="1.4.0",
                    execute=True)


def gate_cost(host: str, state: Path, digest: str, relay: CountingRelay) -> tuple[int, int, str]:
    """(requests, bytes on the wire, status) of the upgrade gate of promoting another digest as
    1.4.1 after round 0's 1.4.0: the plan's reads (ledger head, candidate attestation) are made
    first and not counted, as a promotion makes them anyway."""
    from paddlecd.registry.client import client_for
    from paddlecd.release import gates, ledger, plan
    from paddlecd.verify import registry_store

    settings = paddlecd_settings(host, state, 0)
    att = registry_store.check(settings, client_for(settings), "bench/candidate", digest, "cpu")
    dst, ref = plan.target(settings)
    view = ledger.read_head(dst, ref.repository, "cpu") or ledger.read_view(
        dst, ref.repository, "cpu", dst.list_tags(ref.repository))
    relay.reset()
    before = dst.stats["requests"]
    result = gates.gate(settings, dst, ref.repository, variant="cpu",
                        version=semver.Version.parse("1.4.1"), digest="sha256:" + "0" * 64,
                        state=view.fold(), records=view.records, attestation=att)
    up, down = relay.reset()
    return dst.stats["requests"] - before, up + down, result.status


def run_docker(host: str, digest: str, n: int) -> None:
    src = f"{host}/bench/candidate@{digest}"
    proc.run(["docker", "pull", "-q", src], what="docker pull")
    for tag in TAGS:
        proc.run(
            ["docker", "tag", src, f"{host}/bench/release-docker-{n}:{tag}"], what="docker tag"
        )
        proc.run(
            ["docker", "push", "-q", f"{host}/bench/release-docker-{n}:{tag}"], what="docker push"
        )


def clean_docker(host: str, digest: str, n: int) -> None:
    """Remove what the docker method pulled, so the next round pulls again."""
    for tag in TAGS:
        engine.remove_image(f"{host}/bench/release-docker-{n}:{tag}")
    engine.remove_image(f"{host}/bench/candidate@{digest}")


def run_skopeo(host: str, digest: str, n: int) -> None:
    flags = ["--src-tls-verify=false", "--dest-tls-verify=false"]
    for tag in TAGS:
        proc.run(["skopeo", "copy", "-q", *flags, f"docker://{host}/bench/candidate@{digest}",
                  f"docker://{host}/bench/release-skopeo-{n}:{tag}"], what="skopeo copy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--mb", type=int, default=1024, help="image size in MiB (random, incompressible)"
    )
    ap.add_argument("--files", type=int, default=8, help="number of random files in the layer")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per method (median reported)")
    ap.add_argument("--quick", action="store_true",
                    help="8 MiB in 2 files, one round (what the test runs)")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.files, args.rounds = 8, 2, 1
    with tempfile.TemporaryDirectory(prefix="bench-promote-") as tmp:
        work = Path(tmp)
        server = RegistryServer(work / "registry", port=free_port()).start()
        relay = CountingRelay(server.port)
        host = f"127.0.0.1:{relay.port}"
        local = f"{host}/bench/candidate:cpu-bench"
        try:
            print(f"setup: {args.mb} MiB random rootfs → docker import → push {local}", flush=True)
            make_rootfs(work / "rootfs.tar", args.mb, args.files)
            engine.import_rootfs(str(work / "rootfs.tar"), local)
            (work / "rootfs.tar").unlink()
            digest = engine.push(local)
            engine.remove_image(local)  # docker pull must really download
            attest_once(host, work / "state", digest)
            relay.reset()
            print(
                f"candidate {digest}; image blobs in the registry: "
                f"{storage_bytes(server) / 2**20:.0f} MiB\n",
                flush=True,
            )
            results: dict[str, list[tuple[float, int, int, int]]] = {}
            for n in range(args.rounds):
                for name, fn in (
                    ("paddlecd", lambda: run_paddlecd(host, work / "state", digest, n)),
                    ("skopeo copy", lambda: run_skopeo(host, digest, n)),
                    ("docker pull+tag+push", lambda: run_docker(host, digest, n)),
                ):
                    before = storage_bytes(server)
                    start = time.perf_counter()
                    fn()
                    seconds = time.perf_counter() - start
                    up, down = relay.reset()
                    grown = storage_bytes(server) - before
                    # skopeo's blob-info cache learns where blobs are after round 0
                    if name.startswith("skopeo"):
                        name += " (cold cache)" if n == 0 else " (warm cache)"
                    results.setdefault(name, []).append((seconds, up, down, grown))
                    print(
                        f"round {n} {name:28} {seconds:8.2f} s  up {up:>13,} B  "
                        f"down {down:>13,} B  storage +{grown:,} B",
                        flush=True,
                    )
                    if name.startswith("docker"):
                        clean_docker(host, digest, n)
            gate = gate_cost(host, work / "state", digest, relay)
        finally:
            engine.remove_image(local)
            server.stop()
    median = {name: statistics.median(r[0] for r in rows) for name, rows in results.items()}
    print(
        "\nmedian over each method's rounds; "
        "wall time relative to paddlecd (higher = paddlecd faster):"
    )
    for name, rows in results.items():
        wire = max(up + down for _, up, down, _ in rows)
        print(f"  {name:28} {median[name]:8.2f} s  {median[name] / median['paddlecd']:8.1f}×   "
              f"wire ≤ {wire / 1024:,.1f} KiB per promotion")
    print(f"upgrade gate (1.4.1 against 1.4.0-cpu, {gate[2]}): {gate[0]} requests, "
          f"{gate[1] / 1024:.1f} KiB on the wire")


if __name__ == "__main__":
    main()
