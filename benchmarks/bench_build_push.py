"""Benchmark: paddlecd build+push vs plain `docker build` + `docker push` of the same Dockerfile.

Side by side in one run, against the embedded registry (scripts/stack.sh up) and the locked cpu base:
  cold    both build with --no-cache and push the new layers;
  cached  both rebuild from a warm cache and push (nothing changed);
and the layer bytes a no-op rebuild+push uploads (registry blob store growth, and the push stream's
"Pushed" vs "Layer already exists" counts). Target (issue 2): toolkit overhead <= 5%, no-op 0 bytes.

Run: .venv/bin/python benchmarks/bench_build_push.py [--rounds 2]
Not a test: prints a table; nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from paddlecd import config, engine
from paddlecd.image import build as builder
from paddlecd.image import lock, variants
from paddlecd.image import push as publish

ROOT = Path(__file__).resolve().parents[1]


def blob_bytes(registry_root: Path) -> int:
    blobs = registry_root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.exists() else 0


def plain(settings, tag: str, *, no_cache: bool) -> tuple[float, list[str]]:
    """docker build (DOCKER_BUILDKIT=1, the same CLI, secrets and args) + docker push; returns seconds, push lines."""
    v = variants.get(settings, "cpu")
    entry = lock.check(settings, v)
    b = engine.pick_builder()
    start = time.perf_counter()
    with builder.secret_args(settings) as secrets:
        cmd = [*b.argv, "-q", "-f", str(ROOT / "images/Dockerfile"), "-t", tag, *secrets,
               "--build-arg", f"BASE={entry.pinned}", *(["--no-cache"] if no_cache else []), str(ROOT / "images")]
        subprocess.run(cmd, env={**os.environ, **dict(b.env)}, check=True, capture_output=True)
    out = subprocess.run([b.argv[0], "push", tag], check=True, capture_output=True, text=True).stdout
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
    ap.add_argument("--registry-root", type=Path, default=ROOT / ".paddlecd/registry")
    args = ap.parse_args()
    base = config.load()
    settings = config.load({"registry.repository": "bench/toolkit"})
    plain_tag = f"{base.registry.url}/bench/plain:cpu"
    rows = {}
    for mode, no_cache in (("cold", True), ("cached", False)):
        t_plain, t_tool = [], []
        for _ in range(args.rounds):
            t_plain.append(plain(base, plain_tag, no_cache=no_cache)[0])
            t_tool.append(toolkit(settings, no_cache=no_cache)[0])
        rows[mode] = (statistics.median(t_plain), statistics.median(t_tool))
    before = blob_bytes(args.registry_root)
    _, lines = toolkit(settings, no_cache=False)
    noop_bytes = blob_bytes(args.registry_root) - before
    pushed = sum(1 for ln in lines if ln.endswith(" Pushed"))
    existing = sum(1 for ln in lines if "Layer already exists" in ln)
    print(f"{'mode':8} {'plain docker (s)':>17} {'paddlecd (s)':>13} {'ratio':>7}")
    for mode, (p, t) in rows.items():
        print(f"{mode:8} {p:17.2f} {t:13.2f} {t / p:7.3f}")
    print(f"no-op rebuild+push: {noop_bytes} bytes added to the registry; layers pushed {pushed}, already present {existing}")
    print(json.dumps({"rounds": args.rounds, "median_seconds": rows, "noop_bytes": noop_bytes,
                      "noop_layers_pushed": pushed}))


if __name__ == "__main__":
    main()
