"""The candidate record: the image push made last for a variant, which verify and promote take.

Layout under the state folder (``settings.state``)::

    candidates/<variant>.json      {"variant", "reference", "digest", "tag", "pushed"}

A frozen record (:class:`Candidate`) with ``to_json``/``from_json``; scripts and workflows read
``candidates/<variant>.json``. Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import ConfigError
from paddlecd.files import json_problem, now_iso, regular_file, unique_keys, write_json
from paddlecd.registry.reference import check_digest


@dataclass(frozen=True)
class Candidate:
    """The last pushed image of ``variant``: ``reference`` is ``host/repo@sha256:…``, ``digest`` its
    ``sha256:…``, ``tag`` the build tag pushed, ``pushed`` the ISO-8601 UTC time."""

    variant: str
    reference: str
    digest: str
    tag: str
    pushed: str

    def to_json(self) -> dict[str, Any]:
        """The record as stored (scripts read ``["digest"]`` and ``["reference"]``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, *, source: str = "candidate",
                  variant: str | None = None) -> Candidate:
        """Parse a stored candidate record (of ``variant``, when the caller knows it: the hint
        names it).

        Raises:
            ConfigError: not a JSON object, or a field missing or not a string (the cause names
                it).
        """
        again = f"push again to rewrite it: invoke push --variant {variant or '<variant>'}"
        if not isinstance(data, dict):  # a trial: a list was "'variant' is missing"
            kind = {list: "an array", str: "a string", bool: "true or false",
                    type(None): "null"}.get(type(data), "a number")
            raise ConfigError(f"{source}: not a JSON object but {kind}", again)
        for name in cls.__dataclass_fields__:
            if not isinstance(data.get(name), str):
                raise ConfigError(f"{source}: '{name}' is missing or not a string", again)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def candidate_path(settings: Settings, variant: str) -> Path:
    """Where the candidate record of ``variant`` lives."""
    return settings.state / "candidates" / f"{variant}.json"


def save_candidate(
    settings: Settings, variant: str, *, reference: str, digest: str, tag: str
) -> Path:
    """Record the pushed candidate of ``variant`` (``reference`` is ``host/repo@sha256:…``)."""
    record = Candidate(
        variant=variant, reference=reference, digest=digest, tag=tag, pushed=now_iso()
    )
    return write_json(candidate_path(settings, variant), record.to_json())


def load_candidate(settings: Settings, variant: str) -> Candidate | None:
    """The last pushed candidate of ``variant``, or None.

    Raises:
        ConfigError: the stored record is not valid JSON, lacks a field, or holds what push never
            writes: a ``digest`` that is not one, a ``reference`` other than
            ``<settings.candidate_repo>@<digest>`` (edited by hand, or pushed under another
            ``registry.url``/``registry.repository``), another ``variant``; each names the file
            and the key (a trial: an edited reference sent promote to a registry nobody
            configured, and a bad digest was "invalid digest" naming no file).
    """
    path = candidate_path(settings, variant)
    if not regular_file(path, "candidate record"):  # a folder or a named pipe is named (a trial)
        return None
    try:
        data = json.loads(path.read_text(), object_pairs_hook=unique_keys)
    except ValueError as e:
        raise ConfigError(
            f"{path}: {json_problem(e)}", f"push again: invoke push --variant {variant}"
        ) from e
    cand = Candidate.from_json(data, source=str(path), variant=variant)
    again = f"push again: invoke push --variant {variant}"
    try:
        check_digest(cand.digest)
    except ConfigError as e:
        raise ConfigError(f"{path}: digest {cand.digest[:80]!r} is not a digest", again) from e
    if cand.reference != f"{settings.candidate_repo}@{cand.digest}":
        raise ConfigError(
            f"{path}: reference {cand.reference[:200]!r} is not "
            f"{settings.candidate_repo}@{cand.digest[:19]}…",
            f"{again} (the record is from another registry.url or registry.repository, or "
            "was edited)")
    if cand.variant != variant:
        raise ConfigError(f"{path}: variant {cand.variant[:80]!r} is not {variant!r}", again)
    return cand
