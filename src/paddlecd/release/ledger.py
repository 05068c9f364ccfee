"""The release ledger: one OCI artifact per record, in the release repository itself; checkpoints.

Every record is an OCI image manifest tagged ``ledger.<variant>.<UTC time to µs>Z-<8 random hex>``
in the release repository (append-only: a fresh unique tag per record); per variant a checkpoint
(``ledger.<variant>.checkpoint``: record copies and the folded state) and a head
(``ledger.<variant>.head``: the newest record) bound what a reader fetches, whatever the history.
The tags are the ledger; checkpoint and head are caches of them. Where it lives and why, the
bounded reads, the invariants (each proved in tests/integration/test_ledger.py) and the costs:
docs/design/ledger.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import hashlib
import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

import semver

from paddlecd.errors import NotFoundError, PromotionError
from paddlecd.registry.auth import scope
from paddlecd.registry.client import OCI_MANIFEST, RegistryClient
from paddlecd.release.policy import Action, State, fold

RECORD_TYPE = "application/vnd.paddlecd.ledger.record.v1+json"
ANNOTATION = "org.paddlecd.ledger.record"
CHECKPOINT_TYPE = "application/vnd.paddlecd.ledger.checkpoint.v1+json+gzip"
CHECKPOINT_ANNOTATION = "org.paddlecd.ledger.checkpoint"
# The checkpoint's one layer: the folded state (a few hundred bytes, whatever the history).
STATE_TYPE = "application/vnd.paddlecd.ledger.state.v1+json+gzip"
# How late a record may reach the registry after the time in its id, clock skew between promoters
# included: a windowed read lists the records from this long before the checkpoint's newest.
# append() refuses an id older than half of it, so only a clock more than 5 minutes off breaks it.
WINDOW = dt.timedelta(minutes=10)
# Records outside the checkpoint before a promotion writes a new one: the most a reader fetches one
# by one. Small, because each costs a request (~2.3 KiB with its headers); a checkpoint write costs
# a state blob and a manifest. 3, not 4: the promotion that walks 4 records and writes the
# checkpoint moved 65.7 KiB at 1,000 records (bench_ledger, distribution 3), over the 64 KiB a
# promotion may move.
CHECKPOINT_EVERY = 3
_TAG = re.compile(
    r"ledger\.(?P<variant>[a-z0-9][a-z0-9._-]*)\.(?P<time>\d{8}T\d{12}Z)-(?P<rand>[0-9a-f]{8})"
)


@dataclass(frozen=True)
class Record:
    """One ledger record: one promotion or rollback.

    Attributes:
        id: its ledger tag (orders records). action: ``promote`` or ``rollback``.
        variant, version, digest: what was released (``sha256:…``).
        source: ``host/repo@sha256:…`` copied from; target: ``host/repo`` released into.
        tags: the tags the action owns; previous: ``{moving tag: "version@digest" or null}`` before
            it.
        evidence: evidence id ``sha256:<hex>@<created>`` (None for rollbacks / forced without
            evidence).
        evidence_summary: ``{"passed", "checks", "skipped", "failed": [names], "created"}`` or
            None (``skipped`` is missing in records of paddlecd before 2026-12: read as 0).
        attestation: digest of the signed attestation copied with the release, or None.
        forced, reason: ``--force`` and its ``--reason``. who: ``$GITHUB_ACTOR`` or ``user@host``;
            when: ISO-8601 UTC.
        parent: id of the newest record of the variant its writer had read (``""``: none; None:
            unknown, a record of an older paddlecd). Chains records back from the head.
        gate: the upgrade gate of a promotion (:meth:`paddlecd.release.gates.Comparison.to_json`
            plus ``figures``, the release's own attested figures), or None.
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
    attestation: str | None = None
    forced: bool = False
    reason: str | None = None
    who: str = ""
    when: str = ""
    parent: str | None = None
    gate: dict[str, Any] | None = None

    def to_json(self) -> bytes:
        """Canonical JSON bytes (sorted keys), as stored."""
        return json.dumps(
            # parent only when known: records without one keep their bytes (and checkpoints theirs)
        {"schema": 1, **{k: v for k, v in asdict(self).items()
                         if k not in ("parent", "gate") or v is not None}},
            sort_keys=True, separators=(",", ":")
        ).encode()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        """Parse a stored record (unknown keys from newer writers are ignored)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["tags"] = tuple(known.get("tags") or ())
        return cls(**known)


def actions_of(records: list[Record] | tuple[Record, ...]) -> list[Action]:
    """Ledger records as fold actions (:func:`paddlecd.release.policy.fold`)."""
    return [Action(r.action, semver.Version.parse(r.version), r.digest, r.id)  # type: ignore[arg-type]
            for r in records]


def id_time(record_id: str) -> dt.datetime:
    """The UTC time in a record id (``ledger.<variant>.<YYYYmmddTHHMMSSffffff>Z-<hex>``).

    Raises:
        ValueError: not a record id.
    """
    m = _TAG.fullmatch(record_id)
    if not m:
        raise ValueError(f"{record_id!r} is not a ledger record id")
    return dt.datetime.strptime(m.group("time"), "%Y%m%dT%H%M%S%fZ").replace(tzinfo=dt.timezone.utc)


def new_id(variant: str, now: dt.datetime | None = None) -> str:
    """A fresh record tag ``ledger.<variant>.<YYYYmmddTHHMMSSffffff>Z-<8 hex>`` (sorts by time)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"ledger.{variant}.{now.strftime('%Y%m%dT%H%M%S%f')}Z-{secrets.token_hex(4)}"


def append(client: RegistryClient, repository: str, record: Record, *,
           max_age: dt.timedelta | None = None) -> None:
    """Store ``record`` as a new artifact tagged ``record.id`` in ``repository``, then point the
    variant's head (``ledger.<variant>.head``) at it: the same manifest bytes under that tag.

    Raises:
        PromotionError: the tag exists already (records are never overwritten); the time in
            ``record.id`` is more than ``max_age`` ago (a promotion passes ``WINDOW / 2``, so a
            windowed read cannot miss its record: invariant 6).
        RegistryError: the registry refused the write (a refused head leaves the record, which the
            next listing finds: invariant 5).
    """
    if max_age is not None and dt.datetime.now(dt.timezone.utc) - id_time(record.id) > max_age:
        raise PromotionError(f"ledger record {record.id} is older than {max_age} (or this "
                             "host's clock moved)", "re-run to create a fresh record; windowed "
                             "reads only look back WINDOW before the checkpoint")
    try:
        client.resolve(repository, record.id)
        raise PromotionError(f"ledger record {record.id} exists already in {repository}",
                             "records are never overwritten; re-run to create a fresh record")
    except NotFoundError:
        pass
    body = record.to_json()
    manifest = _put_artifact(client, repository, record.id, body, RECORD_TYPE,
                             {ANNOTATION: body.decode()})
    _CACHE[(client.host, repository, record.id)] = record  # the reconcile reads it back for free
    client.put_manifest(repository, head_tag(record.variant), manifest, OCI_MANIFEST)


def fetch(client: RegistryClient, repository: str, record_id: str) -> Record | None:
    """The record tagged ``record_id`` (None: a manifest that is no record), once per process.

    Raises:
        NotFoundError: no such tag. RegistryError: the registry failed.
    """
    return _fetch_one(client, repository, record_id)


def point_head(client: RegistryClient, repository: str, record: Record) -> None:
    """Point ``variant``'s head at ``record``, already in the registry (a killed promotion's, which
    the re-run adopts): its manifest bytes under ``ledger.<variant>.head``, as :func:`append`
    writes them.

    Raises:
        NotFoundError: no such record. RegistryError: the registry refused the write.
    """
    manifest = client.get_manifest(repository, record.id)
    client.put_manifest(repository, head_tag(record.variant), manifest.raw,
                        manifest.descriptor.media_type)


def _put_artifact(client: RegistryClient, repository: str, tag: str, body: bytes, media_type: str,
                  annotations: dict[str, str]) -> bytes:
    """Upload ``body`` as the config blob of an artifact manifest tagged ``tag``; its bytes."""
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    client.upload_blob(repository, digest, body, len(body))
    manifest = _artifact_manifest(digest, len(body), media_type, annotations)
    client.put_manifest(repository, tag, manifest, OCI_MANIFEST)
    return manifest


def _artifact_manifest(digest: str, size: int, media_type: str, annotations: dict[str, str], *,
                       layers: list[tuple[str, str, int]] = ()) -> bytes:  # type: ignore[assignment]
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": media_type,
        "config": {"mediaType": media_type, "digest": digest, "size": size},
        "layers": [{"mediaType": t, "digest": d, "size": n} for t, d, n in layers],
        "annotations": annotations,
    }, sort_keys=True).encode()


@dataclass(frozen=True)
class View:
    """What one read of a variant's ledger saw.

    Attributes:
        variant: the variant read. records: its records, oldest first.
        checkpoint: digest of the checkpoint blob used (None: none, or ignored — see ``problem``).
        covered: records taken from the checkpoint. fetched: records outside it (read one GET
            each unless this process had them).
        dropped: checkpoint records whose tag the registry no longer lists (not returned).
        problem: why the checkpoint was ignored (unreadable, another variant's), else None.
        via: ``"tags"`` (read from a tag list: every record) or ``"head"`` (read by name,
            :func:`read_by_name`: what the head chain and the checkpoint reach).
        state: the checkpoint's folded state when the view is *partial* (:func:`read_head`,
            :func:`read_window`): ``records`` are then only those after it, and a fold must start
            from it (``fold(actions_of(view.records), variant, start=view.state)``). None: the
            view holds every record it read.
        newest, recent: the state's newest record id and the ids it covers within
            :data:`WINDOW` of it (which records after the state are new).
        base: the checkpoint a partial view started from (its next checkpoint extends it).
    """

    variant: str
    records: tuple[Record, ...]
    checkpoint: str | None = None
    covered: int = 0
    fetched: int = 0
    dropped: int = 0
    problem: str | None = None
    via: str = "tags"
    state: State | None = None
    newest: str = ""
    recent: frozenset[str] = frozenset()
    base: Checkpoint | None = None

    def fold(self) -> State:
        """The state the tags must have after every record of the view.

        Raises:
            HistoryNeeded: a partial view met a version its state knows only as claimed.
        """
        return fold(actions_of(self.records), self.variant, start=self.state)

    @property
    def last(self) -> str:
        """The newest record id the view knows ("" for none): a new record's ``parent``."""
        return self.records[-1].id if self.records else self.newest

    @property
    def stale(self) -> bool:
        """True when a new checkpoint is due: :data:`CHECKPOINT_EVERY` records lie outside it."""
        return self.fetched >= CHECKPOINT_EVERY or (self.dropped > 0 and bool(self.records))


# Records never change once written, so each is fetched once per process: (registry, repository, id)
# → Record.
_CACHE: dict[tuple[str, str, str], Record] = {}
# Checkpoint blobs are addressed by digest: (registry, digest) → {record id: Record}.
_CHECKPOINTS: dict[tuple[str, str], dict[str, Record]] = {}
# State layers likewise: (registry, digest) → Checkpoint; and sealed segments: (registry, digest)
# → {record id: Record}.
_STATES: dict[tuple[str, str], Checkpoint] = {}
_SEGMENTS: dict[tuple[str, str], dict[str, Record]] = {}


def clear_cache() -> None:
    """Forget every record and checkpoint read by this process (benchmarks: a fresh process)."""
    _CACHE.clear()
    _CHECKPOINTS.clear()
    _STATES.clear()
    _SEGMENTS.clear()


def record_ids(tags: list[str], variant: str | None = None) -> list[str]:
    """The record tags among ``tags`` (of ``variant`` when given), in ledger order."""
    matches = ((t, _TAG.fullmatch(t)) for t in tags)
    return sorted(t for t, m in matches if m and (variant is None or m.group("variant") == variant))


def variants_in(tags: list[str]) -> list[str]:
    """The variants that have ledger records among ``tags``, sorted."""
    return sorted({m.group("variant") for t in tags if (m := _TAG.fullmatch(t))})


def checkpoint_tag(variant: str) -> str:
    """``ledger.<variant>.checkpoint``: the tag of ``variant``'s checkpoint (rewritten)."""
    return f"ledger.{variant}.checkpoint"


def head_tag(variant: str) -> str:
    """``ledger.<variant>.head``: the tag of ``variant``'s newest record (rewritten)."""
    return f"ledger.{variant}.head"


# How far a read by name follows parents before it lists the tags instead: past CHECKPOINT_EVERY
# only when checkpoint writes failed or raced; each step is one GET, a listing is one request.
CHAIN_LIMIT = 4 * CHECKPOINT_EVERY


def read_by_name(client: RegistryClient, repository: str, variant: str) -> View | None:
    """``variant``'s records read without the tag list: checkpoint, head, and the records chained
    from the head back to one the checkpoint covers (invariants 1, 5).

    Returns:
        the :class:`View` (``via="head"``), or None when the tags must be listed instead: no head
        (an empty ledger, or one written by an older paddlecd), a chain that reaches a record of
        an older paddlecd (no ``parent``) or a missing tag before a checkpointed record, or one
        longer than :data:`CHAIN_LIMIT`.

    Raises:
        RegistryError: the registry failed.
    """
    # head and checkpoint at once (one round trip, not two)
    record, (digest, cached, problem) = client.each(lambda c, read: read(c), [
        lambda c: _head(c, repository, variant),
        lambda c: _load_checkpoint(c, repository, variant)])
    if record is None or not _TAG.fullmatch(record.id) or record.variant != variant:
        return None  # no head (list the tags: an empty repository lists in one short request), or
        # not one paddlecd wrote
    walked: list[Record] = []
    try:
        while record is not None and record.id not in cached:
            if len(walked) == CHAIN_LIMIT or record.parent is None:
                return None  # too long, or an older paddlecd's record: the tag list knows more
            walked.append(record)
            record = _fetch_one(client, repository, record.parent) if record.parent else None
    except NotFoundError:
        return None  # a parent whose tag is gone: only the tag list says what is there
    records = {**cached, **{r.id: r for r in walked}}
    return View(variant=variant, records=tuple(records[i] for i in sorted(records)),
                checkpoint=digest, covered=len(cached), fetched=len(walked), problem=problem,
                via="head")


def head(client: RegistryClient, repository: str, variant: str) -> Record | None:
    """The record ``variant``'s head points at; None when there is no head.

    Raises:
        RegistryError: the registry failed.
    """
    return _head(client, repository, variant)


def _head(client: RegistryClient, repository: str, variant: str) -> Record | None:
    """The record ``variant``'s head points at; None when there is no head."""
    try:
        return _fetch_one(client, repository, head_tag(variant))
    except NotFoundError:
        return None


def _fetch_one(client: RegistryClient, repository: str, reference: str) -> Record | None:
    """The record tagged ``reference`` (a record id, or the head tag), this process's copy when it
    has one; None for a manifest that is no record.

    Raises:
        NotFoundError: no such tag. RegistryError: the registry failed.
    """
    key = (client.host, repository, reference)
    if key in _CACHE:
        return _CACHE[key]
    annotations = client.get_manifest(repository, reference).json().get("annotations") or {}
    if ANNOTATION not in annotations:
        return None
    record = Record.from_json(json.loads(annotations[ANNOTATION]))
    # the head moves, so only under the record's own id (the same manifest bytes)
    _CACHE[(client.host, repository, record.id)] = record
    return record


def read(client: RegistryClient, repository: str, variant: str | None = None,
         tags: list[str] | None = None) -> list[Record]:
    """All records in ``repository`` (of ``variant`` when given), oldest first, via checkpoints.

    Args:
        tags: the repository's tags when the caller has just listed them (saves a request).

    Raises:
        RegistryError: the registry failed (a bad checkpoint is not an error: it is ignored).
    """
    tags = client.list_tags(repository) if tags is None else tags
    names = [variant] if variant else variants_in(tags)
    return sorted((r for name in names for r in read_view(client, repository, name, tags).records),
                  key=lambda r: r.id)


def read_view(client: RegistryClient, repository: str, variant: str, tags: list[str], *,
              since: View | None = None) -> View:
    """Read ``variant``'s records listed in ``tags``: the checkpoint's copies, one GET per other.

    Args:
        since: an earlier read by this process; its checkpoint is used again instead of asking for
            the current one (a request saved; any checkpoint gives the same records, invariant 1).

    Raises:
        RegistryError: the registry failed.
    """
    ids = record_ids(tags, variant)
    digest, cached, problem = (None, {}, None)
    if since is not None and since.checkpoint and (client.host, since.checkpoint) in _CHECKPOINTS:
        digest, cached = since.checkpoint, _CHECKPOINTS[(client.host, since.checkpoint)]
    elif checkpoint_tag(variant) in tags:
        digest, cached, problem = _load_checkpoint(client, repository, variant)
    listed = set(ids)
    fetched = [i for i in ids if i not in cached]
    records = {i: r for i, r in cached.items() if i in listed}
    records.update((r.id, r) for r in _fetch(client, repository, fetched))
    return View(variant=variant, records=tuple(records[i] for i in ids if i in records),
                checkpoint=digest, covered=len(listed & cached.keys()), fetched=len(fetched),
                dropped=len(cached.keys() - listed), problem=problem)


def _fetch(client: RegistryClient, repository: str, ids: list[str]) -> list[Record]:
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


# Records a checkpoint's state carries itself before they are sealed into a segment of their own:
# what a promotion reads (~0.1 KiB each, gzip'd) and what the checkpoint-writing one uploads.
SEAL = 32


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint as a promotion reads it: its state layer and the segments it names.

    Attributes:
        key: the state blob's digest (it names this checkpoint: :attr:`View.checkpoint`).
        segments: ``(digest, size)`` of the records blobs (config first, then layers), sealed:
            never rewritten, only named again by the next checkpoint.
        state: the folded state (partial, :class:`paddlecd.release.policy.State`).
        newest, recent: the newest record id, and the ids within :data:`WINDOW` of it.
        count: records covered. pending: the records after the last segment (< :data:`SEAL`
            once written), carried in the state blob itself.
    """

    key: str
    segments: tuple[tuple[str, int], ...]
    state: State
    newest: str
    recent: frozenset[str]
    count: int
    pending: tuple[Record, ...]


def write_checkpoint(client: RegistryClient, repository: str, view: View) -> str:
    """Write a checkpoint of ``view`` (which must come from a read of the registry, never from a
    plan: invariant 4) and point ``ledger.<variant>.checkpoint`` at it.

    The checkpoint is one artifact: sealed *segments* of record copies (gzip'd JSON; the config
    blob is the first, as older paddlecd reads it, the others are layers), and one layer with the
    folded state (:data:`STATE_TYPE`) and the records after the last segment. A partial view
    (:func:`read_head`, :func:`read_window`) extends the checkpoint it started from: the segments
    are named again, unread, and its records join the state's; at :data:`SEAL` of them they are
    sealed into one more segment. So writing a checkpoint moves a few KiB whatever the history.
    A full view writes all its records as one segment.

    Returns:
        the state blob's digest (names the checkpoint).

    The blobs are deterministic (sorted keys, gzip without a timestamp), so equal record sets give
    equal blobs and an upload is skipped when the registry has it.

    Raises:
        RegistryError: the registry refused the write (the previous checkpoint stays in place).
    """
    base = view.base if view.state is not None else None
    if base is not None:
        known = {r.id: r for r in (*base.pending, *view.records)}
        pending = tuple(known[i] for i in sorted(known))
        segments, count, state = list(base.segments), base.count + len(view.records), view.fold()
        everything: dict[str, Record] | None = None
    else:
        pending, segments, count = view.records, [], len(view.records)
        state, everything = fold(actions_of(view.records), view.variant), {
            r.id: r for r in view.records}
    uploads = []
    if not segments or len(pending) >= SEAL:
        body = _records_blob(view.variant, pending)
        segments.append(("sha256:" + hashlib.sha256(body).hexdigest(), len(body)))
        uploads.append((segments[-1][0], body))
        pending = ()
    newest = max([base.newest if base else "", *(r.id for r in view.records)])
    floor = window_floor(view.variant, newest)
    recent = {i for i in (base.recent if base else ()) if i >= floor} | {
        r.id for r in (*pending, *view.records) if r.id >= floor}
    state_body = _state_blob(view.variant, state, newest, sorted(recent), count, pending)
    key = "sha256:" + hashlib.sha256(state_body).hexdigest()
    uploads.append((key, state_body))
    client.each(lambda c, b: c.blob_exists(repository, b[0]) or c.upload_blob(
        repository, b[0], b[1], len(b[1])), uploads)
    notes = {CHECKPOINT_ANNOTATION: json.dumps({"records": count, "newest": newest,
                                                "pending": len(pending)})}
    (first, size), rest = segments[0], segments[1:]
    manifest = _artifact_manifest(first, size, CHECKPOINT_TYPE, notes, layers=[
        (STATE_TYPE, key, len(state_body)), *((CHECKPOINT_TYPE, d, n) for d, n in rest)])
    client.put_manifest(repository, checkpoint_tag(view.variant), manifest, OCI_MANIFEST)
    if everything is not None:
        _CHECKPOINTS[(client.host, key)] = everything
    return key


def _records_blob(variant: str, records: tuple[Record, ...]) -> bytes:
    """A segment: ``{"schema": 1, "variant", "records": [...]}`` gzip'd (the format older
    paddlecd reads as a whole checkpoint)."""
    doc = {"schema": 1, "variant": variant, "records": [json.loads(r.to_json()) for r in records]}
    return gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


def _state_blob(variant: str, state: State, newest: str, recent: list[str], count: int,
                pending: tuple[Record, ...]) -> bytes:
    """The state layer: moving tags, the digests of the versions they name, every claimed version,
    the newest id, the ids within :data:`WINDOW` of it, and the pending records. Without the
    pending records its bytes grow only with the number of versions, never with records."""
    named = set(state.moving.values())
    doc = {
        "schema": 1, "variant": variant, "records": count, "newest": newest,
        "moving": {t: str(v) for t, v in sorted(state.moving.items())},
        "releases": {str(v): d for v, d in sorted(state.releases.items()) if v in named},
        "claimed": sorted(str(v) for v in state.claimed | set(state.releases)),
        "recent": recent,
        "pending": [json.loads(r.to_json()) for r in pending],
    }
    return gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


def window_floor(variant: str, newest: str) -> str:
    """The tag a windowed read lists after: ``ledger.<variant>.<newest's time - WINDOW>`` (sorts
    before every record id of that time or later); "" when there is no newest record."""
    if not newest:
        return ""
    return f"ledger.{variant}.{(id_time(newest) - WINDOW).strftime('%Y%m%dT%H%M%S%f')}Z"


def _checkpoint_manifest(client: RegistryClient, repository: str,
                         variant: str) -> dict[str, Any] | None:
    """The checkpoint's manifest, None when there is none or it is not a paddlecd checkpoint."""
    try:
        manifest = client.get_manifest(repository, checkpoint_tag(variant)).json()
    except NotFoundError:
        return None
    return manifest if manifest.get("artifactType") == CHECKPOINT_TYPE else None


def _segments(manifest: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    config = manifest.get("config") or {}
    named = [config, *(x for x in manifest.get("layers") or []
                       if x.get("mediaType") == CHECKPOINT_TYPE)]
    return tuple((str(x.get("digest", "")), int(x.get("size", 0))) for x in named)


def _load_state(client: RegistryClient, repository: str, variant: str,
                manifest: dict[str, Any] | None = None) -> Checkpoint | None:
    """The :class:`Checkpoint` from the checkpoint's state layer; None when there is none (no
    checkpoint, one of an older paddlecd) or it is unreadable: the caller reads the records
    instead."""
    manifest = manifest or _checkpoint_manifest(client, repository, variant)
    layers = [x for x in (manifest or {}).get("layers") or [] if x.get("mediaType") == STATE_TYPE]
    if manifest is None or len(layers) != 1:
        return None
    key = (client.host, str(layers[0].get("digest", "")))
    if key not in _STATES:
        try:
            body = _get_blob(client, repository, key[1])
            if "sha256:" + hashlib.sha256(body).hexdigest() != key[1]:
                return None
            doc = json.loads(gzip.decompress(body))
            pending = tuple(Record.from_json(r) for r in doc["pending"])
            if doc.get("variant") != variant or any(r.variant != variant for r in pending):
                return None
            parse = semver.Version.parse
            state = State(releases={parse(v): d for v, d in doc["releases"].items()},
                          moving={t: parse(v) for t, v in doc["moving"].items()},
                          claimed=frozenset(parse(v) for v in doc["claimed"]))
            _STATES[key] = Checkpoint(key=key[1], segments=_segments(manifest), state=state,
                                      newest=str(doc["newest"]), recent=frozenset(doc["recent"]),
                                      count=int(doc["records"]), pending=pending)
        except (ValueError, KeyError, TypeError, OSError, EOFError, AttributeError):
            return None
        except NotFoundError:
            return None  # a state blob the registry lost: a broken cache, read the records
    return _STATES[key]


def read_head(client: RegistryClient, repository: str, variant: str) -> View | None:
    """``variant``'s ledger read for a promotion: the checkpoint's folded state, the head, and the
    records chained from the head back to one the state covers — a partial :class:`View` whose
    bytes do not grow with the history.

    A chain record counts as covered when the state lists it among its recent ids, or when it is
    older than :data:`WINDOW` before the state's newest record.

    Returns:
        the view (``via="head"``, ``state`` set), or None when the caller must read more (:func:
        `read_by_name`, or the tag list): no head or no state layer (an empty ledger, or one an
        older paddlecd checkpointed), a chain record older than the state's newest that it does
        not cover (the fold order needs the history), a chain reaching an older paddlecd's record
        or a missing tag, or one longer than :data:`CHAIN_LIMIT`.

    Raises:
        RegistryError: the registry failed.
    """
    return read_head_or_absent(client, repository, variant)[0]


def read_head_or_absent(client: RegistryClient, repository: str,
                        variant: str) -> tuple[View | None, bool]:
    """:func:`read_head`, and whether the variant has a head at all: without one,
    :func:`read_by_name` has nothing to read either (it needs the head), so a promotion lists
    the tags at once instead of asking for the head and the checkpoint a second time (two
    round trips, ~1.3 KiB, the first promotion into a release repository).

    Raises:
        RegistryError: the registry failed.
    """
    record, base = client.each(lambda c, read: read(c), [
        lambda c: _head(c, repository, variant), lambda c: _load_state(c, repository, variant)])
    if record is None:
        return None, False
    return _from_head(client, repository, variant, record, base), True


def _from_head(client: RegistryClient, repository: str, variant: str, record: Record,
               base: Checkpoint | None) -> View | None:
    if base is None or not _TAG.fullmatch(record.id) or record.variant != variant:
        return None
    newest, recent, count = base.newest, base.recent, base.count
    floor = window_floor(variant, newest)
    walked: list[Record] = []
    try:
        while record is not None and record.id not in recent and record.id >= floor:
            if record.id <= newest or len(walked) == CHAIN_LIMIT or record.parent is None:
                return None
            walked.append(record)
            record = _fetch_one(client, repository, record.parent) if record.parent else None
    except NotFoundError:
        return None
    if record is None and count:
        return None  # the chain never met the checkpoint's records
    return View(variant=variant, records=tuple(sorted(walked, key=lambda r: r.id)),
                checkpoint=base.key, covered=count, fetched=len(walked), via="head",
                state=base.state, newest=newest, recent=recent, base=base)


def read_window(client: RegistryClient, repository: str, since: View) -> View | None:
    """Re-read a partial view from the tag list, looking back only :data:`WINDOW` before its
    state's newest record: the records there that the state does not cover (one GET each, once
    per process). On a registry that pages tag lists this is one short page, whatever the
    history; distribution 2.8 answers with every tag, which is used the same way.

    Returns:
        the partial view (``via="window"``), or None when a record older than the state's newest
        is not covered by it (a late record: the caller reads the whole ledger).

    Raises:
        RegistryError: the registry failed.
    """
    variant, floor = since.variant, window_floor(since.variant, since.newest)
    tags, _ = client.list_tags_after(repository, floor, stop=f"ledger.{variant}.:")
    new = [i for i in record_ids(tags, variant) if i > floor and i not in since.recent]
    if any(i <= since.newest for i in new):
        return None
    records = _fetch(client, repository, new)
    return dataclasses.replace(since, records=tuple(records), fetched=len(records), via="window")


def _load_checkpoint(client: RegistryClient, repository: str,
                     variant: str) -> tuple[str | None, dict[str, Record], str | None]:
    """(checkpoint key, {id: record}, None) from every segment and the state's pending records,
    or (None, {}, why) when the checkpoint is unusable (or (None, {}, None): there is none).
    The key is the state blob's digest, or the records blob's for an older paddlecd's."""
    try:
        manifest = client.get_manifest(repository, checkpoint_tag(variant)).json()
    except NotFoundError:
        return None, {}, None  # listed a moment ago, gone now: read every record
    segments = _segments(manifest)
    if manifest.get("artifactType") != CHECKPOINT_TYPE or not all(
            d.startswith("sha256:") for d, _ in segments):
        return None, {}, f"{checkpoint_tag(variant)} is not a paddlecd checkpoint"
    states = [x for x in manifest.get("layers") or [] if x.get("mediaType") == STATE_TYPE]
    key = (client.host, str(states[0].get("digest")) if states else segments[0][0])
    if key not in _CHECKPOINTS:
        notes = json.loads((manifest.get("annotations") or {}).get(CHECKPOINT_ANNOTATION, "{}"))
        base = _load_state(client, repository, variant, manifest) if states and notes.get(
            "pending", 1) else None
        if states and notes.get("pending", 1) and base is None:
            return None, {}, f"checkpoint {key[1]} unreadable (its state layer)"
        try:
            parts = client.each(lambda c, d: _segment(c, repository, d, variant),
                                [d for d, _ in segments])
        except (ValueError, KeyError, TypeError, OSError, EOFError) as e:
            return None, {}, f"checkpoint {key[1]} unreadable ({type(e).__name__}: {e})"
        except NotFoundError as e:  # a segment the registry lost (deleted, collected, not
            # mirrored): the cache is broken, not the ledger (invariant 1)
            return None, {}, f"checkpoint {key[1]} unreadable ({e.cause})"
        records = {i: r for part in parts for i, r in part.items()}
        records.update((r.id, r) for r in (base.pending if base else ()))
        _CHECKPOINTS[key] = records
    return key[1], _CHECKPOINTS[key], None


def _segment(client: RegistryClient, repository: str, digest: str,
             variant: str) -> dict[str, Record]:
    """One sealed segment's records (fetched once per process: segments never change)."""
    key = (client.host, digest)
    if key not in _SEGMENTS:
        _SEGMENTS[key] = _parse_checkpoint(_get_blob(client, repository, digest), digest, variant)
    return _SEGMENTS[key]


def _parse_checkpoint(body: bytes, digest: str, variant: str) -> dict[str, Record]:
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise ValueError("content does not match its digest")
    doc = json.loads(gzip.decompress(body))
    if doc.get("variant") != variant:
        raise ValueError(f"it is the checkpoint of {doc.get('variant')!r}")
    records = [Record.from_json(r) for r in doc["records"]]
    if any(not (m := _TAG.fullmatch(r.id)) or m.group("variant") != variant for r in records):
        raise ValueError("it holds a record of another variant")
    return {r.id: r for r in records}


def _get_blob(client: RegistryClient, repository: str, digest: str) -> bytes:
    resp = client.request("GET", f"{repository}/blobs/{digest}", [scope(repository)],
                          f"reading ledger checkpoint {client.name(repository, digest)}")
    return resp.content
