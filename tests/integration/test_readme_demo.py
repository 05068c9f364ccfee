"""README command 1, exactly as a user runs it: `./scripts/demo.sh` on the embedded default (Docker
engine, distribution registry on 127.0.0.1:5000, file:// artifact store), twice — the second run
must also succeed (safe) and reuse the base, the layers, both releases and the upload. It promotes
twice: the checkout's image as a release (the baseline), then an upgrade candidate (the same build
with one label more) as the next patch release, which the upgrade gate compares with the baseline:
two digests, each with its own signed run. The demo's
registry starts with the base in it (a copy from the suite's seed registry, into which paddlecd's
bootstrap pushed it: support/base.py), so the bootstrap's push is run there, not here. It runs in a
copy of the checkout (support/checkout.py): the demo keeps its state in ``.paddlecd/`` of the
folder it runs in, and the suite never writes into the checkout."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import requests
import yaml

from support import base
from support.checkout import copy_checkout


def demo(root, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / "scripts/demo.sh")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.uses_base
def test_readme_command_one_runs_the_whole_pipeline_twice(tmp_path_factory, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLECD_", "DOCKER_CONFIG"))}
    root = copy_checkout(tmp_path / "checkout")
    try:
        _run_twice(root, env, tmp_path_factory)
    finally:  # the registry the demo started (none when one already answered on :5000)
        subprocess.run(["bash", "scripts/stack.sh", "down"], cwd=root, env=env,
                       capture_output=True, timeout=60)


def _run_twice(root, env, tmp_path_factory):
    # The base from the session's seed registry (support/base.py: paddlecd's bootstrap pushed it
    # there, the demo's registry gets a copy of its blobs), so the demo's bootstrap finds it, as on
    # a user's second run; without a seed the demo pushes it itself. Holding the lock through the
    # whole demo would stall the other worker's tests.
    with base.lock(tmp_path_factory):
        up = subprocess.run(["bash", "scripts/stack.sh", "up"], cwd=root, env=env,
                            capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        seeded = base.copy_to("127.0.0.1:5000", tmp_path_factory.mktemp("seed-state"))
    first = demo(root, env)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-3000:]
    for step in (
        "==> build push verify (cpu)",
        "==> upgrade candidate",
        "==> deploy release",
        "==> upload the trained model",
        "==> admission policy",
    ):
        assert step in first.stdout
    assert "\x1b[" not in first.stdout  # a pipe: plain lines, bold only on a terminal
    assert not seeded or "cached in the registry" in first.stderr  # the stage line
    candidate = json.loads((root / ".paddlecd/candidates/cpu.json").read_text())
    evidence = json.loads(
        (root / ".paddlecd/evidence" / f"{candidate['digest'][7:]}.json").read_text()
    )
    assert (
        evidence["passed"] is True
        and f"evidence:    .paddlecd/evidence/{candidate['digest'][7:]}.json" in first.stdout
    )
    policy = yaml.safe_load((root / ".paddlecd/admission-policy.yaml").read_text())
    verify = policy["spec"]["rules"][0]["verifyImages"][0]
    assert (policy["kind"], verify["type"]) == ("ClusterPolicy", "SigstoreBundle")
    assert verify["imageReferences"] == ["127.0.0.1:5000/paddlecd/release:*",
                                         "127.0.0.1:5000/paddlecd/release@*"]
    first_release, baseline, version = _compared_with_a_real_baseline(root, first,
                                                                      candidate["digest"])
    manifest = json.loads(
        (root / ".paddlecd/artifacts/linear-demo" / version / "manifest.json").read_text()
    )
    assert manifest["image"]["digest"] == candidate["digest"]
    # signed with the demo's key pair (OpenSSF Model Signing), beside the files
    assert (root / ".paddlecd/artifacts/linear-demo" / version / "model.sig").stat().st_size > 0

    second = demo(root, env)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-3000:]
    assert "cached in the registry" in second.stderr            # base not rebuilt
    assert "already in the registry" not in second.stdout and "[stack]" not in second.stdout
    assert "\x1b[" not in second.stdout
    assert second.stdout.count("0 bytes uploaded") == 2         # promotions: nothing new to copy
    # both digests are releases already: promoted again as such (no new release), not verified
    assert second.stdout.count("already: not verified again") == 2
    assert f"{baseline[:19]}… is release {first_release} already" in second.stdout
    assert f"its gate: passed against {first_release}" in second.stdout  # as recorded
    # what a terminal shows of the re-run: these lines and one per stage (docs/getting-started.md:
    # 29 at 100 columns, one of them the evidence path wrapped)
    staged = [x for x in second.stderr.splitlines() if x.startswith(("✔ ", "✘ "))]
    assert len(second.stdout.splitlines()) + len(staged) <= 28, (second.stdout, staged)
    _next_steps_work_as_printed(root, env, second.stdout)


def _compared_with_a_real_baseline(root, run: subprocess.CompletedProcess, digest: str
                                   ) -> tuple[str, str, str]:
    """The demo's two releases, from its ``promoted <release> (…)`` lines on stdout: the baseline
    and the upgrade candidate ``digest`` (the next patch release) were compared, two digests each
    with its own passing signed run, and promote printed the gate's table on stderr; the tags as
    the registry serves them (plain HTTP, not paddlecd's client). Returns (baseline release, its
    digest, release)."""
    def tag(name: str) -> str:
        answer = requests.head(
            f"http://127.0.0.1:5000/v2/paddlecd/release/manifests/{name}", timeout=10,
            headers={"Accept": ", ".join(f"application/vnd.{t}" for t in (
                "oci.image.manifest.v1+json", "oci.image.index.v1+json",
                "docker.distribution.manifest.v2+json"))})
        answer.raise_for_status()
        return answer.headers["Docker-Content-Digest"]

    base, release = [x.split()[1] for x in run.stdout.splitlines() if x.startswith("promoted ")]
    major, minor, patch = (int(x) for x in base.removesuffix("-cpu").split("."))
    assert release == f"{major}.{minor}.{patch + 1}-cpu", (base, release)
    baseline = tag(base)
    assert tag(release) == tag("latest-cpu") == digest != baseline
    for each in (baseline, digest):
        evidence = json.loads((root / ".paddlecd/evidence" / f"{each[7:]}.json").read_text())
        assert evidence["passed"] is True and evidence["figures"], each
    # promote's own view of the gate (stderr): its verdict, the table, the notes in parentheses
    lines = [x.strip() for x in run.stderr.splitlines()]
    head = next(i for i, x in enumerate(lines)
                if f"passed against {base} ({major}.{minor}-cpu, {baseline[:19]}…) on " in x)
    assert lines[head + 1].split() == ["figure", "baseline", "candidate", "change", "verdict"]
    rows = lines[head + 2:]
    rows = rows[:next(i for i, x in enumerate(rows) if x.startswith("("))]
    judged = {x.split()[0]: x.split()[-1] for x in rows}
    assert {"train.step_time", "allreduce.latency.4B"} <= set(judged), rows
    assert set(judged.values()) <= {"ok", "noise"}, rows
    assert "limit 50x as slow" in lines[head + 2 + len(rows)]  # the demo's loose limit
    return base, baseline, release.removesuffix("-cpu")


def _next_steps_work_as_printed(root, env, stdout: str) -> None:
    """The demo's closing hints, and the README's next commands, as a user types them: no key to
    export by hand (the demo's pair in .paddlecd/keys is the embedded default's)."""
    hints = [line.split(":", 1)[1].split("  (")[0].strip() for line in stdout.splitlines()
             if line.startswith(("attestation:", "release:", "artifacts:"))]
    readme = (root / "README.md").read_text()
    after = readme.split("After the demo", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    steps = [line.split("#")[0].strip() for line in after.splitlines() if line.strip()]
    steps = [f".venv/bin/{s}" for s in steps if s.startswith("invoke ") and " build" not in s]
    assert len(hints) == 3 and steps, (hints, steps)
    for command in [*hints, *steps]:
        run = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True,
                             text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, f"{command}:\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
