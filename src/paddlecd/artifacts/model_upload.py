"""Uploading a model: the one sequence that ``invoke upload`` and the pipeline's upload stage run.

Open the store, read the producing image's Paddle version from its label (never this host's),
plan the upload (:func:`paddlecd.artifacts.transfer.plan_upload`), then carry it out. The task
prints the plan and honours ``--dry-run`` between the two calls; the stage prints it and goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import runtime
from paddlecd.artifacts import signature as sig
from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.storage import Progress, Store
from paddlecd.config import Settings


@dataclass(frozen=True)
class ModelUpload:
    """A planned model upload: the store it goes to, the plan, and notes for its reader.

    Attributes:
        store: the opened store; plan: what :func:`upload_model` will do; notes: plan lines
            beyond the plan's own (why the Paddle version is unknown).
    """

    store: Store
    plan: arts.UploadPlan
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The plan as indented lines for a person (then the notes)."""
        return [*self.plan.lines(), *self.notes]


def plan_model_upload(
    settings: Settings,
    model_dir: Path,
    *,
    name: str,
    version: str,
    to: str | None = None,
    image: str | None = None,
    metrics: Path | None = None,
    paddle_version: str | None = None,
    overwrite: bool = False,
    prepare: Callable[[], None] | None = None,
) -> ModelUpload:
    """Plan the upload of the export in ``model_dir`` to ``<to>/<name>/<version>/``; nothing is
    written.

    Args:
        to: store URL (default: the configured store); image: ``repo@sha256:…`` of the image
            that produced the model; paddle_version: recorded as given, else the image's label.
        prepare: run once the store and image are checked, before the folder is read
            (``upload --onnx`` converts the export there).

    Raises:
        ConfigError: a bad store URL, name, version or export, or ``image`` without a digest
            (checked before any lookup). SigningKeyError: the signing key is unusable (read
            once the inputs are checked). StorageError: the store failed.
    """
    store = arts.store_for(settings, to)
    am.parse_image(image)  # a reference without a digest fails before any lookup
    image_paddle, unknown = ((None, None) if paddle_version and not image
                             else runtime.declared_paddle(settings, image))
    # the flag wins (an export made elsewhere), but never silently over the image's own label
    differs = bool(paddle_version and image_paddle and paddle_version != image_paddle)
    if prepare is not None:
        prepare()
    plan = arts.plan_upload(
        store,
        model_dir,
        name=name,
        version=version,
        image=image,
        metrics=metrics,
        paddle_version=paddle_version,
        overwrite=overwrite,
        image_paddle=None if paddle_version else image_paddle,
        git_revision=am.git_revision(settings.root),
        signer=lambda: sig.signer_for(settings),  # once the inputs are checked
    )
    notes = ((f"  paddle version unknown: {unknown}",) if unknown and image and not paddle_version
             else ())
    if differs:
        notes = (f"  warning: --paddle-version {paddle_version} differs from {image}'s "
                 f"{runtime.PADDLE_LABEL} label {image_paddle}: the flag is recorded",)
    return ModelUpload(store, plan, notes)


def upload_model(planned: ModelUpload, *, progress: Progress | None = None) -> arts.UploadPlan:
    """Carry out ``planned`` (:func:`paddlecd.artifacts.transfer.upload`); ``progress`` gets the
    bytes moved. Its record for scripts: :func:`paddlecd.artifacts.transfer.uploaded`.

    Raises:
        ConflictError, StorageError, ConfigError: as :func:`paddlecd.artifacts.transfer.upload`.
    """
    return arts.upload(planned.store, planned.plan, progress=progress)
