"""Every script in benchmarks/ runs in its ``--quick`` mode and prints its figures (issue 11: a
benchmark nothing runs rots unnoticed). Speed is never asserted; completion and output are. Each
also leaves the project's state folder ``.paddlecd/`` exactly as it found it (issue 12)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import base

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))
# What each prints when it has measured something: a figure line and its JSON/summary line.
FIGURES = {
    "bench_build_push.py": [
        r"^cold\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+",
        r"^no-op rebuild\+push: \d+ bytes",
        r"^cached build\+push profiled: \d+\.\d+ s wall, engine \d+\.\d+ s, paddlecd \d+\.\d+ s",
        r"^cold build\+push profiled: \d+\.\d+ s wall, engine \d+\.\d+ s, paddlecd \d+\.\d+ s",
        r"^  cold phases \(medians\): build \d+\.\d+ / \d+\.\d+ s, push \d+\.\d+ / \d+\.\d+ s",
    ],
    "bench_ledger.py": [
        r"^\s+40 new\s+promote\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+",
        r"^\s+40 old\s+list",
    ],
    "bench_promote.py": [r"paddlecd\s+[\d.]+ s\s+[\d.]+×\s+wire ≤ [\d,.]+ KiB", r"skopeo copy",
                         r"upgrade gate \(1\.4\.1 against 1\.4\.0-cpu, passed\): [012] "
                         r"requests, ([0-9]|10)\.\d KiB"],
    "bench_upload.py": [
        r"^throughput ratio paddlecd / boto3: \d+\.\d+",
        r"^unchanged re-upload: action=",
        r"^  moto\s+[\d.]+\s+[\d.]+\s+\d\.\d{3}$",  # side by side: moto, Ceph RGW, RGW over HTTPS
        r"^  rgw\s+[\d.]+\s+[\d.]+\s+\d\.\d{3}$",
        r"^  rgw-https\s+[\d.]+\s+[\d.]+\s+\d\.\d{3}$",
    ],
}


def _state_snapshot() -> dict[str, tuple[int, int]]:
    state = ROOT / ".paddlecd"
    return (
        {
            str(p.relative_to(state)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in state.rglob("*")
            if p.is_file()
        }
        if state.exists()
        else {}
    )


def test_every_benchmark_is_covered():
    assert SCRIPTS == sorted(FIGURES), "a new benchmark needs its figures listed here"


# bootstraps the base into its own registry: after the background build (support/base.py)
BOOTSTRAPS = ("bench_build_push.py",)


@pytest.mark.parametrize(
    "script", [pytest.param(s, marks=pytest.mark.uses_base) if s in BOOTSTRAPS else s
               for s in SCRIPTS])
def test_benchmark_quick_mode_prints_its_figures(script, docker_engine, tmp_path_factory):
    extra = []
    if script in BOOTSTRAPS:  # the base from the session's seed registry (support/base.py)
        with base.lock(tmp_path_factory):
            seed = base.seed_host(tmp_path_factory.mktemp("seed-state"))
        extra = ["--base-from", seed] if seed else []
    before = _state_snapshot()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDLECD_")}
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for pattern in FIGURES[script]:
        assert re.search(pattern, run.stdout, re.MULTILINE), f"{pattern!r} not in:\n{run.stdout}"
    if script == "bench_ledger.py":
        rows = json.loads(run.stdout.strip().splitlines()[-1])["rows"]
        assert {(r["path"], r["op"]) for r in rows} >= {
            ("new", "promote"),
            ("new", "checkpoint"),  # the promotion that writes the next checkpoint, apart
            ("old", "promote"),
            ("new", "list"),
        }
        assert all(r["requests"] > 0 and r["down"] > 0 for r in rows)
    assert _state_snapshot() == before, "the benchmark changed the project's .paddlecd/"
