"""The models gate's check: each model ``release.models`` names, downloaded from the store and
run in a candidate image by the ``artifacts.check`` loader at its stored reference inputs and
outputs (with ONNX when the model has an ONNX record). verify takes :func:`check_models` from its
caller and records what it returns (:mod:`paddlecd.verify.models`). Docs:
docs/guides/upgrade-gates.md.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from paddlecd.artifacts import check, storage, transfer
from paddlecd.config import Settings
from paddlecd.errors import StorageError
from paddlecd.signing import keys
from paddlecd.types import Echo
from paddlecd.verify.models import ModelResult, wanted


def check_stored(settings: Settings) -> None:
    """Make sure every model of ``release.models`` is in the artifacts store (its manifest there,
    or, without a version, one complete version), before verify runs its suite (a trial: a model
    that was never uploaded was named only after the whole suite ran, exit 8).

    Raises:
        StorageError: a model or version is missing, or the store failed. ConfigError: a bad
            ``release.models``.
    """
    store = storage.store_for(settings)
    for name, version in wanted(settings):
        if version is None:
            check._latest(transfer.list_model(store, name), store.url, name)
        elif transfer.read_manifest(store, f"{name}/{version}/") is None:
            raise StorageError(f"release.models: {name}@{version} is not in {store.url} (no "
                               "manifest.json)", f"upload it first (invoke upload --name {name} "
                               f"--version {version} …), or fix release.models")


def check_models(settings: Settings, reference: str, *,
                 on_line: Echo | None = None) -> tuple[ModelResult, ...]:
    """Check every model of ``release.models`` in the image ``reference`` (``host/repo@sha256:…``):
    downloaded from the artifacts store (sha256 and signature verified), loaded and fed by
    :func:`paddlecd.artifacts.check.check_folder`; nothing is written to the store.

    Raises:
        ConfigError: a bad ``release.models``. StorageError: a model or version is missing, or
            the store failed. EngineError: the image cannot run.
    """
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
