"""Pipeline definitions: ``pipelines/<name>.yaml`` loaded, schema-checked and put in run order.

A pipeline names stage kinds (``lock-check``, ``build``, ``push``, ``verify``, ``promote``,
``deploy``, ``upload``; the registry is :data:`paddlecd.pipeline.stages.KINDS`) with their
parameters. Stages run in the order listed; ``needs`` may reorder them (a stage runs after every
stage it needs) and a cycle is refused. Schema: ``schemas/pipeline.schema.json``, completed with
the kinds by :func:`schema`.
:func:`select` decides which variants a run covers; :func:`plan_lines` is the plan printed first.
"""

from __future__ import annotations

import dataclasses
import difflib
import graphlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd import files
from paddlecd import schema as validation
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, PipelineError
from paddlecd.image import variants
from paddlecd.pipeline import affected as changes
from paddlecd.pipeline import stages
from paddlecd.types import JsonSchema

FOLDER = "pipelines"
SCHEMA_FILE = "src/paddlecd/schemas/pipeline.schema.json"


@dataclass(frozen=True)
class StageDef:
    """One stage of a pipeline: its unique ``name``, its ``kind``, the stages it ``needs``, how many
    variants run at once (``parallel``) and the kind's parameters (``params``). ``after`` is what it
    runs after: its ``needs``, or else the stage listed before it."""

    name: str
    kind: str
    needs: tuple[str, ...] = ()
    parallel: int = 1
    params: dict[str, Any] = field(default_factory=dict, compare=False)
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineDef:
    """A loaded pipeline: ``name`` (the file stem), ``variants`` policy and ``stages`` in run
    order."""

    name: str
    path: Path
    description: str
    variants: str | tuple[str, ...]
    stages: tuple[StageDef, ...]


def folder(settings: Settings) -> Path:
    """``<root>/pipelines``."""
    return settings.path(FOLDER)


def names(settings: Settings) -> list[str]:
    """Pipeline names (file stems) under ``pipelines/``, sorted."""
    return sorted(p.stem for p in folder(settings).glob("*.yaml"))


def load(settings: Settings, name: str) -> PipelineDef:
    """Load pipeline ``name`` from ``pipelines/<name>.yaml``.

    Raises:
        PipelineError: no such pipeline (with a "did you mean"), a symlink out of
            ``pipelines/``, malformed YAML, a schema violation
            (unknown keys and stage kinds with a "did you mean"), a duplicate stage name, a
            ``needs`` on an unknown stage, or a cycle.
    """
    path = folder(settings) / f"{name}.yaml"
    # a name, never a path, and one a file can have (a trial: 100000 p's: "File name too long",
    # exit 2, where any other unknown name is exit 10)
    named = re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,199}", name)
    if named and path.is_symlink() and not path.exists():  # trial 21: "unknown pipeline 'x'",
        raise PipelineError(  # hint "did you mean 'x'?"
            f"{path} is {files.kind_of(path)}, which does not exist",
            f"point the link at the pipeline file, or remove {path}")
    if not named or not path.exists():
        known = names(settings)
        close = difflib.get_close_matches(name, known, n=1)
        if not named and name in known:  # a trial: pipeline.list said "unknown pipeline
            raise PipelineError(         # 'Bad Name'", did you mean 'Bad Name'
                f"{path}: '{name[:80]}' is no pipeline name (lowercase letters, digits, - and _, "
                "at most 200, first a letter or digit)",
                f"rename the file, e.g. {FOLDER}/{_suggested(name)}.yaml")
        why = (f"no {FOLDER}/{name}.yaml" if named else
               f"{len(name)} characters: a pipeline name is at most 200" if len(name) > 200
               else "a pipeline is named by its file in pipelines/, without a path or .yaml")
        raise PipelineError(  # a trial: "../images/variants" was "no pipelines/../…", which exists
            f"unknown pipeline '{name[:80]}' ({why})",
            (f"did you mean '{close[0]}'? " if close else "") + "known: " + ", ".join(known),
        )
    real = path.resolve()
    if not real.is_relative_to(folder(settings).resolve()):  # never read out of
        raise PipelineError(  # pipelines/: what it names would be quoted in the error
            f"{path} is a symlink to {real}, outside {FOLDER}/",
            f"copy the pipeline file into {FOLDER}/: paddlecd never follows a link out of it",
        )
    pdef = parse(_read(path), path, name)
    check_params(settings, pdef)
    return pdef


def _suggested(name: str) -> str:
    """``name`` as a pipeline name: lowercase, runs of other characters as one ``-``."""
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:200] or "pipeline"


def check_params(settings: Settings, pdef: PipelineDef) -> None:
    """Check every stage's ``with:`` as its kind's task would (:attr:`stages.Kind.check`), so a
    bad parameter fails the run before its first stage, and ``--dry-run`` too (a trial: an
    empty or foreign job file was found only after promote had run; the dry run said nothing).

    Raises:
        PipelineError: naming the file, the stage and the task's own cause.
    """
    for s in pdef.stages:
        check = stages.KINDS[s.kind].check
        if check is None:
            continue
        try:
            check(settings, s.params)
        except ConfigError as e:
            raise PipelineError(f"{pdef.path}: stage '{s.name}' ({s.kind}): {e.cause}",
                                e.hint) from e


def parse(data: Any, path: Path, name: str) -> PipelineDef:
    """Validate already-read YAML ``data`` of pipeline ``name`` (see :func:`load`)."""
    _validate(data, path)
    stages = [StageDef(name=s.get("name", s["stage"]), kind=s["stage"],
                       needs=tuple(s.get("needs", ())), parallel=s.get("parallel", 1),
                       params=dict(s.get("with", {})))
              for s in data["stages"]]
    seen: set[str] = set()
    for i, s in enumerate(stages):
        if s.name in seen:
            raise PipelineError(f"{path}: duplicate stage '{s.name}' (stages[{i}])",
                                f"give it a distinct name: add 'name: {s.name}-2' to that entry")
        seen.add(s.name)
    variants = data.get("variants", "one")
    ordered = tuple(_ordered(stages, path))
    _check_inputs(ordered, path)
    return PipelineDef(name=name, path=path, description=data.get("description", ""),
                       variants=tuple(variants) if isinstance(variants, list) else variants,
                       stages=ordered)


def supplier(pdef_stages: tuple[StageDef, ...], stage: StageDef, kind: str) -> StageDef | None:
    """The stage whose outputs ``stage`` takes as its ``kind`` input: the nearest stage of that
    kind among those it runs after (its ``needs``, transitively; without ``needs`` the stage listed
    before it), or None. Two stages of one kind are told apart by this, not by which ran last."""
    by_name = {s.name: s for s in pdef_stages}
    queue, seen = list(stage.after), set()
    while queue:
        name = queue.pop(0)
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        if by_name[name].kind == kind:
            return by_name[name]
        queue += by_name[name].after
    return None


def _check_inputs(ordered: tuple[StageDef, ...], path: Path) -> None:
    """Every kind a stage needs (its ``KINDS`` entry) has a supplying stage before it."""
    for s in ordered:
        for need in stages.KINDS[s.kind].needs:
            if supplier(ordered, s, need) is None:
                raise PipelineError(f"{path}: stage '{s.name}' ({s.kind}) needs a {need} stage "
                                    "before it",
                                    f"add '- stage: {need}' earlier in {path.name}")


def _ordered(stages: list[StageDef], path: Path) -> list[StageDef]:
    """Stages in run order: listed order, each after its ``needs`` (default: the stage listed
    before)."""
    by_name = {s.name: s for s in stages}
    graph: dict[str, tuple[str, ...]] = {}
    for i, s in enumerate(stages):
        for need in s.needs:
            if need not in by_name:
                close = difflib.get_close_matches(need, by_name, n=1)
                raise PipelineError(
                    f"{path}: stage '{s.name}' needs unknown stage '{need}'",
                    f"did you mean '{close[0]}'?" if close else "stages: " + ", ".join(by_name),
                )
        graph[s.name] = s.needs if s.needs or i == 0 else (stages[i - 1].name,)
        stages[i] = dataclasses.replace(s, after=graph[s.name])
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as e:
        cycle = " -> ".join(e.args[1])
        raise PipelineError(
            f"{path}: stages form a cycle: {cycle}",
            "remove one 'needs' of that cycle (without 'needs' a stage follows the one listed "
            "before it)",
        ) from e
    order, position = [], {s.name: i for i, s in enumerate(stages)}
    while sorter.is_active():  # among the ready stages, the one listed first goes first
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        order += ready
        sorter.done(*ready)
    by_name = {s.name: s for s in stages}  # now with ``after`` set
    return [by_name[n] for n in order]


def _read(path: Path) -> Any:
    return files.read_yaml(path, error=PipelineError)


def schema() -> JsonSchema:
    """pipeline.schema.json completed from the stage-kind registry: the ``stage`` enum and each
    kind's ``with:`` parameters (:data:`paddlecd.pipeline.stages.KINDS`)."""
    doc = validation.load_schema("pipeline.schema.json")
    stage = doc["$defs"]["stage"]
    stage["properties"]["stage"]["enum"] = list(stages.KINDS)
    stage["allOf"] = [
        {"if": {"properties": {"stage": {"const": k.name}}},
         "then": {**({"required": ["with"]} if k.required_params else {}),
                  "properties": {"with": dict(k.params)}}}
        for k in stages.KINDS.values()]
    return doc


def _validate(data: Any, path: Path) -> None:
    validation.check(data, "pipeline.schema.json", source=str(path), error=PipelineError,
                     schema=schema())


@dataclass(frozen=True)
class Selection:
    """The variants a run covers and ``why`` (``--variant``, ``changed since origin/main``,
    ``all``…)."""

    variants: tuple[str, ...]
    why: str


def select(
    settings: Settings, pdef: PipelineDef, given: tuple[str, ...] = (), base_ref: str | None = None
) -> Selection:
    """Pick the variants for a run: ``given`` (--variant) wins; else the pipeline's ``variants``
    policy.

    ``changed`` uses ``base_ref`` (default under GitHub Actions: ``origin/$GITHUB_BASE_REF``) and
    falls back to ``cpu`` for a local run without one.

    Raises:
        ConfigError: an unknown variant on the command line. PipelineError: one in the pipeline
            file.
        ConfigError: ``base_ref`` unknown to git.
    """
    if given:
        if pdef.variants == "one" and len(set(given)) > 1:
            raise ConfigError(
                f"pipeline '{pdef.name}' runs one variant at a time, got {', '.join(given)}",
                "run it once per variant (each is its own release)",
            )
        return Selection(tuple(variants.get(settings, n).name for n in given), "--variant")
    policy = pdef.variants
    if isinstance(policy, tuple):
        try:
            return Selection(
                tuple(variants.get(settings, n).name for n in policy), f"listed in {pdef.path.name}"
            )
        except ConfigError as e:
            raise PipelineError(f"{pdef.path}: {e.cause}", e.hint) from e
    if policy == "all":
        return Selection(tuple(variants.load(settings)), "all variants")
    if policy == "changed" and base_ref:
        return Selection(
            tuple(changes.select(settings, base_ref)), f"touched by the change since {base_ref}"
        )
    return Selection(
        ("cpu",),
        "the default without --variant" + (" or --base-ref" if policy == "changed" else ""),
    )


def check_options(options: Mapping[str, Any], pdef: PipelineDef | None = None) -> dict[str, Any]:
    """Validate the promote options a run carries (``version``, ``bump``, ``digest``); returns the
    given ones.

    Raises:
        ConfigError: an invalid semver version, both --version and --bump, a bump other than
            major|minor|patch, a malformed digest, or options for a pipeline without a promote
            stage.
    """
    from paddlecd.release import policy as semver_policy

    given = {k: v for k, v in options.items() if v}
    if given and pdef and not any(s.kind == "promote" for s in pdef.stages):
        raise ConfigError(
            f"{' '.join('--' + k for k in given)}: for the promote stage, and pipeline "
            f"'{pdef.name}' has none",
            "drop them, or run a pipeline with a promote stage (e.g. release)",
        )
    if given.get("version") and given.get("bump"):
        raise ConfigError("pass one of --version and --bump, not both", "e.g. --version 1.4.0")
    if "version" in given:
        semver_policy.parse_version(given["version"])
    if given.get("bump") not in (None, "major", "minor", "patch"):
        raise ConfigError(
            f"--bump '{given['bump']}' is not major, minor or patch", "e.g. --bump minor"
        )
    if "digest" in given and not re.fullmatch(r"sha256:[0-9a-f]{64}", given["digest"]):
        raise ConfigError(
            f"--digest '{given['digest']}' is not sha256:<64 hex>",
            "copy it from invoke release.list or the evidence",
        )
    return given


def check_selected(settings: Settings, pdef: PipelineDef, selection: Selection) -> None:
    """Each deploy stage's job checked against each selected variant as ``invoke deploy`` checks
    it (cards on a CPU variant, /dev/shm past the memory, mounts): a trial's
    ``gpus_per_node: 1`` on cpu passed the dry run, which the task refuses.

    Raises:
        PipelineError: naming the file, the stage, the variant and the task's cause.
    """
    from paddlecd import deployment
    from paddlecd.cluster import jobfile

    for s in pdef.stages:
        if s.kind != "deploy":
            continue
        for name in selection.variants:
            try:
                job = deployment.check_job(
                    settings, job=str(settings.path(s.params["job"])),
                    nodes=s.params.get("nodes"), gpus_per_node=s.params.get("gpus_per_node"),
                    kind=s.params.get("kind", "job"), cluster=s.params.get("cluster"))
                jobfile.check(job, gpu_variant=variants.get(settings, name).is_gpu,
                              variant=name)
            except ConfigError as e:
                raise PipelineError(f"{pdef.path}: stage '{s.name}' (deploy) for {name}: "
                                    f"{_as_params(e.cause, s.params)}",
                                    e.hint and _as_params(e.hint, s.params)) from e


def _as_params(text: str, params: dict[str, Any]) -> str:
    """``text`` of a task's error with each of its ``--flag-name`` that a stage's ``with:`` gave
    as ``flag_name`` named as that key (the task's flags are the stage's parameters)."""
    for key in params:
        text = re.sub(rf"--{re.escape(key.replace('_', '-'))}\b", f"with.{key}", text)
    return text


def plan_lines(pdef: PipelineDef, selection: Selection, settings: Settings,
               options: Mapping[str, Any] | None = None) -> list[str]:
    """The run plan as lines (printed before anything runs; all of ``--dry-run``); ``options``
    (version, bump, digest) are shown on the promote stage. The selected variants' deploy jobs
    are checked first (:func:`check_selected`), so a plan is never shown for a run its deploy
    would refuse.

    Raises:
        PipelineError: as :func:`check_selected`.
    """
    check_selected(settings, pdef, selection)
    where = {
        "registry": f"registry {settings.registry.url}",
        "cluster": f"cluster ({settings.cluster.kind} default)",
        "bucket": "bucket " + (settings.storage.url or f"file://{settings.state / 'artifacts'}"),
    }
    names = ", ".join(selection.variants) or "none"
    out = [f"pipeline {pdef.name}: variants {names} ({selection.why})"]
    for i, s in enumerate(pdef.stages, 1):
        extra = [f"{s.parallel} at once"] if s.parallel > 1 else []
        changes = stages.KINDS[s.kind].changes
        extra += [f"changes the {where[changes]}"] if changes else []
        extra += [
            f"{k}={v}"
            for k, v in s.params.items()
            if not (s.kind == "promote" and options and options.get("version") and k == "bump")
        ]
        extra += [f"{k}={v}" for k, v in (options or {}).items() if v and s.kind == "promote"]
        kind = f" ({s.kind})" if s.kind != s.name else ""
        out.append(f"  {i}. {s.name + kind:<12} " + "; ".join(extra))
    return out
