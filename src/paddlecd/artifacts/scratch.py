"""What a model check leaves while it runs: its containers' labels and its scratch folders.

A check killed with kill -9 left its exited loader container and its scratch folder
``<state>/check/<prefix>-…`` for good (a trial); each carries its owner, and the next check
removes those whose owner is gone (artifacts.check and its ONNX conversion share these).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from paddlecd import engine, proc

# what a model check's containers carry, with their owner (engine.OWNER)
CHECK_LABEL = {"io.paddlecd.model-check": "1"}


def owned_labels() -> dict[str, str]:
    """The labels of a model check's container (:data:`CHECK_LABEL` and this process)."""
    return {**CHECK_LABEL, engine.OWNER: proc.owner()}


def folder(settings: Any, prefix: str) -> Path:
    """A new world-writable folder ``<state>/check/<prefix>-<pid>-<random>`` (the containers run
    as the image's non-root user); the folders and containers of killed checks are removed
    first (their pid is gone).

    Raises:
        EngineError: the engine cannot be asked.
    """
    base = settings.state / "check"
    base.mkdir(parents=True, exist_ok=True)
    engine.remove_orphans(CHECK_LABEL)
    for old in base.iterdir():
        pid = re.search(r"-([0-9]+)-[A-Za-z0-9_]+$", old.name)
        if old.is_dir() and pid and not proc.running(int(pid.group(1))):
            shutil.rmtree(old, ignore_errors=True)
    out = Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=base))
    out.chmod(0o777)
    return out
