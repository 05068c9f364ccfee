"""Run a pipeline: its stages in order as named, timed phases, for every selected variant.

Each run has an id and a folder ``<state>/pipelines/<name>/<run-id>/`` holding ``summary.json``
(rewritten after every stage, so a crash leaves what was done; its shape is
:class:`~paddlecd.pipeline.records.Summary`) and ``summary.md``; ``<state>/pipelines/<name>/latest``
names the last run. ``resume`` re-opens the last run and continues from the first stage that did not
succeed, for the variants that did not succeed in it, reusing the recorded outputs (digests,
evidence) of everything before. Library code never prints: progress goes to ``on_event`` (one
:class:`~paddlecd.pipeline.records.Event` per stage, variant and check) and ``on_line`` (tool
output).
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd import files, git, proc
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, Interrupted, PaddlecdError, PipelineError
from paddlecd.image import variants
from paddlecd.pipeline import report, stages
from paddlecd.pipeline import spec as pipeline_spec
from paddlecd.pipeline.records import Event, StageRun, Summary, VariantRun
from paddlecd.pipeline.spec import PipelineDef, Selection, StageDef, plan_lines, select

__all__ = [
    "Result",
    "Runner",
    "Selection",
    "last_run",
    "new_summary",
    "plan_lines",
    "resumable",
    "run",
    "runs_dir",
    "select",
]

OnEvent = Callable[[Event], None]
Line = Callable[[str, str, str], None]  # (stage name, variant, line)
StageRunner = Callable[[stages.StageContext], None]


RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4}")  # new_summary's ids: UTC time, 4 hex


def runs_dir(settings: Settings, name: str) -> Path:
    """``<state>/pipelines/<name>``."""
    return settings.state / "pipelines" / name


def last_run(settings: Settings, name: str) -> tuple[Path, Summary]:
    """The folder and summary of the last run of pipeline ``name``.

    Raises:
        PipelineError: no run recorded (nothing to resume), or its summary.json is not valid JSON
            or not a summary this paddlecd reads.
    """
    runs = runs_dir(settings, name)
    latest = runs / "latest"
    if not latest.exists():
        raise PipelineError(
            f"no previous run of pipeline '{name}' to resume (nothing under {runs})",
            f"start one: invoke pipeline.run {name}",
        )
    run_id = latest.read_text().strip()
    path = runs / run_id / "summary.json"
    if not RUN_ID.fullmatch(run_id) or not path.exists():  # a trial: "../../etc", "nosuchrun"
        found = sorted(p.parent.name for p in runs.glob("*/summary.json")
                       if RUN_ID.fullmatch(p.parent.name))
        raise PipelineError(
            f"{latest} names {run_id[:80]!r}, which is not a run under {runs}",
            (f"write the newest run's id into it ({found[-1]}), or " if found else "")
            + f"start a fresh run: invoke pipeline.run {name}")
    try:
        data = json.loads(path.read_text(), object_pairs_hook=files.unique_keys)
    except ValueError as e:
        raise PipelineError(f"{path}: {files.json_problem(e)}",
                            f"start a fresh run: invoke pipeline.run {name}") from e
    summary = Summary.from_json(data, source=str(path))
    if (summary.pipeline, summary.run_id) != (name, run_id):  # edited, or copied from elsewhere
        raise PipelineError(
            f"{path} is the record of run {summary.run_id[:80]!r} of pipeline "
            f"{summary.pipeline[:80]!r}, not of run {run_id} of '{name}' (edited or copied?)",
            f"start a fresh run: invoke pipeline.run {name}")
    return path.parent, summary


def interrupted(summary: Summary) -> Summary:
    """``summary`` recorded as interrupted: its running stages too, finished now."""
    for index, stage in enumerate(summary.stages):
        if stage.status == "running":
            summary = summary.with_stage(index, status="interrupted")
    return dataclasses.replace(summary, status="interrupted", finished=files.now_iso())


def close_killed(settings: Settings, name: str) -> str | None:
    """Record the last run of ``name`` as interrupted when it says "running" but the process
    that ran it is gone (killed with SIGKILL: nothing of it could write the record), and return
    its run id; None when there is nothing to close. Called before a fresh run or a resume, so no
    record claims a run nobody runs (trial 4: a killed run's summary said "running" for good,
    and ``--resume`` after a fresh run looked only at that one).

    Raises:
        PipelineError: the last run is running in a live process (a second run now would write
            the same records).
    """
    try:
        folder, summary = last_run(settings, name)
    except PipelineError:
        return None  # no run yet, or a record another message names (resume reads it again)
    if summary.status != "running" or not summary.owner:
        return None
    if not proc.owner_gone(summary.owner):
        raise PipelineError(f"pipeline '{name}' run {summary.run_id} is running now "
                            f"(process {summary.owner})",
                            "wait for it to end, or stop it (Ctrl-C records it as interrupted)")
    closed = interrupted(summary)
    files.write_json(folder / "summary.json", closed.to_json())
    files.write_text(folder / "summary.md", report.markdown(closed))
    return summary.run_id


def resume_of(settings: Settings, pdef: PipelineDef, given: tuple[str, ...],
              options: Mapping[str, Any] | None) -> tuple[Path, Summary, Selection]:
    """The last run of ``pdef`` as ``--resume`` continues it: its folder, its summary with the
    options given again on top (e.g. a new ``--version`` after a refused promotion), and its
    variants. ``pipeline.run --resume --dry-run`` shows the same (a trial: it planned a fresh run).

    Raises:
        PipelineError: nothing to resume (:func:`last_run`), the stages changed, the run
            succeeded, or ``given`` variants other than the run's.
    """
    name = pdef.name
    folder, summary = last_run(settings, name)
    resumable(pdef, summary)
    if summary.status == "succeeded":
        raise PipelineError(f"run {summary.run_id} of '{name}' succeeded: nothing to resume",
                            f"start a fresh run: invoke pipeline.run {name} …")
    if given and set(given) != set(summary.variants):
        raise PipelineError(
            f"--resume continues run {summary.run_id} for its variants "
            f"({', '.join(summary.variants)}), not {', '.join(given)}",
            f"drop --variant, or start a fresh run: invoke pipeline.run {name} --variant …",
        )
    unknown = [v for v in summary.variants if v not in variants.load(settings)]
    if unknown:  # a trial: an edited record resumed "nosuch" and recorded the run as succeeded
        raise PipelineError(f"run {summary.run_id} of '{name}' names variant "
                            f"{unknown[0][:80]!r}, which images/variants.yaml does not hold",
                            f"start a fresh run: invoke pipeline.run {name}")
    _check_recorded_digests(pdef, summary)
    try:  # a trial: "options": {"no_cache": "maybe", "digest": "sha256:111…"} ran and was kept
        pipeline_spec.check_options(summary.options or {}, pdef)
    except ConfigError as e:
        raise PipelineError(f"{folder / 'summary.json'}: run {summary.run_id} records options "
                            f"that pipeline.run refuses: {e.cause}",
                            f"start a fresh run: invoke pipeline.run {name} …") from e
    again = {k: v for k, v in (options or {}).items() if v and summary.options.get(k) != v}
    promoted = [s for s in summary.stages if s.kind == "promote"]
    if again and promoted and all(s.status == "succeeded" for s in promoted):
        # trial 19: --version 8.14.0 on a run whose promote had made 8.13.0 was dropped unsaid
        done = ", ".join(sorted({str((u.outputs or {}).get("release") or (u.outputs or {}).get(
            "version") or "?") for s in promoted for u in s.variants.values()}))
        flags = " ".join(f"--{k} {v}" for k, v in again.items())
        raise PipelineError(
            f"{flags}: the promote stage of run {summary.run_id} succeeded ({done}), and a "
            "resume reuses it", f"resume without {flags.split()[0]}, or start a fresh run: "
            f"invoke pipeline.run {name} {flags}")
    merged = {**summary.options, **{k: v for k, v in (options or {}).items() if v}}
    return (folder, dataclasses.replace(summary, options=merged),
            Selection(summary.variants, f"resumed run {summary.run_id}"))


def _check_recorded_digests(pdef: PipelineDef, summary: Summary) -> None:
    """The digests a resume reuses agree with each other: a succeeded stage's ``reference`` ends
    in its ``digest``, and a succeeded stage that took a push stage's image (verify) recorded that
    push's digest (trial 8: an edited ``outputs.digest`` of push resumed as "succeeded" with push
    and verify naming two digests).

    Raises:
        PipelineError: naming the run, the stage, the variant and the two digests.
    """
    recorded = {s.name: s for s in summary.stages}
    hint = f"start a fresh run: invoke pipeline.run {pdef.name}"
    for sdef in pdef.stages:
        stage = recorded.get(sdef.name)
        for variant, unit in (stage.variants.items() if stage else ()):
            out = unit.outputs or {}
            if unit.status != "succeeded" or not isinstance(out.get("digest"), str):
                continue
            ref = out.get("reference")
            if isinstance(ref, str) and "@" in ref and ref.rsplit("@", 1)[1] != out["digest"]:
                raise PipelineError(
                    f"run {summary.run_id}: stage '{sdef.name}' ({variant}) records digest "
                    f"{out['digest'][:80]} but reference {ref[:160]}", hint)
            kind = stages.KINDS[sdef.kind]
            takes = "push" in kind.needs or "push" in kind.reads
            source = pipeline_spec.supplier(pdef.stages, sdef, "push") if takes else None
            pushed = recorded[source.name].variants.get(variant) if source and \
                source.name in recorded else None
            theirs = (pushed.outputs or {}).get("digest") if pushed else None
            if pushed and pushed.status == "succeeded" and theirs != out["digest"]:
                raise PipelineError(
                    f"run {summary.run_id}: stage '{sdef.name}' ({variant}) records digest "
                    f"{out['digest'][:80]}, but the push it took recorded {str(theirs)[:80]}", hint)


def resume_lines(summary: Summary, settings: Settings | None = None) -> list[str]:
    """What a resume of ``summary`` runs again: ``resume run <id> (interrupted): from stage
    verify (stages before it reused)``; with ``settings``, a warning when the run was made at
    another revision than the checkout's (its finished stages' results are reused)."""
    todo = [s.name for s in summary.stages if s.status != "succeeded"]
    first = f"from stage {todo[0]}" if todo else "no stage left"
    status = summary.status  # trial 19: a dry run said "(running)" of a killed run
    if status == "running" and summary.owner and proc.owner_gone(summary.owner):
        status = "killed while running: the resume records it as interrupted"
    lines = [f"resume run {summary.run_id} ({status}): {first} "
             f"({len(summary.stages) - len(todo)} succeeded stage(s) reused)"]
    now = git.revision(settings.root).full if settings else None
    if now and summary.revision and summary.revision != now:
        lines.append(f"warning: run {summary.run_id} was made at revision "
                     f"{summary.revision[:12]}, the checkout is at {now[:12]}: what its "
                     "finished stages built is reused, not rebuilt")
    return lines


def new_summary(
    pdef: PipelineDef,
    selection: Selection,
    settings: Settings,
    options: Mapping[str, Any],
    base_ref: str | None,
) -> Summary:
    """A fresh run record: every stage × variant ``pending``."""
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(2)
    return Summary(
        pipeline=pdef.name, run_id=run_id, status="running", started=files.now_iso(),
        revision=git.revision(settings.root).full, variants=tuple(selection.variants),
        selected_by=selection.why, base_ref=base_ref,
        options={k: v for k, v in options.items() if v is not None},
        stages=tuple(StageRun(name=s.name, kind=s.kind,
                              variants={v: VariantRun() for v in selection.variants})
                     for s in pdef.stages))


def resumable(pdef: PipelineDef, summary: Summary) -> None:
    """Refuse to resume a run whose stages differ from the pipeline file now.

    Raises:
        PipelineError: the stage list changed since the recorded run.
    """
    recorded = [(s.name, s.kind) for s in summary.stages]
    if recorded != [(s.name, s.kind) for s in pdef.stages]:
        raise PipelineError(f"{pdef.path} changed since run {summary.run_id} (stages differ)",
                            f"start a fresh run: invoke pipeline.run {pdef.name}")


class Runner:
    """Runs the stages of one pipeline run, updating and saving its summary as it goes.

    Args:
        kinds: stage kind → callable, overriding the ``run`` of
            :data:`paddlecd.pipeline.stages.KINDS` (unit tests pass fakes).
    """

    def __init__(self, settings: Settings, pdef: PipelineDef, summary: Summary, folder: Path, *,
                 on_event: OnEvent, on_line: Line, kinds: Mapping[str, StageRunner] | None = None):
        self.settings, self.pdef, self.summary, self.folder = settings, pdef, summary, folder
        self.on_event, self.on_line = on_event, on_line
        self.kinds = {**{k: kind.run for k, kind in stages.KINDS.items()}, **(kinds or {})}
        self.lock = threading.Lock()
        # set on Ctrl-C: a unit that fails after it failed because its containers were stopped
        # (a trial: summary.md said "failed", "container exit 137", for an interrupted verify)
        self.stopping = threading.Event()

    def save(self) -> Path:
        """Write summary.json (atomically) and summary.md; point ``latest`` at this run."""
        path = files.write_json(self.folder / "summary.json", self.summary.to_json())
        files.write_text(self.folder / "summary.md", report.markdown(self.summary))
        # replaced, never written through a link (a trial: `latest` linked out of the
        # state folder had the run id written into its target)
        files.write_text(self.folder.parent / "latest", self.summary.run_id + "\n")
        return path

    def _update(self, **changes: Any) -> None:
        with self.lock:
            self.summary = dataclasses.replace(self.summary, **changes)

    def run(self) -> Summary:
        """Run every stage not yet succeeded; stop after the first failed stage. Returns the
        summary."""
        self._update(attempts=self.summary.attempts + 1, status="running", finished=None,
                     owner=proc.owner())
        self.save()
        self._event("pipeline.start", status="running", variants=self.summary.variants)
        try:
            for index, sdef in enumerate(self.pdef.stages):
                record = self.summary.stages[index]
                if record.status == "succeeded":
                    self._event("stage.end", stage=sdef.name, status="reused",
                                seconds=record.seconds)
                    continue
                if not self._stage(index, sdef):
                    break
        except KeyboardInterrupt as e:
            raise self._interrupted() from e
        failed = any(s.status == "failed" for s in self.summary.stages)
        self._update(status="failed" if failed else "succeeded", finished=files.now_iso())
        self.save()
        self._event("pipeline.end", status=self.summary.status,
                    summary=str(self.folder / "summary.json"))
        return self.summary

    def _interrupted(self) -> Interrupted:
        """Record the run (and the stage it was in) as interrupted, so ``--resume`` continues it."""
        with self.lock:
            self.summary = interrupted(self.summary)
        self.save()
        self._event("pipeline.end", status="interrupted",
                    summary=str(self.folder / "summary.json"))
        name = self.summary.pipeline
        return Interrupted(f"pipeline '{name}' run {self.summary.run_id} was interrupted",
                           f"continue it: invoke pipeline.run {name} --resume")

    def _stage(self, index: int, sdef: StageDef) -> bool:
        with self.lock:
            self.summary = self.summary.with_stage(index, status="running")
        units = self.summary.stages[index].variants
        todo = [v for v, r in units.items() if r.status != "succeeded"]
        self._event("stage.start", stage=sdef.name, kind=sdef.kind, variants=tuple(todo))
        started = time.monotonic()
        work = stages.groups(self.settings, sdef.kind, todo) if todo else []
        # not ``with``: its exit waits for every thread, and one blocked in a network read (a
        # held registry PUT of promote) kept a Ctrl-C'd run alive for 243 s (a trial); the
        # catch site ends the process once the threads outlive a short grace
        pool = ThreadPoolExecutor(max_workers=max(1, min(sdef.parallel, len(work) or 1)))
        try:
            list(pool.map(lambda group: [self._unit(index, sdef, v) for v in group], work))
        except KeyboardInterrupt:  # the stage's threads wait on containers: stop those
            from paddlecd import engine  # the engine client only when a stage made one

            self.stopping.set()
            pool.shutdown(wait=False, cancel_futures=True)
            engine.remove_owned()
            raise
        pool.shutdown(wait=True)
        record = self.summary.stages[index]
        ok = all(r.status == "succeeded" for r in record.variants.values())
        with self.lock:
            self.summary = self.summary.with_stage(
                index, seconds=round(record.seconds + time.monotonic() - started, 3),
                status=("succeeded" if record.variants else "skipped") if ok else "failed")
        self.save()
        record = self.summary.stages[index]
        self._event("stage.end", stage=sdef.name, status=record.status, seconds=record.seconds)
        return ok

    def _unit(self, index: int, sdef: StageDef, variant: str) -> None:
        earlier = self._earlier(sdef, variant)
        inputs = {}
        for kind in (*stages.KINDS[sdef.kind].needs, *stages.KINDS[sdef.kind].reads):
            source = pipeline_spec.supplier(self.pdef.stages, sdef, kind)
            if source is not None:
                inputs[kind] = earlier.get(source.name, {})
        ctx = stages.StageContext(
            settings=self.settings, stage=sdef.name, variant=variant,
            params={**sdef.params, **self.summary.options}, earlier=earlier, inputs=inputs,
            on_line=lambda line: self.on_line(sdef.name, variant, line))
        started, failure = time.monotonic(), {}
        try:
            self.kinds[sdef.kind](ctx)
            self._check_outputs(sdef, ctx.outputs)
        except PaddlecdError as e:
            failure = {"error": e.cause, "hint": e.hint, "error_type": type(e).__name__}
        except Exception as e:  # noqa: BLE001 - an unexpected failure is still recorded against its stage
            if self.settings.runtime.debug:  # the traceback goes to the stage's log lines
                for line in traceback.format_exc().splitlines():
                    self.on_line(sdef.name, variant, line)
            failure = {"error": f"{type(e).__name__}: {e}", "hint": "re-run with PADDLECD_DEBUG=1",
                       "error_type": type(e).__name__}
        if failure and self.stopping.is_set():
            failure = {"error": "interrupted (Ctrl-C) while it ran", "hint": "continue it: invoke "
                       f"pipeline.run {self.pdef.name} --resume", "error_type": "Interrupted"}
        status = ("interrupted" if self.stopping.is_set() else "failed") if failure else "succeeded"
        unit = VariantRun(status=status,
                          seconds=round(time.monotonic() - started, 3),
                          attempt=self.summary.attempts, outputs=dict(ctx.outputs), **failure)
        with self.lock:
            self.summary = self.summary.with_unit(index, variant, unit)
            self.save()
        for check in ctx.outputs.get("checks", []) if sdef.kind == "verify" else []:
            self._event(
                "check",
                stage=sdef.name,
                variant=variant,
                check=check["name"],
                status="skipped"
                if check.get("skipped")
                else "passed"
                if check["passed"]
                else "failed",
                seconds=check["seconds"],
            )
        self._event("variant.end", stage=sdef.name, kind=sdef.kind, variant=variant,
                    status=unit.status, seconds=unit.seconds, error=unit.error, hint=unit.hint,
                    error_type=unit.error_type, outputs=stages.key_outputs(sdef.kind, ctx.outputs))

    @staticmethod
    def _check_outputs(sdef: StageDef, outputs: Mapping[str, Any]) -> None:
        """The registry lists what each kind outputs (the summary's contract): hold kinds to it."""
        extra = sorted(set(outputs) - set(stages.KINDS[sdef.kind].outputs))
        if extra:
            raise PipelineError(
                f"stage '{sdef.name}' ({sdef.kind}) wrote undeclared outputs: {', '.join(extra)}",
                f"list them in the '{sdef.kind}' entry of paddlecd.pipeline.stages.KINDS")

    def _earlier(self, sdef: StageDef, variant: str) -> dict[str, stages.Outputs]:
        """Outputs of the stages before ``sdef`` for ``variant``, by stage name (recorded ones on
        resume)."""
        out: dict[str, stages.Outputs] = {}
        for s in self.summary.stages:
            if s.name == sdef.name:
                break
            unit = s.variants.get(variant)
            out[s.name] = (unit.outputs if unit else None) or {}
        return out

    def _event(self, name: str, **fields: Any) -> None:
        self.on_event(Event(event=name, time=files.now_iso(), pipeline=self.pdef.name,
                            run_id=self.summary.run_id, **fields))


@dataclass(frozen=True)
class Result:
    """A finished run: its ``summary`` and the ``folder`` holding summary.json / summary.md."""

    summary: Summary
    folder: Path

    @property
    def failures(self) -> list[tuple[str, str, VariantRun]]:
        """``(stage, variant, unit)`` of every failed stage × variant."""
        return self.summary.failures()

    def error(self) -> PipelineError | None:
        """The PipelineError for a failed run (first failure, with the resume command), else
        None."""
        if not self.failures:
            return None
        stage, variant, r = self.failures[0]
        stage_kind = next((x.kind for x in self.summary.stages if x.name == stage), "")
        more = f" (+{len(self.failures) - 1} more)" if len(self.failures) > 1 else ""
        name = self.summary.pipeline
        return PipelineError(f"pipeline {name}: stage '{stage}' failed for {variant}: "
                             f"{r.error}{more}",
                             f"{r.hint or 'fix the cause'}; then: invoke pipeline.run {name} "
                             f"--resume{' [--version …]' if stage_kind == 'promote' else ''} "
                             f"(summary: {self.folder / 'summary.json'})")


def run(
    settings: Settings,
    name: str,
    *,
    given: tuple[str, ...] = (),
    base_ref: str | None = None,
    resume: bool = False,
    options: Mapping[str, Any] | None = None,
    on_event: OnEvent = lambda e: None,
    on_line: Line = lambda s, v, line: None,
    on_plan: Callable[[list[str]], None] = lambda lines: None,
    kinds: Mapping[str, StageRunner] | None = None,
) -> Result:
    """Run pipeline ``name`` (or resume its last run) and return the :class:`Result` (failed or
    not).

    The plan goes to ``on_plan`` before anything runs. Under GitHub Actions the Markdown summary is
    appended to ``$GITHUB_STEP_SUMMARY`` (capped, see :mod:`paddlecd.pipeline.report`).

    Raises:
        PipelineError: bad pipeline file, nothing to resume, a resume of a changed pipeline.
        ConfigError: unknown variant, unknown base ref.
    """
    pdef = pipeline_spec.load(settings, name)
    closed = close_killed(settings, name)
    notes = [f"run {closed} was killed while running: recorded as interrupted"] if closed else []
    if resume:
        folder, summary, selection = resume_of(settings, pdef, given, options)
        options = summary.options
        notes += resume_lines(summary, settings)  # --resume --dry-run says the same
    else:
        selection = select(settings, pdef, given, base_ref)
        summary = new_summary(pdef, selection, settings, options or {}, base_ref)
        folder = runs_dir(settings, name) / summary.run_id
    on_plan(notes + plan_lines(pdef, selection, settings, options))
    runner = Runner(
        settings, pdef, summary, folder, on_event=on_event, on_line=on_line, kinds=kinds
    )
    try:
        summary = runner.run()
    finally:
        report.to_step_summary(runner.summary)
    return Result(summary, folder)
