"""Time stamps, JSON and YAML files: the small helpers every room that records something shares.

Records written here are read by other processes (a resumed pipeline, promotion on another machine),
so writes are atomic: a temp file in the same folder, then a rename (POSIX ``rename(2)``), and a
reader never sees half a record.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml

Timespec = Literal["seconds", "milliseconds"]

# libyaml's loader where PyYAML was built with it (the PyPI wheels are): the same documents and
# errors as yaml.SafeLoader, ~8x faster on images/variants.yaml (8 ms -> 1 ms; read twice per
# build+push: benchmarks/bench_build_push.py --profile).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` through libyaml when available (see ``_YAML_LOADER``).

    Raises:
        yaml.YAMLError: as ``yaml.safe_load`` (``MarkedYAMLError`` carries ``problem_mark``).
    """
    return yaml.load(text, Loader=_YAML_LOADER)


def now_iso(timespec: Timespec = "seconds") -> str:
    """The current UTC time as ISO-8601 with a ``Z`` suffix.

    Args:
        timespec: ``"seconds"`` (``2025-01-31T12:00:00Z``: evidence, candidates, builds, locks) or
            ``"milliseconds"`` (``2025-01-31T12:00:00.123Z``: ledger records, which sort by time).
    """
    now = dt.datetime.now(dt.timezone.utc)
    return now.isoformat(timespec=timespec).replace("+00:00", "Z")


def write_json(path: Path, data: Any) -> Path:
    """Atomically write ``data`` as indented, key-sorted JSON to ``path`` (parents created).

    Returns:
        ``path``.

    Raises:
        OSError: the folder cannot be created or written; ``TypeError``: ``data`` is not JSON-able
            (the target file is left as it was in both cases).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
