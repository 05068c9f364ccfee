"""README command 1, exactly as a user runs it: `./scripts/demo.sh` on the embedded default (Docker
engine, distribution registry on 127.0.0.1:5000, file:// artifact store), twice — the second run
must also succeed (safe) and reuse the base, the layers, the release and the upload."""

from __future__ import annotations

import json
import os
import subprocess

from filelock import FileLock

from support import ROOT


def demo(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts/demo.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        stdin=subprocess.DEVNULL,
    )


def test_readme_command_one_runs_the_whole_pipeline_twice(tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLECD_", "DOCKER_CONFIG"))}
    # share the bootstrap lock with the paddle_base fixture: one debootstrap at a time on this
    # engine
    with FileLock(str(tmp_path_factory.getbasetemp().parent / "paddle-base.lock")):
        first = demo(env)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-3000:]
    for step in (
        "==> build push verify (cpu)",
        "==> promote",
        "==> deploy release",
        "==> upload the trained model",
    ):
        assert step in first.stdout
    candidate = json.loads((ROOT / ".paddlecd/candidates/cpu.json").read_text())
    evidence = json.loads(
        (ROOT / ".paddlecd/evidence" / f"{candidate['digest'][7:]}.json").read_text()
    )
    assert (
        evidence["passed"] is True
        and f"evidence:   .paddlecd/evidence/{candidate['digest'][7:]}.json" in first.stdout
    )
    version = f"0.1.0-demo.d{candidate['digest'][7:19]}"
    manifest = json.loads(
        (ROOT / ".paddlecd/artifacts/linear-demo" / version / "manifest.json").read_text()
    )
    assert manifest["image"]["digest"] == candidate["digest"]

    second = demo(env)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-3000:]
    assert "already in the registry" in second.stdout          # base not rebuilt
    assert "0 bytes uploaded" in second.stdout                  # promotion: nothing new to copy
