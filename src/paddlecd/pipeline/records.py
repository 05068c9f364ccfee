"""Pipeline records: a run's summary (``summary.json``) and the events the runner reports.

``summary.json`` (schema 1, the shape written since the pipeline runner exists; a summary of that
shape written by an older paddlecd resumes)::

    {"schema": 1, "pipeline": "pr", "run_id": "20261129T160500Z-4621",
     "status": "running|succeeded|failed|interrupted", "started"/"finished": ISO-8601 UTC,
     "revision": git sha,
     "variants": ["cpu"], "selected_by": "…", "base_ref": str|null, "options": {"version"…},
     "attempts": 1, "owner": "<host>/<pid>/<start ticks>" (paddlecd.proc.owner; absent in
     older records),
     "stages": [{"name", "kind",
                 "status": "pending|running|interrupted|succeeded|failed|skipped", "seconds",
                 "variants": {"cpu": {"status", "seconds", "attempt", "outputs": {"digest"…},
                                      "error", "hint", "error_type"}}}]}

The records are frozen: the runner derives the next summary with :meth:`Summary.with_stage` and
:meth:`Summary.with_unit` instead of editing a shared dict. Stage ``outputs`` stay a JSON object:
what each kind puts there is listed in its entry of :data:`paddlecd.pipeline.stages.KINDS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from paddlecd import schema as validation
from paddlecd.errors import PipelineError

SCHEMA = 1


@dataclass(frozen=True)
class VariantRun:
    """One stage for one variant: ``status`` (pending, succeeded, failed), ``seconds`` it took, the
    run ``attempt`` (1, 2… with ``--resume``), its ``outputs``; ``error``/``hint``/``error_type``
    when it failed."""

    status: str = "pending"
    seconds: float | None = None
    attempt: int | None = None
    outputs: Mapping[str, Any] | None = None
    error: str | None = None
    hint: str | None = None
    error_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored object; keys without a value are left out (a pending unit is its status)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariantRun:
        """Parse a stored unit (unknown keys are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class StageRun:
    """One stage of a run: ``name``, ``kind``, ``status`` over all variants, total ``seconds``
    and the :class:`VariantRun` per variant (in selection order)."""

    name: str
    kind: str
    status: str = "pending"
    seconds: float = 0.0
    variants: Mapping[str, VariantRun] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The stored object."""
        variants = {v: r.to_json() for v, r in self.variants.items()}
        return {"name": self.name, "kind": self.kind, "status": self.status,
                "seconds": self.seconds, "variants": variants}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StageRun:
        """Parse a stored stage."""
        return cls(name=data["name"], kind=data["kind"], status=data["status"],
                   seconds=data.get("seconds", 0.0),
                   variants={v: VariantRun.from_json(r) for v, r in data["variants"].items()})


@dataclass(frozen=True)
class Summary:
    """One pipeline run (see the module docstring for the stored shape).

    Attributes:
        pipeline, run_id: which pipeline and run (``<UTC time>-<4 hex>``). status: running,
            succeeded or failed. started, finished: ISO-8601 UTC (finished None while running).
        revision: git sha of the project. variants, selected_by: the variants run and why.
        base_ref: the git ref a ``changed`` selection diffed against. options: run options
            (``version``, ``bump``, ``digest``). attempts: runs so far (1 + resumes).
        stages: one :class:`StageRun` per stage, in run order.
        owner: :func:`paddlecd.proc.owner` of the process running it (None in older records),
            so that a run killed with SIGKILL is told from one still running.
    """

    pipeline: str
    run_id: str
    status: str
    started: str
    finished: str | None = None
    revision: str | None = None
    variants: tuple[str, ...] = ()
    selected_by: str = ""
    base_ref: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    attempts: int = 0
    stages: tuple[StageRun, ...] = ()
    owner: str | None = None

    def with_stage(self, index: int, **changes: Any) -> Summary:
        """This summary with ``stages[index]`` changed (``status=…``, ``seconds=…``)."""
        stages = list(self.stages)
        stages[index] = dataclasses.replace(stages[index], **changes)
        return dataclasses.replace(self, stages=tuple(stages))

    def with_unit(self, index: int, variant: str, unit: VariantRun) -> Summary:
        """This summary with ``stages[index]``'s result for ``variant`` replaced by ``unit``."""
        variants = {**self.stages[index].variants, variant: unit}
        return self.with_stage(index, variants=variants)

    def failures(self) -> list[tuple[str, str, VariantRun]]:
        """``(stage name, variant, unit)`` of every failed stage × variant, in run order."""
        return [(s.name, v, r) for s in self.stages for v, r in s.variants.items()
                if r.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        """The stored object (``summary.json``)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"schema": SCHEMA, **fields, "variants": list(self.variants),
                "options": dict(self.options), "stages": [s.to_json() for s in self.stages]}

    @classmethod
    def from_json(cls, data: Any, *, source: str = "summary.json") -> Summary:
        """Parse a stored summary.

        Raises:
            PipelineError: not a schema-1 summary (another version, a key missing, a value of
                the wrong type: pipeline-summary.schema.json), naming the field.
        """
        version = data.get("schema") if isinstance(data, dict) else None
        hint = "start a fresh run: invoke pipeline.run <name>"
        if version != SCHEMA:
            raise PipelineError(f"{source}: summary schema {version!r}, this paddlecd reads "
                                f"{SCHEMA}", hint)
        # the shape first (pipeline-summary.schema.json): a trial resumed "variants": "cpu" as
        # the variants c, p and u, and recorded them as succeeded
        try:
            validation.check(data, "pipeline-summary.schema.json", source=source,
                             error=PipelineError)
        except PipelineError as e:
            raise PipelineError(e.cause.replace(f"{source}: ", f"{source}: not a pipeline "
                                                "summary: ", 1), f"{hint} ({e.hint})") from None
        try:
            return cls(
                pipeline=data["pipeline"], run_id=data["run_id"], status=data["status"],
                started=data["started"], finished=data.get("finished"),
                revision=data.get("revision"),
                variants=tuple(data["variants"]), selected_by=data.get("selected_by", ""),
                base_ref=data.get("base_ref"), options=dict(data.get("options") or {}),
                attempts=int(data.get("attempts", 0)),
                stages=tuple(StageRun.from_json(s) for s in data["stages"]),
                owner=data.get("owner"))
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            cause = f"{source}: not a pipeline summary ({type(e).__name__}: {e})"
            raise PipelineError(cause, hint) from e


@dataclass(frozen=True)
class Event:
    """One thing the runner reports: ``event`` is ``pipeline.start``, ``stage.start``, ``check``,
    ``variant.end``, ``stage.end`` or ``pipeline.end``; the other fields are set where they apply.

    Attributes:
        time: ISO-8601 UTC. pipeline, run_id: the run. stage, kind, variant: where it happened.
        variants: the variants a stage or run covers. status: its outcome (``reused`` for a stage
            kept from an earlier attempt). seconds: duration. outputs: a unit's key outputs.
        error, hint, error_type: why a unit failed. check: a smoke check's name. summary: the
            path of ``summary.json`` (``pipeline.end``).
    """

    event: str
    time: str
    pipeline: str
    run_id: str
    stage: str | None = None
    kind: str | None = None
    variant: str | None = None
    variants: tuple[str, ...] | None = None
    status: str | None = None
    seconds: float | None = None
    outputs: Mapping[str, Any] | None = None
    error: str | None = None
    hint: str | None = None
    error_type: str | None = None
    check: str | None = None
    summary: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The event as one JSON object (fields that do not apply are left out)."""
        data = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        if self.variants is not None:
            data["variants"] = list(self.variants)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        """Parse an event (unknown keys are ignored)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if known.get("variants") is not None:
            known["variants"] = tuple(known["variants"])
        return cls(**known)
