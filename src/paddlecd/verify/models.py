"""Models in production as a gate: each model ``release.models`` names is checked in the
candidate image (the ``artifacts.check`` loader at its stored reference inputs and outputs, with
ONNX when the model has an ONNX record), and the results go into the evidence and the signed
predicate (``models``); promotion refuses an image on which one fails
(:func:`paddlecd.release.gates.model_problems`). Docs: docs/guides/upgrade-gates.md.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import ConfigError
from paddlecd.types import Echo


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
    """``release.models`` (``"name@version,name"``) as ``[(name, version or None)]``; None:
    the model's newest complete version.

    Raises:
        ConfigError: an empty name or version.
    """
    out = []
    for item in (x.strip() for x in (settings.release.models or "").split(",") if x.strip()):
        name, at, version = item.partition("@")
        if not name or (at and not version):
            raise ConfigError(f"setting 'release.models': {item!r} is not name or name@version",
                              'e.g. release.models: "ranker@1.2.0,embedder"')
        out.append((name, version or None))
    return out


def check_models(settings: Settings, reference: str, *,
                 on_line: Echo | None = None) -> tuple[ModelResult, ...]:
    """Check every model of ``release.models`` in the image ``reference`` (``host/repo@sha256:…``):
    downloaded from the artifacts store (sha256 and signature verified), loaded and fed by
    :func:`paddlecd.artifacts.check.check_folder`; nothing is written to the store.

    Raises:
        ConfigError: a bad ``release.models``. StorageError: a model or version is missing, or
            the store failed. EngineError: the image cannot run.
    """
    from paddlecd.artifacts import check, storage, transfer
    from paddlecd.verify import keys

    store = storage.store_for(settings)
    results = []
    for name, version in wanted(settings):
        version = version or check._latest(transfer.list_model(store, name), store.url, name)
        tmp = Path(tempfile.mkdtemp(prefix="paddlecd-models-"))
        try:
            doc = transfer.download(store, name, version, tmp / "model",
                                    trusted=keys.trusted(settings))
            onnx = bool(doc.get("onnx"))  # the manifest's ONNX record (artifacts/manifest.py)
            record = check.check_folder(settings, tmp / "model", image=reference,
                                        name=f"{name} {version}", on_line=on_line, onnx=onnx)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        first = next((c for c in record.failed if c.code != "error"),
                     record.failed[0] if record.failed else None)
        code = (first.code or "error") if first else None
        results.append(ModelResult(f"{name}@{version}", record.passed, code,
                                   check.CAUSES[code][0] if code else "", onnx))
    return tuple(results)
