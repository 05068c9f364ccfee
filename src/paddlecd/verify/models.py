"""Models in production as a gate, the record verify keeps: each model ``release.models`` names
is checked in the candidate image (:func:`paddlecd.artifacts.gate.check_models`, which verify is
handed by its caller: the artifacts room sits above this one), and the results go into the
evidence and the signed predicate (``models``); promotion refuses an image on which one fails
(:func:`paddlecd.release.gates.model_problems`). Docs: docs/guides/upgrade-gates.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from paddlecd.config import Settings, release_models


@dataclass(frozen=True)
class ModelResult:
    """One model checked in an image: ``model`` is ``name@version``; ``code`` the loader's cause
    code (``legacy-in-pir``, ``fixed-dim``, ``mismatch``, …; None when it passed) and ``cause``
    its one line; ``onnx``: the ONNX conversion was checked too."""

    model: str
    passed: bool
    code: str | None = None
    cause: str = ""
    onnx: bool = False

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelResult:
        """Inverse of :meth:`to_json`; ``passed`` counts only as the boolean true."""
        return cls(str(data.get("model", "")), data.get("passed") is True,
                   data.get("code"), str(data.get("cause") or ""), bool(data.get("onnx")))


def wanted(settings: Settings) -> list[tuple[str, str | None]]:
    """``release.models`` as ``[(name, version or None)]`` (:func:`paddlecd.config.release_models`,
    which :func:`paddlecd.config.load` has already checked); None: the newest complete version.

    Raises:
        ConfigError: a bad ``release.models`` (settings made without ``config.load``).
    """
    return release_models(settings)

