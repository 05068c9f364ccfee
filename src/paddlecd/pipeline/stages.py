"""Pipeline stages: each kind calls the one package function that does the work, for one variant.

A stage gets a :class:`StageContext` and fills ``ctx.outputs`` with what later stages and the summary
need (digests, references, evidence paths). Outputs of earlier stages of the same variant are in
``ctx.earlier`` by stage kind, so a resumed run reuses them instead of re-reading "the last" candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import PipelineError
from paddlecd.image import lock, variants

Echo = Callable[[str], None]


@dataclass
class StageContext:
    """What one stage run for one ``variant`` sees: its ``params`` (the pipeline file's ``with`` plus
    run options such as ``version``), ``earlier`` outputs by kind, and ``outputs`` to fill."""

    settings: Settings
    variant: str
    params: dict[str, Any]
    earlier: dict[str, dict[str, Any]]
    on_line: Echo
    outputs: dict[str, Any] = field(default_factory=dict)


def lock_check(ctx: StageContext) -> None:
    """The variant's base is locked and the lock matches variants.yaml (LockError otherwise)."""
    entry = lock.check(ctx.settings, variants.get(ctx.settings, ctx.variant))
    ctx.outputs["base"] = entry.pinned


def build(ctx: StageContext) -> None:
    """BuildKit build FROM the locked base (builder.build)."""
    from paddlecd.image import build as builder

    built = builder.build(ctx.settings, ctx.variant, on_line=ctx.on_line, no_cache=bool(ctx.params.get("no_cache")))
    ctx.outputs.update(tag=built.tag, image_id=built.image_id, builder=built.builder, log=str(built.log))


def push(ctx: StageContext) -> None:
    """Push the build and read the digest back (publish.push); records the candidate."""
    from paddlecd.image import push as publish

    pushed = publish.push(ctx.settings, ctx.variant, on_progress=None)
    ctx.outputs.update(tag=pushed.tag, digest=pushed.digest, reference=pushed.reference)


def verify(ctx: StageContext) -> None:
    """Smoke suite inside the pushed digest (verify.verify); a failed check raises VerifyError."""
    from paddlecd.verify import run as ver

    reference = ctx.earlier.get("push", {}).get("reference")  # the digest this run pushed, even on resume
    result = ver.verify(ctx.settings, variant=ctx.variant, image=reference, on_line=ctx.on_line)
    record = result.record
    ctx.outputs.update(reference=result.reference, digest=record.digest,
                       evidence=str(result.evidence_path), junit=str(result.out_dir / "junit.xml"),
                       model_dir=record.model_dir,
                       checks=[{"name": c.name, "passed": c.passed, "skipped": c.skipped,
                                "seconds": c.duration_s} for c in record.checks])
    error = result.error()
    if error:
        raise error


def promote(ctx: StageContext) -> None:
    """Promote the variant's verified candidate (release.promote, executed: the pipeline plan was shown)."""
    from paddlecd.release import promote as release

    p = ctx.params
    outcome = release.promote(ctx.settings, variant=ctx.variant, version=p.get("version"),
                              part=None if p.get("version") else p.get("bump"), digest=p.get("digest"),
                              execute=True, report=ctx.on_line)
    plan = outcome.plan
    assert plan is not None
    ctx.outputs.update(release=f"{plan.version}-{ctx.variant}", version=plan.version, digest=plan.digest,
                       reference=f"{ctx.settings.release_repo}@{plan.digest}", tags=list(outcome.written))


def deploy(ctx: StageContext) -> None:
    """Run the training job on the promoted release (cluster.plan + cluster.run)."""
    from paddlecd import cluster

    p, release = ctx.params, ctx.earlier.get("promote", {}).get("release")
    if not release:
        raise PipelineError("deploy needs a promote stage before it in the pipeline", "add '- stage: promote' first")
    plan = cluster.plan(ctx.settings, job=str(ctx.settings.path(p["job"])), release=release, nodes=p.get("nodes"),
                        gpus_per_node=p.get("gpus_per_node"), kind=p.get("kind", "job"), cluster=p.get("cluster"))
    for line in plan.describe():
        ctx.on_line(line)
    ctx.outputs.update(job_id=plan.job_id, image=plan.target.reference)
    ctx.outputs["model"] = cluster.run(ctx.settings, plan, on_event=ctx.on_line, on_line=ctx.on_line)


def upload(ctx: StageContext) -> None:
    """Upload the model the deploy stage exported (artifacts.plan_upload + upload)."""
    from paddlecd.artifacts import manifest as artifact_manifest
    from paddlecd.artifacts import transfer as artifacts

    model, promoted = ctx.earlier.get("deploy", {}).get("model"), ctx.earlier.get("promote", {})
    if not model or model.startswith(("claim:", "node:")):
        raise PipelineError(f"upload: the model is not on this machine ({model or 'no deploy stage output'})",
                            "upload from where the volume is mounted: invoke upload --model-dir … --name … --version …")
    store = artifacts.store_for(ctx.settings, ctx.params.get("to"))
    plan = artifacts.plan_upload(store, Path(model).parent, name=ctx.params["name"], version=promoted["version"],
                                 image=promoted.get("reference"), overwrite=bool(ctx.params.get("overwrite")),
                                 git_revision=artifact_manifest.git_revision(ctx.settings.root))
    for line in plan.lines():
        ctx.on_line(line)
    artifacts.upload(store, plan)
    ctx.outputs.update(url=plan.url, action=plan.action, bytes=plan.bytes_to_move)


KINDS: dict[str, Callable[[StageContext], None]] = {
    "lock-check": lock_check, "build": build, "push": push, "verify": verify,
    "promote": promote, "deploy": deploy, "upload": upload,
}
# What each kind changes outside this machine (printed in the plan; DESIGN.md "plan, then act").
CHANGES = {"push": "registry", "promote": "registry", "deploy": "cluster", "upload": "bucket"}
# Key outputs shown on a stage's line and in the step summary.
KEY_OUTPUTS = {"lock-check": ("base",), "build": ("tag",), "push": ("digest",), "verify": ("digest", "evidence"),
               "promote": ("release", "digest"), "deploy": ("job_id", "model"), "upload": ("url",)}


def groups(settings: Settings, kind: str, names: list[str]) -> list[list[str]]:
    """How to spread ``names`` over parallel workers: builds of variants on the same locked base go in
    one group (run one after another, so the later ones reuse the base layers the first pulled);
    every other kind runs one variant per group."""
    if kind != "build":
        return [[n] for n in names]
    entries = lock.read(settings)
    by_base: dict[str, list[str]] = {}
    for n in names:
        by_base.setdefault(entries[n].digest if n in entries else n, []).append(n)
    return list(by_base.values())
