"""The release ledger: one OCI artifact per record, in the release repository itself.

Where it lives, and why: every record is an OCI image manifest tagged
``ledger.<variant>.<UTC time to µs>Z-<8 random hex>`` in the release repository, with the record JSON
as its config blob and copied into the ``org.paddlecd.ledger.record`` annotation (one GET reads it).

* The ledger travels with the releases it describes: whoever can read ``release/paddle`` can read its
  history, from any runner, with the same credentials; nothing else must be backed up.
* Append-only by construction: a record gets a fresh unique tag, checked absent before the write and
  never written again, so concurrent promotions cannot lose each other's records — there is no shared
  file to read-modify-write, which distribution cannot guard (it has no If-Match on manifests).
* Order is the tag name (time, then random), the same for every reader; :func:`paddlecd.release.policy.fold`
  replays records in that order, so every promoter computes the same moving-tag state.

The artifact store (issue 4) was the other candidate; it is optional per deployment, the registry is not.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json
import os
import re
import secrets
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from paddlecd.errors import NotFoundError, PromotionError
from paddlecd.registry.client import OCI_MANIFEST, RegistryClient

RECORD_TYPE = "application/vnd.paddlecd.ledger.record.v1+json"
ANNOTATION = "org.paddlecd.ledger.record"
_TAG = re.compile(r"ledger\.(?P<variant>[a-z0-9][a-z0-9._-]*)\.(?P<time>\d{8}T\d{12}Z)-(?P<rand>[0-9a-f]{8})")


@dataclass(frozen=True)
class Record:
    """One ledger record: one promotion or rollback.

    Attributes:
        id: its ledger tag (orders records). action: ``promote`` or ``rollback``.
        variant, version, digest: what was released (``sha256:…``).
        source: ``host/repo@sha256:…`` copied from; target: ``host/repo`` released into.
        tags: the tags the action owns; previous: ``{moving tag: "version@digest" or null}`` before it.
        evidence: evidence id ``sha256:<hex>@<created>`` (None for rollbacks / forced without evidence).
        evidence_summary: ``{"passed", "checks", "failed": [names], "created"}`` or None.
        forced, reason: ``--force`` and its ``--reason``. who: ``$GITHUB_ACTOR`` or ``user@host``; when: ISO-8601 UTC.
    """

    id: str
    action: str
    variant: str
    version: str
    digest: str
    source: str
    target: str
    tags: tuple[str, ...] = ()
    previous: dict[str, str | None] = field(default_factory=dict)
    evidence: str | None = None
    evidence_summary: dict[str, Any] | None = None
    forced: bool = False
    reason: str | None = None
    who: str = ""
    when: str = ""

    def to_json(self) -> bytes:
        """Canonical JSON bytes (sorted keys), as stored."""
        return json.dumps({"schema": 1, **asdict(self)}, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        """Parse a stored record (unknown keys from newer writers are ignored)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["tags"] = tuple(known.get("tags") or ())
        return cls(**known)


def who() -> str:
    """The actor: ``$GITHUB_ACTOR`` in GitHub Actions, else ``user@hostname``."""
    if os.environ.get("GITHUB_ACTOR"):
        return f"{os.environ['GITHUB_ACTOR']} (github run {os.environ.get('GITHUB_RUN_ID', '?')})"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def new_id(variant: str, now: dt.datetime | None = None) -> str:
    """A fresh record tag ``ledger.<variant>.<YYYYmmddTHHMMSSffffff>Z-<8 hex>`` (sorts by time)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"ledger.{variant}.{now.strftime('%Y%m%dT%H%M%S%f')}Z-{secrets.token_hex(4)}"


def append(client: RegistryClient, repository: str, record: Record) -> None:
    """Store ``record`` as a new artifact tagged ``record.id`` in ``repository``.

    Raises:
        PromotionError: the tag exists already (records are never overwritten).
        RegistryError: the registry refused the write.
    """
    try:
        client.resolve(repository, record.id)
        raise PromotionError(f"ledger record {record.id} exists already in {repository}",
                             "records are never overwritten; re-run to create a fresh record")
    except NotFoundError:
        pass
    body = record.to_json()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    client.upload_blob(repository, digest, body, len(body))
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": RECORD_TYPE,
        "config": {"mediaType": RECORD_TYPE, "digest": digest, "size": len(body)},
        "layers": [], "annotations": {ANNOTATION: body.decode()},
    }, sort_keys=True).encode()
    client.put_manifest(repository, record.id, manifest, OCI_MANIFEST)


# Records never change once written, so each is fetched once per process: (registry, repository, id) → Record.
_CACHE: dict[tuple[str, str, str], Record] = {}


def read(client: RegistryClient, repository: str, variant: str | None = None,
         tags: list[str] | None = None) -> list[Record]:
    """All records in ``repository`` (of ``variant`` when given), oldest first.

    Args:
        tags: the repository's tags when the caller has just listed them (saves a request).
    """
    ids = sorted(t for t in (client.list_tags(repository) if tags is None else tags)
                 if (m := _TAG.fullmatch(t)) and (variant is None or m.group("variant") == variant))
    records = []
    for record_id in ids:
        key = (client.host, repository, record_id)
        if key not in _CACHE:
            annotations = client.get_manifest(repository, record_id).json().get("annotations") or {}
            if ANNOTATION not in annotations:
                continue  # a tag that only looks like a record: not ours, not counted
            _CACHE[key] = Record.from_json(json.loads(annotations[ANNOTATION]))
        records.append(_CACHE[key])
    return records
