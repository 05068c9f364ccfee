"""The smoke suite as files: which checks ``smoke/`` holds, read without importing it.

The suite runs inside the image and imports paddle; here it is only parsed (``ast``), so listing it
needs neither paddle nor an engine. A check is GPU-only when one of its decorators names
``gpu_only`` (the marker in ``smoke/conftest.py``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from paddlecd.config import Settings
from paddlecd.image import variants


@dataclass(frozen=True)
class SmokeCheck:
    """One test of the smoke suite: ``module`` (file name without ``test_``), ``test`` (function),
    ``gpu_only``, and ``runs``: whether it runs on the variant asked about (GPU-only checks skip
    on CPU)."""

    module: str
    test: str
    gpu_only: bool
    runs: bool

    @property
    def name(self) -> str:
        """``module/test``, the name evidence uses (``allreduce/test_allreduce_exact_sums``)."""
        return f"{self.module}/{self.test}"


def read(smoke_dir: Path, *, gpu: bool) -> list[SmokeCheck]:
    """The checks in ``smoke_dir/test_*.py``, by file name then source order.

    Args:
        smoke_dir: the suite's folder (``<root>/smoke``).
        gpu: whether the variant asked about has GPUs (decides ``runs``).

    Raises:
        SyntaxError: a test file does not parse (the suite itself is broken).
    """
    out = []
    for path in sorted(smoke_dir.glob("test_*.py")):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                gpu_only = any("gpu_only" in ast.unparse(d) for d in node.decorator_list)
                module = path.stem.removeprefix("test_")
                out.append(
                    SmokeCheck(
                        module=module, test=node.name, gpu_only=gpu_only, runs=gpu or not gpu_only
                    )
                )
    return out


def checks(settings: Settings, variant: str) -> list[SmokeCheck]:
    """The project's smoke checks (``<root>/smoke``) as they apply to ``variant``.

    Raises:
        ConfigError: an unknown variant.
    """
    return read(settings.root / "smoke", gpu=variants.get(settings, variant).is_gpu)
