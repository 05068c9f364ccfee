"""Pipeline stage kinds: one registry entry per kind, each calling the one package function that
does the work, for one variant.

:data:`KINDS` is the only table of kinds: an entry says what the kind runs, what it
changes outside this machine (shown in the plan and ``--dry-run``), what it outputs, which outputs
are shown on its line, which kinds it needs earlier in the run and which parameters (``with:``) it
takes.
Adding a kind means adding one entry here; the pipeline schema, the input check, the plan and the
reports read it.

A stage gets a :class:`StageContext` and fills ``ctx.outputs``. ``ctx.earlier`` holds the outputs
of the earlier stages of the same variant by stage NAME, so two stages of one kind never overwrite
each other; ``ctx.inputs`` holds, per kind the stage needs or reads, the outputs of the stage that
supplies it (see :func:`paddlecd.pipeline.spec.supplier`). A resumed run fills both from the
recorded summary, so it reuses the digests it pushed instead of re-reading "the last" candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import ConfigError, PipelineError
from paddlecd.image import lock, variants
from paddlecd.types import Echo

Outputs = Mapping[str, Any]  # a stage's outputs as recorded in summary.json (a JSON object)


@dataclass
class StageContext:
    """What one stage run for one ``variant`` sees: its ``stage`` name, its ``params`` (the pipeline
    file's ``with`` plus run options such as ``version``), ``earlier`` outputs by stage name,
    ``inputs`` by the kind that supplied them, and ``outputs`` to fill."""

    settings: Settings
    stage: str
    variant: str
    params: Mapping[str, Any]
    earlier: Mapping[str, Outputs]
    inputs: Mapping[str, Outputs]
    on_line: Echo
    outputs: dict[str, Any] = field(default_factory=dict)


def lock_check(ctx: StageContext) -> None:
    """The variant's base is locked and the lock matches variants.yaml (LockError otherwise)."""
    entry = lock.check(ctx.settings, variants.get(ctx.settings, ctx.variant))
    ctx.outputs["base"] = entry.pinned


def build(ctx: StageContext) -> None:
    """BuildKit build FROM the locked base (builder.build)."""
    from paddlecd.image import build as builder

    built = builder.build(
        ctx.settings, ctx.variant, on_line=ctx.on_line, no_cache=bool(ctx.params.get("no_cache"))
    )
    ctx.outputs.update(
        tag=built.tag, image_id=built.image_id, builder=built.builder, log=str(built.log)
    )


def push(ctx: StageContext) -> None:
    """Push the build and read the digest back (publish.push); records the candidate."""
    from paddlecd.image import push as publish

    pushed = publish.push(ctx.settings, ctx.variant, on_progress=None)
    ctx.outputs.update(tag=pushed.tag, digest=pushed.digest, reference=pushed.reference)


def verify(ctx: StageContext) -> None:
    """Smoke suite inside the pushed digest (verify.verify); a failed check raises VerifyError."""
    from paddlecd.artifacts import gate as models_gate
    from paddlecd.verify import run as smoke

    # the digest this run pushed (also on resume); without a push stage, the variant's candidate
    reference = ctx.inputs.get("push", {}).get("reference")
    result = smoke.verify(ctx.settings, variant=ctx.variant, image=reference, on_line=ctx.on_line,
                          check_models=models_gate.check_models if ctx.settings.release.models
                          else None)  # the models gate's results
    record = result.record
    ctx.outputs.update(
        reference=result.reference,
        digest=record.digest,
        evidence=str(result.evidence_path),
        junit=str(result.out_dir / "junit.xml"),
        model_dir=record.model_dir,
        checks=[
            {"name": c.name, "passed": c.passed, "skipped": c.skipped, "seconds": c.duration_s}
            for c in record.checks
        ],
    )
    error = result.error()
    if error:
        raise error


def promote(ctx: StageContext) -> None:
    """Promote the variant's verified candidate (release.promote; the pipeline plan was shown)."""
    from paddlecd.release import promote as release

    p = ctx.params
    outcome = release.promote(
        ctx.settings,
        variant=ctx.variant,
        version=p.get("version"),
        part=None if p.get("version") else p.get("bump"),
        digest=p.get("digest"),
        execute=True,
        report=ctx.on_line,
    )
    plan = outcome.plan
    assert plan is not None
    ctx.outputs.update(
        release=f"{plan.version}-{ctx.variant}",
        version=plan.version,
        digest=plan.digest,
        reference=f"{ctx.settings.release_repo}@{plan.digest}",
        tags=list(outcome.written),
    )


def prune(ctx: StageContext) -> None:
    """Delete the variant's old candidates, never a release (release.prune; retention from
    ``with:``, else the variant's and the settings'); the plan goes to the stage's log."""
    from paddlecd.release import prune as retention

    p = ctx.params
    plan = retention.plan(ctx.settings, ctx.variant, keep_days=p.get("keep_days"),
                          keep_last=p.get("keep_last"))
    for line in plan.lines():
        ctx.on_line(line)
    outcome = retention.prune(ctx.settings, plan, report=ctx.on_line)
    ctx.outputs.update(deleted=len(outcome.deleted), kept=len(plan.candidates) - len(
        outcome.deleted), bytes_freed=plan.bytes_freed)


def deploy(ctx: StageContext) -> None:
    """Run the training job on the promoted release (deployment.plan + deployment.run)."""
    from paddlecd import deployment

    p, release = ctx.params, ctx.inputs.get("promote", {}).get("release")
    if not release:
        raise PipelineError(
            "deploy needs a promote stage before it in the pipeline", "add '- stage: promote' first"
        )
    plan = deployment.plan(
        ctx.settings,
        job=str(ctx.settings.path(p["job"])),
        release=release,
        nodes=p.get("nodes"),
        gpus_per_node=p.get("gpus_per_node"),
        kind=p.get("kind", "job"),
        cluster=p.get("cluster"),
    )
    for line in plan.describe():
        ctx.on_line(line)
    ctx.outputs.update(job_id=plan.job_id, image=plan.target.reference)
    ctx.outputs["model"] = deployment.run(
        ctx.settings, plan, on_event=ctx.on_line, on_line=ctx.on_line
    )


def upload(ctx: StageContext) -> None:
    """Upload the model the deploy stage exported (:mod:`paddlecd.artifacts.model_upload`)."""
    from paddlecd.artifacts import model_upload

    model, promoted = ctx.inputs.get("deploy", {}).get("model"), ctx.inputs.get("promote", {})
    if not model or model.startswith(("claim:", "node:")):
        raise PipelineError(
            f"upload: the model is not on this machine ({model or 'no deploy stage output'})",
            "upload from where the volume is mounted: "
            "invoke upload --model-dir … --name … --version …",
        )
    planned = model_upload.plan_model_upload(
        ctx.settings,
        Path(model).parent,
        name=ctx.params["name"],
        version=promoted["version"],
        to=ctx.params.get("to"),
        image=promoted.get("reference"),  # the promoted image trained it: its Paddle is recorded
        overwrite=bool(ctx.params.get("overwrite")),
    )
    for line in planned.lines():
        ctx.on_line(line)
    plan = model_upload.upload_model(planned)
    ctx.outputs.update(url=plan.url, action=plan.action, bytes=plan.bytes_to_move)


def check_deploy(settings: Settings, params: Mapping[str, Any]) -> None:
    """The deploy stage's ``with:`` as ``invoke deploy`` checks it before any registry is asked
    (:func:`paddlecd.deployment.check_job`): the job file, nodes, cards, kind and cluster."""
    from paddlecd import deployment

    deployment.check_job(settings, job=str(settings.path(params["job"])),
                         nodes=params.get("nodes"), gpus_per_node=params.get("gpus_per_node"),
                         kind=params.get("kind", "job"), cluster=params.get("cluster"))


def check_upload(settings: Settings, params: Mapping[str, Any]) -> None:
    """The upload stage's ``with:`` as ``invoke upload`` checks it: the model name (a DNS label)
    and the store URL (nothing is asked of the store)."""
    from paddlecd.artifacts import manifest as am
    from paddlecd.artifacts.storage import store_for

    am.check_name(params["name"])
    store_for(settings, params.get("to"))


def check_check(settings: Settings, params: Mapping[str, Any]) -> None:
    """The check stage's ``with:`` as ``invoke artifacts.check`` reads its flags before anything
    runs (a trial: ``onnx_opset`` without ``onnx`` was dropped unsaid, ``image: "not an
    image!"`` passed the dry run): the image's form (a release such as ``1.4.0-cpu``, a
    ``host/repo:tag``, or ``repo@sha256:…``; nothing is asked of a registry), and ONNX
    parameters only with ``onnx: true``. The numbers' ranges are the schema's."""
    from paddlecd.artifacts import manifest as am
    from paddlecd.registry.reference import check_tag, parse_reference

    image = params.get("image")
    if image is not None:
        if "@" in image:
            am.parse_image(image)
        elif "/" in image:
            parse_reference(image)
        else:
            check_tag(image, what="with.image (a release such as 1.4.0-cpu, or repo@sha256:…)")
    if "onnx_opset" in params and not params.get("onnx"):
        raise ConfigError("with.onnx_opset is for onnx: true",
                          "add 'onnx: true' to the stage's with:, or drop onnx_opset")


def check(ctx: StageContext) -> None:
    """Check the uploaded model inside the promoted image (artifacts.check.check_stored); a
    model that does not load or match its references raises ModelCheckError."""
    from paddlecd.artifacts import check as model_check
    from paddlecd.artifacts import onnx as onnx_out
    from paddlecd.artifacts import transfer as arts

    uploaded, promoted = ctx.inputs.get("upload", {}), ctx.inputs.get("promote", {})
    base, (name, version) = arts.split_model_url(uploaded["url"], ctx.settings, parts=2)
    p = ctx.params
    record = model_check.check_stored(
        ctx.settings,
        arts.store_for(ctx.settings, base),
        name,
        version,
        image=p.get("image") or promoted.get("reference"),
        batch=p.get("batch", 3),
        rtol=p.get("rtol", model_check.RTOL),
        atol=p.get("atol", model_check.ATOL),
        no_pir=bool(p.get("no_pir")),
        on_line=ctx.on_line,
        onnx=bool(p.get("onnx")),
        opset=p.get("onnx_opset", onnx_out.DEFAULT_OPSET),
    )
    ctx.outputs.update(
        status=record.status,
        image=record.image,
        check=f"{uploaded['url']}/{model_check.CHECK_JSON}",
    )
    error = record.error()
    if error:
        raise error


def by_base(settings: Settings, names: list[str]) -> list[list[str]]:
    """Builds of variants on the same locked base go in one group (run one after another, so the
    later ones reuse the base layers the first pulled)."""
    entries = lock.read(settings)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(entries[n].digest if n in entries else n, []).append(n)
    return list(groups.values())


def one_each(settings: Settings, names: list[str]) -> list[list[str]]:
    """One variant per parallel worker."""
    return [[n] for n in names]


Grouping = Callable[[Settings, list[str]], list[list[str]]]
NO_PARAMS: Mapping[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}


@dataclass(frozen=True)
class Kind:
    """One stage kind.

    Attributes:
        name: as written in ``stage:``. run: the callable doing one variant's work.
        changes: what it changes outside this machine (``registry``, ``cluster``, ``bucket``), named
            in the plan (DESIGN.md "plan, then act"); None for local work.
        outputs: the keys it puts in ``ctx.outputs``; key_outputs: those shown on its line and in
            the step summary.
        needs: kinds that must run before it (checked before anything runs); reads: kinds
            whose outputs it uses when present. Both arrive in ``ctx.inputs``.
        params: JSON Schema of its ``with:`` parameters (merged into pipeline.schema.json on load).
        required_params: True when ``with:`` must be given. grouping: how variants share workers.
        check: checks the ``with:`` parameters as the kind's own task would, when the pipeline is
            loaded: before its first stage runs, and in ``--dry-run`` (ConfigError).
    """

    name: str
    run: Callable[[StageContext], None]
    changes: str | None = None
    outputs: tuple[str, ...] = ()
    key_outputs: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=lambda: NO_PARAMS)
    required_params: bool = False
    grouping: Grouping = one_each
    check: Callable[[Settings, Mapping[str, Any]], None] | None = None


def _params(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> Mapping[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": dict(properties),
        **({"required": list(required)} if required else {}),
    }


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(name="lock-check", run=lock_check, outputs=("base",), key_outputs=("base",)),
        Kind(
            name="build",
            run=build,
            outputs=("tag", "image_id", "builder", "log"),
            key_outputs=("tag",),
            params=_params({"no_cache": {"type": "boolean", "default": False}}),
            grouping=by_base,
        ),
        Kind(
            name="push",
            run=push,
            changes="registry",
            outputs=("tag", "digest", "reference"),
            key_outputs=("digest",),
            needs=("build",),
        ),
        Kind(
            name="verify",
            run=verify,
            outputs=("reference", "digest", "evidence", "junit", "model_dir", "checks"),
            key_outputs=("digest", "evidence"),
            reads=("push",),
        ),
        Kind(
            name="promote",
            run=promote,
            changes="registry",
            outputs=("release", "version", "digest", "reference", "tags"),
            key_outputs=("release", "digest"),
            params=_params(
                {
                    "bump": {
                        "enum": ["major", "minor", "patch"],
                        "description": "used when no --version is given",
                    }
                }
            ),
        ),
        Kind(
            name="prune",
            run=prune,
            changes="registry",
            outputs=("deleted", "kept", "bytes_freed"),
            key_outputs=("deleted", "bytes_freed"),
            reads=("promote",),
            params=_params(
                {
                    # the bounds of the settings (config.BOUNDS retention.*)
                    "keep_days": {"type": "integer", "minimum": 1, "maximum": 36500},
                    "keep_last": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                }
            ),
        ),
        Kind(
            name="deploy",
            run=deploy,
            changes="cluster",
            outputs=("job_id", "image", "model"),
            key_outputs=("job_id", "model"),
            needs=("promote",),
            required_params=True,
            params=_params(
                {
                    "job": {
                        "type": "string",
                        "minLength": 1,
                        "description": "job file, relative to the project root",
                    },
                    "nodes": {"type": "integer", "minimum": 1},
                    "gpus_per_node": {"type": "integer", "minimum": 0},
                    "cluster": {
                        "enum": ["local", "k8s"],
                        "description": "default: settings cluster.kind",
                    },
                    "kind": {"enum": ["job", "paddlejob"]},
                },
                required=("job",),
            ),
            check=check_deploy,
        ),
        Kind(
            name="upload",
            run=upload,
            changes="bucket",
            outputs=("url", "action", "bytes"),
            key_outputs=("url",),
            needs=("deploy", "promote"),
            required_params=True,
            params=_params(
                {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "model name in the store (a DNS label)",
                    },
                    "to": {"type": "string", "minLength": 1,
                           "description": "store URL; default: storage.url"},
                    "overwrite": {"type": "boolean", "default": False},
                },
                required=("name",),
            ),
            check=check_upload,
        ),
        Kind(
            name="check",
            run=check,
            outputs=("status", "image", "check"),
            key_outputs=("status",),
            needs=("upload",),
            reads=("promote",),
            params=_params(
                {
                    "image": {
                        "type": "string",
                        "minLength": 1,
                        "description": "runtime image; default: the promoted",
                    },
                    # artifacts.check --batch's range (cli/artifacts.py)
                    "batch": {"type": "integer", "minimum": 2, "maximum": 4096, "default": 3},
                    "rtol": {"type": "number", "minimum": 0},
                    "atol": {"type": "number", "minimum": 0},
                    "no_pir": {"type": "boolean", "default": False},
                    "onnx": {
                        "type": "boolean",
                        "default": False,
                        "description": "also convert to ONNX in the image, check it with ONNX "
                        "Runtime, store it beside the model (artifacts.check --onnx)",
                    },
                    "onnx_opset": {"type": "integer", "minimum": 7, "maximum": 19},
                }
            ),
            check=check_check,
        ),
    )
}


def key_outputs(kind: str, outputs: Outputs | None) -> dict[str, Any]:
    """The outputs of a ``kind`` stage shown on its line and in the step summary (set ones only)."""
    known = KINDS[kind].key_outputs if kind in KINDS else ()
    return {k: outputs[k] for k in known if outputs and outputs.get(k)}


def groups(settings: Settings, kind: str, names: list[str]) -> list[list[str]]:
    """How to spread ``names`` over parallel workers (the kind's ``grouping``): builds of variants
    on the same locked base go in one group; every other kind runs one variant per group."""
    return KINDS[kind].grouping(settings, names)
