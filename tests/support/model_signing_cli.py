"""The project's own CLI of OpenSSF Model Signing (PyPI ``model-signing``, its ``model_signing``
console script) as the independent reader of the ``model.sig`` paddlecd stores: the command a
user runs, not the Python API paddlecd calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLI = Path(sys.executable).parent / "model_signing"


def verify(folder: Path, public_key: Path) -> subprocess.CompletedProcess:
    """``model_signing verify key FOLDER --signature FOLDER/model.sig --public_key KEY``, run from
    ``/`` (the signature's ignored paths are the only ones; none are given here)."""
    return subprocess.run(
        [str(CLI), "verify", "key", str(folder), "--signature", str(folder / "model.sig"),
         "--public_key", str(public_key)],
        cwd="/", capture_output=True, text=True, timeout=120)
