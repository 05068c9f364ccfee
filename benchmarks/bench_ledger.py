"""Promotion, ``release.list`` and ``release.show`` against a ledger of N prior records, the old
read path vs checkpoints, side by side, through a relay that counts requests and bytes, with delay.

Usage: .venv/bin/python benchmarks/bench_ledger.py [--records 0,100,1000] [--variants 4]
       [--delay-ms 20] [--rounds 3] [--quick]
       PADDLECD_REGISTRY_SERVER=/path/to/distribution-3/registry … (a registry that pages tag
       lists; default: Debian's docker-registry, distribution 2.8.2, which returns them whole)

For each N a fresh release repository of a fresh distribution registry (127.0.0.1, plain HTTP) is
pre-filled with N promotion records spread over ``--variants`` variants (one a day, as nightly
releases; each with its immutable release tag on a distinct manifest, and the moving tags) — written
directly with the ledger's own record format, as an older paddlecd left them, not by N promotions.
Every operation then runs through the relay (benchmarks/relay.py, ``--delay-ms`` per request, the
registry "that far away") as a fresh process would (in-process caches cleared):

* ``old``  one manifest GET per record ever written, no checkpoint or head (``read_each`` of
           tests/support/ledger_reads.py, the tests' oracle of the ledger);
* ``new``  checkpoint and head (src/paddlecd/release/ledger.py): the first promotion after the
           upgrade lists the tags, reads every record once and writes the variant's checkpoint
           (``upgrade``); later ones read checkpoint, head and the few records chained after it by
           name, and list the tags once, in the reconcile. The other variants are given their
           checkpoints before (as their own promotions since the upgrade would have written them),
           so ``list`` shows the steady state. ``no-attest`` is the same promotion without the
           attestation lookup and copy (its evidence check passes as if verified): what it
           adds to a promotion.

Each promotion promotes a fresh small image (mounted, no layer moves) of variant ``cpu`` with full
evidence. ``--kinds`` also prints, per operation, requests and KiB per kind (``GET manifests``,
``GET tags/list``, …). Targets at N=1000 of 4 variants: requests independent of N
(beyond paging the tag list), ≤ 64 KiB on the wire, wall ≤ 1.2× the first promotion (N=0).
Everything lives in a temporary folder, including paddlecd's state folder: the project's
``.paddlecd/`` is never touched.
Not a test (tests/integration/test_benchmarks.py runs ``--quick``, asserting figures are printed).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

import semver  # noqa: E402
from attested import key_flags, passing_candidate  # noqa: E402
from relay import Relay, Wire  # noqa: E402

from paddlecd import config  # noqa: E402
from paddlecd.registry.client import OCI_MANIFEST, RegistryClient  # noqa: E402
from paddlecd.registry.embedded import RegistryServer, free_port  # noqa: E402
from paddlecd.release import ledger, plan, policy  # noqa: E402
from paddlecd.release import promote as release  # noqa: E402

from support.ledger_reads import read_each  # noqa: E402

CANDIDATES = "bench/candidate"
VARIANTS = ("cpu", "cu118", "cu126", "rocm62", "cu129", "xpu")


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(client: RegistryClient, repo: str, data: bytes) -> dict:
    client.upload_blob(repo, _sha(data), data, len(data))
    return {"digest": _sha(data), "size": len(data)}


def push_image(client: RegistryClient, repo: str, note: str) -> str:
    """A small random image (config + one 4 KiB layer) by digest; returns the digest."""
    layer = _blob(client, repo, os.urandom(4096))
    cfg = _blob(
        client,
        repo,
        json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "note": note,
                "rootfs": {"type": "layers", "diff_ids": []},
            }
        ).encode(),
    )
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
        }
    )
    return client.put_manifest(
        repo, _sha(manifest.encode()), manifest.encode(), OCI_MANIFEST
    ).digest


def prefill(client: RegistryClient, repo: str, n: int, variants: int) -> None:
    """N promotion records (round-robin over the variants, one a day ending yesterday), each with
    its immutable tag on a distinct manifest, then each variant's moving tags: what N promotions by
    an older paddlecd leave, written with 8 threads instead."""
    names = VARIANTS[:variants]
    layer = _blob(client, repo, os.urandom(4096))
    cfg = _blob(
        client,
        repo,
        b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}',
    )
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=n + 1)
    jobs: list[tuple[str, bytes, ledger.Record | None]] = []
    actions: dict[str, list[policy.Action]] = {v: [] for v in names}
    for i in range(n):
        variant, when = names[i % len(names)], start + dt.timedelta(days=i)
        version = semver.Version(0, 1 + i // 1000, (i // len(names)) % 1000)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "annotations": {"n": str(i)},
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
            }
        )
        digest = _sha(manifest.encode())
        state = policy.fold(actions[variant], variant)
        record_id = ledger.new_id(variant, when)
        actions[variant].append(policy.Action("promote", version, digest, record_id))
        record = ledger.Record(
            id=record_id,
            action="promote",
            variant=variant,
            version=str(version),
            digest=digest,
            source=f"{client.registry}/{CANDIDATES}@{digest}",
            target=f"{client.registry}/{repo}",
            tags=(policy.release_tag(version, variant), *policy.moving_tags(version, variant)),
            previous={
                t: (f"{state.moving[t]}@{state.digest_of(t)}" if t in state.moving else None)
                for t in policy.moving_tags(version, variant)
            },
            evidence=f"{digest}@{when:%Y-%m-%dT%H:%M:%SZ}",
            who="nightly (github run 1234567890)",
            evidence_summary={
                "passed": True,
                "checks": 9,
                "failed": [],
                "created": f"{when:%Y-%m-%dT%H:%M:%SZ}",
            },
            when=when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        )
        jobs.append((policy.release_tag(version, variant), manifest.encode(), record))

    def write(job: tuple[str, bytes, ledger.Record | None]) -> None:
        tag, manifest, record = job
        client.put_manifest(repo, tag, manifest, OCI_MANIFEST)
        if record:  # what ledger.append writes, without its absence check (the ids are fresh)
            body = record.to_json()
            client.upload_blob(repo, _sha(body), body, len(body))
            client.put_manifest(
                repo,
                record.id,
                ledger._artifact_manifest(
                    _sha(body), len(body), ledger.RECORD_TYPE, {ledger.ANNOTATION: body.decode()}
                ),
                OCI_MANIFEST,
            )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, jobs))
        moving = []
        for variant in names:
            state = policy.fold(actions[variant], variant)
            manifests = {r.digest: m for _, m, r in jobs if r and r.variant == variant}
            moving += [(t, manifests[state.digest_of(t) or ""], None) for t in state.moving]
        list(pool.map(write, moving))


@contextlib.contextmanager
def without_attestation() -> Iterator[None]:
    """Run promotions without the attestation lookup and copy (as if unattested; its
    evidence check passes as if verified), to measure what the lookup costs."""
    saved = plan.evidence_problem
    plan.evidence_problem = lambda *_a, **_k: (None, None)  # type: ignore[assignment]
    try:
        yield
    finally:
        plan.evidence_problem = saved  # type: ignore[assignment]


@contextlib.contextmanager
def old_read_path() -> Iterator[None]:
    """Run promotions and queries with the read path before checkpoints (one GET per record)."""
    saved = ledger.read, ledger.read_view, ledger.read_by_name
    ledger.read = read_each  # type: ignore[assignment]
    ledger.read_by_name = lambda *_a, **_k: None  # type: ignore[assignment]  # always list

    def each(
        client: RegistryClient, repo: str, variant: str, tags: list[str], **_: object
    ) -> ledger.View:
        return ledger.View(
            variant=variant, records=tuple(read_each(client, repo, variant, tags))
        )

    ledger.read_view = each  # type: ignore[assignment]
    try:
        yield
    finally:
        ledger.read, ledger.read_view, ledger.read_by_name = saved  # type: ignore[assignment]


class Bench:
    """One registry, one relay, one state folder; measures operations through the relay."""

    def __init__(self, work: Path, delay: float, kinds: bool = False):
        self.kinds = kinds
        self.server = RegistryServer(work / "registry", port=free_port()).start()
        self.relay = Relay(self.server.port, delay)
        self.direct = RegistryClient(self.server.host, insecure=True)
        self.state = work / "state"
        self.rows: list[dict] = []
        self.versions: dict[str, int] = {}

    def close(self) -> None:
        self.relay.close()
        self.server.stop()

    def settings(self, repo: str) -> config.Settings:
        return config.load(
            {
                "registry.url": self.relay.host,
                "registry.repository": CANDIDATES,
                "release.repository": repo,
                "state_dir": str(self.state),
                **key_flags(self.state),
            },
            root=ROOT,
            environ={},
        )

    def measure(self, n: int, path: str, op: str, fn: Callable[[], object]) -> dict:
        ledger.clear_cache()  # as a fresh process
        self.relay.reset()
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
        wire: Wire = self.relay.reset()
        if op == "promote" and getattr(result, "checkpoint", None):
            op = "checkpoint"  # this promotion also wrote the variant's next checkpoint
        row = {
            "records": n,
            "path": path,
            "op": op,
            "requests": wire.requests,
            "down": wire.down,
            "up": wire.up,
            "seconds": seconds,
        }
        self.rows.append(row)
        print(
            f"  {n:>7} {path:4} {op:10} {wire.requests:>8} {wire.down / 1024:>9.1f}"
            f" {wire.up / 1024:>8.1f} {seconds:>7.2f}",
            flush=True,
        )
        if self.kinds:
            print(f"          {wire.by_kind()}", flush=True)
        return row

    def promotion(self, repo: str) -> Callable[[], object]:
        """A promotion of a fresh cpu candidate to the next version (the candidate made untimed)."""
        s = self.settings(repo)
        digest = push_image(self.direct, CANDIDATES, f"{repo}-{time.time_ns()}")
        reference = f"{self.relay.host}/{CANDIDATES}@{digest}"
        passing_candidate(s, digest, reference)
        self.versions[repo] = self.versions.get(repo, 0) + 1
        version = f"9.0.{self.versions[repo]}"
        return lambda: release.promote(s, variant="cpu", version=version, execute=True)

    def run(self, n: int, variants: int, rounds: int) -> None:
        repo = f"bench/release-{n}"
        start = time.perf_counter()
        prefill(self.direct, repo, n, variants)
        took = time.perf_counter() - start
        print(f"  (pre-filled {n} records of {variants} variants in {took:.1f} s)", flush=True)
        # Every variant but cpu has been promoted since the upgrade: it has its checkpoint (steady
        # state); cpu's first promotion below is the upgrade (no checkpoint yet), measured apart.
        tags = self.direct.list_tags(repo)
        for variant in ledger.variants_in(tags):
            if variant != "cpu":
                ledger.write_checkpoint(
                    self.direct, repo, ledger.read_view(self.direct, repo, variant, tags)
                )
        s = self.settings(repo)
        with old_read_path():
            for _ in range(rounds):
                self.measure(n, "old", "promote", self.promotion(repo))
            self.measure(n, "old", "list", lambda: release.list_releases(s))
            self.measure(n, "old", "show", lambda: release.show(s, "9.0.1-cpu"))
        self.measure(n, "new", "upgrade", self.promotion(repo))
        # `rounds` promotions that read the checkpoint's state, and the one (every
        # CHECKPOINT_EVERY records) that also writes the next checkpoint, reported apart
        mine = []
        while len(mine) < rounds + ledger.CHECKPOINT_EVERY and (
            sum(r["op"] == "promote" for r in mine) < rounds
            or not any(r["op"] == "checkpoint" for r in mine)
        ):
            mine.append(self.measure(n, "new", "promote", self.promotion(repo)))
        with without_attestation():
            for _ in range(rounds):
                self.measure(n, "new", "no-attest", self.promotion(repo))
        self.measure(n, "new", "list", lambda: release.list_releases(s))
        self.measure(n, "new", "show", lambda: release.show(s, "9.0.1-cpu"))


def summary(rows: list[dict]) -> list[dict]:
    """Medians per (records, path, op), wall time relative to the first promotion (smallest N)."""
    keys = sorted(
        {(r["records"], r["path"], r["op"]) for r in rows}, key=lambda k: (k[1], k[2], k[0])
    )
    first = [
        r["seconds"]
        for r in rows
        if r["records"] == min(x["records"] for x in rows) and r["op"] == "promote"
        and r["path"] == "new"
    ]
    base = statistics.median(first)
    out = []
    for n, path, op in keys:
        mine = [r for r in rows if (r["records"], r["path"], r["op"]) == (n, path, op)]
        med = {
            k: statistics.median(r[k] for r in mine) for k in ("requests", "down", "up", "seconds")
        }
        out.append({"records": n, "path": path, "op": op, **med, "vs_first": med["seconds"] / base})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="0,100,1000", help="comma-separated prior record counts")
    ap.add_argument(
        "--variants",
        type=int,
        default=4,
        help=f"variants the records spread over (≤ {len(VARIANTS)})",
    )
    ap.add_argument("--delay-ms", type=float, default=20.0, help="relay delay per request, ms")
    ap.add_argument(
        "--rounds", type=int, default=3, help="promotions per (N, path); medians reported"
    )
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes, one round (what the test runs)"
    )
    ap.add_argument("--kinds", action="store_true",
                    help="also print requests and KiB per kind of request (GET manifests, …)")
    args = ap.parse_args()
    counts = [int(x) for x in args.records.split(",")]
    if args.quick:
        counts, args.rounds, args.delay_ms = [0, 40], 1, 5.0
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp:
        bench = Bench(Path(tmp), args.delay_ms / 1000, kinds=args.kinds)
        try:
            binary = os.environ.get("PADDLECD_REGISTRY_SERVER") or "docker-registry"
            version = subprocess.run([binary, "--version"], capture_output=True, text=True)
            print(f"registry: {binary} ({version.stdout.strip()})")
            print(f"relay delay {args.delay_ms:g} ms per request; {args.variants} variants; "
                  f"rounds {args.rounds}")
            print(f"  {'records':>7} {'path':4} {'operation':10} {'requests':>8} {'KiB down':>9} "
                  f"{'KiB up':>8} {'wall s':>7}")
            for n in counts:
                bench.run(n, args.variants, args.rounds)
        finally:
            bench.close()
    table = summary(bench.rows)
    print("\nmedians; wall relative to the first promotion (N=0):")
    print(f"  {'records':>7} {'path':4} {'operation':10} {'requests':>8} {'KiB wire':>9} "
          f"{'wall s':>7} {'×first':>7}")
    for r in table:
        print(
            f"  {r['records']:>7} {r['path']:4} {r['op']:10} {r['requests']:>8.0f} "
            f"{(r['down'] + r['up']) / 1024:>9.1f} {r['seconds']:>7.2f} {r['vs_first']:>7.2f}"
        )
    print(
        json.dumps(
            {
                "delay_ms": args.delay_ms,
                "variants": args.variants,
                "rounds": args.rounds,
                "rows": table,
            }
        )
    )


if __name__ == "__main__":
    main()
