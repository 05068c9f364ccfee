"""Evidence: what verify measured, one JSON record per image digest, and the candidate records.

Layout under the state folder (``settings.state``)::

    evidence/<digest hex>.json     {"schema": 1, "digest": "sha256:…", "reference": "host/repo@sha256:…",
                                    "variant": "cpu", "passed": true, "created": "<ISO-8601 UTC>",
                                    "checks": [{"name", "passed", "duration_s", "metrics", "message"}],
                                    "versions": {"paddle", "cuda", "cudnn", "driver"}, "junit": "<path>"}
    candidates/<variant>.json      {"variant", "reference", "digest", "tag", "pushed"}

Evidence is keyed by digest (DESIGN.md: a digest is identity) and is what promotion checks. Writes
are atomic (temp file + rename) so a reader never sees half a record.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import ConfigError
from paddlecd.files import now_iso, write_json

SCHEMA = 1


# The smoke modules every passing verification must contain (smoke/test_<module>.py); evidence missing
# one (a module deleted, renamed or not collected) cannot promote. Skipped checks inside them are allowed
# (GPU-only checks on CPU variants; collective checks on one card).
REQUIRED_CHECKS = ("environment", "allreduce", "convergence", "export")


def missing_checks(record: dict[str, Any]) -> list[str]:
    """The :data:`REQUIRED_CHECKS` modules with no check in ``record['checks']`` (names ``module/test``)."""
    present = {str(c.get("name", "")).split("/", 1)[0] for c in record.get("checks", [])}
    return [m for m in REQUIRED_CHECKS if m not in present]


def _hex(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64:
        raise ConfigError(f"not a sha256 digest: {digest!r}", "pass sha256:<64 hex characters>")
    return hexpart


def evidence_path(settings: Settings, digest: str) -> Path:
    """Where the evidence for ``digest`` lives."""
    return settings.state / "evidence" / f"{_hex(digest)}.json"


def save(settings: Settings, record: dict[str, Any]) -> Path:
    """Store an evidence ``record`` (must carry ``digest``); returns its path."""
    return write_json(evidence_path(settings, record["digest"]), {"schema": SCHEMA, **record})


def load(settings: Settings, digest: str) -> dict[str, Any] | None:
    """The evidence record for ``digest``, or None when verify never ran on it."""
    path = evidence_path(settings, digest)
    return json.loads(path.read_text()) if path.exists() else None


def age_hours(record: dict[str, Any]) -> float:
    """Hours since ``record['created']``."""
    created = dt.datetime.fromisoformat(record["created"].replace("Z", "+00:00"))
    return (dt.datetime.now(dt.timezone.utc) - created).total_seconds() / 3600


def save_candidate(settings: Settings, variant: str, *, reference: str, digest: str, tag: str) -> Path:
    """Record the pushed candidate of ``variant`` (``reference`` is ``host/repo@sha256:…``)."""
    record = {"variant": variant, "reference": reference, "digest": digest, "tag": tag, "pushed": now_iso()}
    return write_json(settings.state / "candidates" / f"{variant}.json", record)


def load_candidate(settings: Settings, variant: str) -> dict[str, Any] | None:
    """The last pushed candidate of ``variant``, or None."""
    path = settings.state / "candidates" / f"{variant}.json"
    return json.loads(path.read_text()) if path.exists() else None
