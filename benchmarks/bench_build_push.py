"""Benchmark: paddlecd build+push vs plain `docker build` + `docker push` of the same Dockerfile.

Side by side in one run, against a fresh distribution registry on 127.0.0.1 and the cpu base
bootstrapped into it (debootstrap + PyPI paddlepaddle; cached by the engine after the first time):
  cold    both build with --no-cache and push the new layers;
  cached  both rebuild from a warm cache and push (nothing changed);
and the layer bytes a no-op rebuild+push uploads (registry blob store growth, and the push stream's
"Pushed" vs "Layer already exists" counts). Target (issue 2): toolkit overhead <= 5%, no-op 0 bytes.

Run: .venv/bin/python benchmarks/bench_build_push.py [--rounds 2] [--quick] [--profile]
``--profile`` also runs one cached build+push under cProfile and prints where its wall time goes:
the engine's own work (the builder subprocess and the push stream) against paddlecd's (issue 11:
"profile, don't guess").
``--quick`` is one round plus the profile (what tests/integration/test_benchmarks.py runs).
Registry, lock and candidate records live in a temporary folder: the project's ``.paddlecd/`` is
never touched (a run once left ``.paddlecd/candidates/cpu.json`` pointing at its throw-away
repository, issue 12).
Not a test: prints a table; nothing asserts on time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from paddlecd import config, engine  # noqa: E402
from paddlecd.image import bootstrap, lock, variants  # noqa: E402
from paddlecd.image import build as builder  # noqa: E402
from paddlecd.image import push as publish  # noqa: E402
from paddlecd.localstack import RegistryServer, free_port  # noqa: E402


def blob_bytes(registry_root: Path) -> int:
    blobs = registry_root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.exists() else 0


def plain(settings, tag: str, *, no_cache: bool) -> tuple[float, list[str]]:
    """docker build (DOCKER_BUILDKIT=1, the same CLI, secrets and args) + docker push; returns
    seconds, push lines."""
    v = variants.get(settings, "cpu")
    entry = lock.check(settings, v)
    b = engine.pick_builder()
    start = time.perf_counter()
    with builder.secret_args(settings) as secrets:
        cmd = [
            *b.argv,
            "-q",
            "-f",
            str(ROOT / "images/Dockerfile"),
            "-t",
            tag,
            *secrets,
            "--build-arg",
            f"BASE={entry.pinned}",
            *(["--no-cache"] if no_cache else []),
            str(ROOT / "images"),
        ]
        subprocess.run(cmd, env={**os.environ, **dict(b.env)}, check=True, capture_output=True)
    out = subprocess.run(
        [b.argv[0], "push", tag], check=True, capture_output=True, text=True
    ).stdout
    return time.perf_counter() - start, out.splitlines()


def toolkit(settings, *, no_cache: bool) -> tuple[float, list[str]]:
    lines: list[str] = []
    start = time.perf_counter()
    builder.build(settings, "cpu", no_cache=no_cache)
    publish.push(settings, "cpu", on_progress=lines.append)
    return time.perf_counter() - start, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one round (what the test runs)")
    ap.add_argument("--profile", action="store_true", help="profile one cached build+push")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 1
        args.profile = True  # so the profile split cannot rot either
    with tempfile.TemporaryDirectory(prefix="bench-build-push-") as tmp:
        server = RegistryServer(Path(tmp) / "registry", port=free_port()).start()
        try:
            run(args.rounds, server, Path(tmp) / "state", profile=args.profile)
        finally:
            server.stop()
            # remove the tags this run made (its registry's host), no one else's
            # one listing call (images.list() inspects each image and races a concurrent remove)
            for image in engine.client().api.images():
                for tag in image.get("RepoTags") or ():
                    if tag.startswith(f"{server.host}/"):
                        engine.remove_image(tag)


def profile_cached(settings) -> dict[str, float]:
    """One cached build+push under cProfile; prints the 12 costliest calls by cumulative time and
    returns ``{"wall": s, "engine": s, "paddlecd": s}``, where "engine" is the time spent waiting on
    the builder subprocess and reading the engine's push stream (the work plain docker does too) and
    "paddlecd" the rest (probes, registry read-back, records)."""
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    toolkit(settings, no_cache=False)
    prof.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(prof)
    def cumulative(module: str, function: str) -> float:
        return sum(
            row[3]
            for (path, _line, name), row in stats.stats.items()  # type: ignore[attr-defined]
            if name == function and path.endswith(module)
        )

    # the builder subprocess (proc._stream reads it until it exits) and the engine's push stream
    waits = cumulative("paddlecd/proc.py", "_stream")
    push_stream = cumulative("paddlecd/engine.py", "decode_stream")
    engine_s = waits + push_stream
    stats.sort_stats("cumulative").print_stats(r"paddlecd|subprocess|docker", 12)
    return {"wall": wall, "engine": engine_s, "paddlecd": wall - engine_s}


def run(rounds: int, server: RegistryServer, state: Path, *, profile: bool = False) -> None:
    flags = {"registry.url": server.host, "state_dir": str(state)}
    base = config.load(flags, root=ROOT)
    settings = config.load({**flags, "registry.repository": "bench/toolkit"}, root=ROOT)
    bootstrap.bootstrap(base, "cpu")  # into this registry, pinned in <state>/lock.local.yaml
    lock.lock(base, ["cpu"])
    plain_tag = f"{base.registry.url}/bench/plain:cpu"
    rows = {}
    for mode, no_cache in (("cold", True), ("cached", False)):
        t_plain, t_tool = [], []
        for _ in range(rounds):
            t_plain.append(plain(base, plain_tag, no_cache=no_cache)[0])
            t_tool.append(toolkit(settings, no_cache=no_cache)[0])
        rows[mode] = (statistics.median(t_plain), statistics.median(t_tool))
    before = blob_bytes(server.root)
    _, lines = toolkit(settings, no_cache=False)
    noop_bytes = blob_bytes(server.root) - before
    pushed = sum(1 for ln in lines if ln.endswith(" Pushed"))
    existing = sum(1 for ln in lines if "Layer already exists" in ln)
    print(f"{'mode':8} {'plain docker (s)':>17} {'paddlecd (s)':>13} {'ratio':>7}")
    for mode, (p, t) in rows.items():
        print(f"{mode:8} {p:17.2f} {t:13.2f} {t / p:7.3f}")
    print(
        f"no-op rebuild+push: {noop_bytes} bytes added to the registry; layers pushed {pushed}, "
        f"already present {existing}"
    )
    doc = {"rounds": rounds, "median_seconds": rows, "noop_bytes": noop_bytes,
           "noop_layers_pushed": pushed}
    if profile:
        split = profile_cached(settings)
        print(
            f"cached build+push profiled: {split['wall']:.3f} s wall, engine "
            f"{split['engine']:.3f} s, paddlecd {split['paddlecd']:.3f} s"
        )
        doc["profile_seconds"] = split
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
