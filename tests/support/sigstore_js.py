"""sigstore-js as an independent reader of the bundles paddlecd writes (tests/support/
sigstore_verify.cjs on the npm packages scripts/stack.sh installs into ``.paddlecd/node``).

Missing packages skip a test on a developer's machine and fail it under ``CI=true``: .ci/run
installs them, so their absence there is a broken install, not a reason to pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.project import ROOT

SCRIPT = Path(__file__).with_name("sigstore_verify.cjs")


def node_modules() -> Path:
    """The node_modules of the pinned @sigstore packages; skips (fails under CI) when absent."""
    folder = Path(os.environ.get("PADDLECD_NODE_DIR") or ROOT / ".paddlecd" / "node")
    modules = folder / "node_modules"
    if shutil.which("node") and (modules / "@sigstore" / "verify" / "package.json").exists():
        return modules
    why = f"no node or no @sigstore/verify in {modules}: run bash scripts/stack.sh node"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why)
    pytest.skip(why)


def verify(bundle: bytes, *, hint: str, public_key: Path, digest: str, predicate_type: str,
           tmp: Path) -> dict:
    """Run the node reader on ``bundle`` without network (:func:`_offline`); its JSON answer
    (``ok`` true or false, ``error``)."""
    modules = node_modules()
    path = tmp / f"bundle-{os.getpid()}-{id(bundle)}.json"
    path.write_bytes(bundle)
    command = ["node", str(SCRIPT), str(path), hint, str(public_key),
               digest.removeprefix("sha256:"), predicate_type]
    done = subprocess.run(
        [*_offline(), *command],
        env={**os.environ, "NODE_PATH": str(modules)}, capture_output=True, text=True,
        timeout=60,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"node printed nothing: {done.stderr[-2000:]}"
    answer = json.loads(lines[-1])
    assert answer["ok"] is (done.returncode == 0), (answer, done.stderr[-2000:])
    return answer


def _offline() -> list[str]:
    """``unshare -n`` (a network namespace with no interface) where the kernel allows it, so the
    check is shown to need no network; on machines that refuse it the run is still offline by
    construction (no tlog, no TUF)."""
    unshare = shutil.which("unshare")
    for prefix in ([unshare, "-n"], [unshare, "-rn"]) if unshare else ():
        if subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    return []
