"""Evidence: what verify measured, one JSON record per image digest.

Layout under the state folder (``settings.state``)::

    evidence/<digest hex>.json     {"schema": 1, "digest": "sha256:…",
                                    "reference": "host/repo@sha256:…", "variant": "cpu",
                                    "passed": true, "created": "<ISO-8601 UTC>",
                                    "checks": [{"name", "passed", "skipped", "duration_s",
                                                "metrics", "message"}],
                                    "versions": {"paddle", "cuda", "cudnn", "driver"},
                                    "junit": "<path>", "duration_s", "revision", "model_dir",
                                    "warnings": ["<one line>"], "nodes": [{"hostname", …}],
                                    "hardware": "<class>", "figures": [{"name", "value",
                                                "unit", "better", "spread", "samples"}],
                                    "models": [{"model", "passed", "code", "cause"}]}

It is a frozen record (:class:`Evidence`) with ``to_json``/``from_json``; the JSON shape on disk is
the one above. The candidate record push writes beside it is :mod:`paddlecd.image.candidate`.
Evidence is keyed by digest (DESIGN.md: a digest is identity) and is what promotion checks, so it is
checked by type when read (schemas/evidence.schema.json): ``passed`` must be a JSON
boolean in the record and in every check, and a record saying it passed may hold no failed check.
Writes are atomic (temp file + rename) so a reader never sees half a record.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd import schema as validation
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, VerifyError, quoted
from paddlecd.files import json_problem, unique_keys, write_json

SCHEMA = 1

# The smoke modules every passing verification must contain (smoke/test_<module>.py); evidence
# missing one (a module deleted, renamed or not collected) cannot promote. Skipped checks inside
# them are allowed (GPU-only checks on CPU variants; collective checks on one card).
REQUIRED_CHECKS = ("environment", "allreduce", "convergence", "export")


@dataclass(frozen=True)
class Check:
    """One smoke test case: ``name`` is ``<module>/<test>``; a ``skipped`` check counts as passed.

    ``duration_s`` is seconds; ``metrics`` are the test's JSON-decoded JUnit properties (busbw,
    loss…); ``message`` is the failure text (at most 2000 characters, empty when it passed).
    """

    name: str
    passed: bool
    skipped: bool = False
    duration_s: float = 0.0
    metrics: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""

    @property
    def module(self) -> str:
        """The smoke module the check belongs to (``allreduce`` for ``allreduce/test_sums``)."""
        return self.name.split("/", 1)[0]


@dataclass(frozen=True)
class Evidence:
    """What verify measured inside ``digest`` (``sha256:…``), stored by digest.

    Attributes:
        reference: ``host/repo@sha256:…`` verified. variant: the image's variant label (or None).
        passed: every check passed and the suite exited 0. created: ISO-8601 UTC, second precision.
        checks: the smoke test cases, in JUnit order.
        versions: ``{"paddle", "cuda", "cudnn", "driver"}``.
        duration_s: seconds the smoke container ran. revision: git sha the image was built from.
        junit, model_dir: paths of the JUnit XML and of the exported model (None when not exported).
        warnings: one-line notes that are neither pass nor fail (a busbw with no expectation).
        nodes: per-node facts of a ``--nodes N`` run (``hostname``, ``gpu``, ``gpus``,
            ``driver``, ``rank``); empty for a one-container run, whose node count is 1.
        hardware: the class the figures ran on (:mod:`paddlecd.verify.figures`), or None.
        figures: the speed figures, each ``{"name", "value", "unit", "better", "spread",
            "samples", "hardware"}`` (:meth:`paddlecd.verify.figures.Figure.to_json`).
        models: the ``release.models`` checked in the image (``verify --models``), each
            ``{"model", "passed", "code", "cause", "onnx"}`` (:mod:`paddlecd.verify.models`).
    """

    digest: str
    reference: str
    variant: str | None
    passed: bool
    created: str
    checks: tuple[Check, ...] = ()
    versions: Mapping[str, str | None] = field(default_factory=dict)
    duration_s: float = 0.0
    revision: str | None = None
    junit: str | None = None
    model_dir: str | None = None
    warnings: tuple[str, ...] = ()
    nodes: tuple[Mapping[str, Any], ...] = ()
    hardware: str | None = None
    figures: tuple[Mapping[str, Any], ...] = ()
    models: tuple[Mapping[str, Any], ...] = ()

    @property
    def node_count(self) -> int:
        """Nodes the collective checks ran across (1 unless ``verify --nodes N``)."""
        return max(1, len(self.nodes))

    @property
    def failed(self) -> tuple[Check, ...]:
        """The checks that did not pass."""
        return tuple(c for c in self.checks if not c.passed)

    @property
    def tally(self) -> str:
        """``8 passed, 2 skipped`` (``, 1 failed``): what pytest said, so a GPU check skipped on a
        CPU image is never counted as one that ran."""
        skipped = sum(c.skipped for c in self.checks)
        failed = len(self.failed)
        ran = len(self.checks) - skipped - failed
        return f"{ran} passed" + (f", {skipped} skipped" if skipped else "") + (
            f", {failed} failed" if failed else "")

    def missing_checks(self) -> list[str]:
        """The :data:`REQUIRED_CHECKS` modules with no check in this record."""
        present = {c.module for c in self.checks}
        return [m for m in REQUIRED_CHECKS if m not in present]

    def age_hours(self) -> float:
        """Hours since :attr:`created`."""
        return (dt.datetime.now(dt.timezone.utc) - _parse_time(self.created)).total_seconds() / 3600

    def to_json(self) -> dict[str, Any]:
        """The record as stored: a JSON object with ``schema`` first among its keys."""
        return {
            "schema": SCHEMA,
            **dataclasses.asdict(self),
            "checks": [dataclasses.asdict(c) for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: Any, *, source: str = "evidence") -> Evidence:
        """Parse a stored record, checked by type (keys from newer writers are ignored).

        Args:
            data: the decoded JSON. source: names the record in errors (e.g. its path).

        Raises:
            VerifyError: a field of the wrong type, e.g. ``passed`` the string ``"false"``, a failed
                check under ``passed: true``, an unknown schema version, or ``created`` not
                ISO-8601; the cause names the field.
        """
        validation.check(
            data,
            "evidence.schema.json",
            source=source,
            error=VerifyError,
            messages={"const": "a failed check under passed: true (the record contradicts itself)"},
        )
        _parse_time(data["created"], source=source)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields = Check.__dataclass_fields__
        known["checks"] = tuple(
            Check(**{k: v for k, v in c.items() if k in fields}) for c in data["checks"]
        )
        known.setdefault("variant", None)
        known["warnings"] = tuple(data.get("warnings", ()))
        known["nodes"] = tuple(data.get("nodes", ()))
        known["figures"] = tuple(data.get("figures", ()))
        known["models"] = tuple(data.get("models", ()))
        return cls(**known)


def _parse_time(text: str, *, source: str = "evidence") -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise VerifyError(
            f"{source}: created: {text!r} is not an ISO-8601 time",
            "re-run verify to write a new record",
        ) from e


def _hex(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64:
        raise ConfigError(f"not a sha256 digest: {quoted(digest)}",
                          "pass sha256:<64 hex characters>")
    return hexpart


def evidence_path(settings: Settings, digest: str) -> Path:
    """Where the evidence for ``digest`` lives."""
    return settings.state / "evidence" / f"{_hex(digest)}.json"


def save(settings: Settings, record: Evidence) -> Path:
    """Store an evidence ``record`` under its digest; returns its path."""
    return write_json(evidence_path(settings, record.digest), record.to_json())


def load(settings: Settings, digest: str) -> Evidence | None:
    """The evidence record for ``digest``, or None when verify never ran on it.

    Raises:
        VerifyError: the stored record is not valid JSON or fails :meth:`Evidence.from_json`.
    """
    path = evidence_path(settings, digest)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(), object_pairs_hook=unique_keys)
    except ValueError as e:
        raise VerifyError(
            f"{path}: {json_problem(e)}", "re-run verify to write a new record"
        ) from e
    return Evidence.from_json(data, source=str(path))
