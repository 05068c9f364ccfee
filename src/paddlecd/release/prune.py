"""Retention: delete a variant's old candidates and what is attached to them, never a release.

A candidate is a manifest of the candidate repository tagged ``<variant>-<revision>`` (as build
tags it). It stays when the release repository names its digest — a release or moving tag, a
ledger record (promotions and rollbacks alike, and the digests a record's ``previous`` names),
or an attestation subject (``sha256-<hex>…`` tags, which a promotion writes while it copies) —,
when a tag of the candidate repository that is no candidate's names it (a delete by digest
drops every tag of the digest),
when it is among the ``keep_last`` newest (by the ``created`` time of its image config) or
younger than ``keep_days`` days. The rest goes by manifest DELETE by digest
(distribution-spec "Deleting Manifests"): first its referrers (attestations, provenance, the
``sha256-<hex>`` index and ``.att`` tags), then the image, so a killed run leaves the image
tagged and the re-run finishes it. Just before each delete the release repository is read again
and a digest it now names is skipped; one it names just after is put back (its exact bytes,
under its tags). The rules in full: docs/guides/releases.md, "Retention".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import ConfigError, NotFoundError
from paddlecd.image import candidate, variants
from paddlecd.registry import referrers
from paddlecd.registry.client import Manifest, RegistryClient, client_for
from paddlecd.release import ledger
from paddlecd.release.plan import target
from paddlecd.types import Echo

# An immutable release tag (X.Y.Z-V, X.Y.Z-rc.N-V) never moves (release/policy.py), so it is
# resolved once per run; moving tags (X.Y-V, X-V, latest-V) are resolved at every re-read.
_IMMUTABLE = re.compile(r"\d+\.\d+\.\d+(-.+)?")
_SUBJECT = re.compile(r"sha256-([0-9a-f]{64})")
# Called at fixed points of a delete: ("recheck" | "delete", digest). Tests inject a racing
# promotion or a kill there; a run passes nothing.
Hook = Callable[[str, str], None]


@dataclass(frozen=True)
class Found:
    """A candidate as listed: ``digest``, its candidate ``tags``, ``created`` (UTC; None when its
    config has none)."""

    digest: str
    tags: tuple[str, ...]
    created: dt.datetime | None


@dataclass(frozen=True)
class Candidate:
    """A candidate and the verdict on it.

    Attributes:
        digest, tags, created: as :class:`Found` (``created`` ISO-8601 or None).
        delete: True when it goes. reason: why it stays or goes, for a person.
        attached: digests of the manifests attached to it (referrers, index, ``.att``; with a
            multi-platform index, its child images), deleted before it.
    """

    digest: str
    tags: tuple[str, ...]
    created: str | None
    delete: bool
    reason: str
    attached: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON object."""
        return {"digest": self.digest, "tags": list(self.tags), "created": self.created,
                "delete": self.delete, "reason": self.reason, "attached": list(self.attached)}


@dataclass(frozen=True)
class Plan:
    """What a prune of ``variant`` in ``repository`` (``host/repo``) deletes and keeps.

    Attributes:
        candidates: newest first. keep_days, keep_last: the retention used.
        bytes_freed: bytes of the blobs only deleted manifests use (garbage collection frees
            those no other repository links).
    """

    variant: str
    repository: str
    keep_days: int
    keep_last: int
    candidates: tuple[Candidate, ...]
    bytes_freed: int

    @property
    def doomed(self) -> list[Candidate]:
        """The candidates that go, oldest first (the order of the deletes)."""
        return [c for c in reversed(self.candidates) if c.delete]

    def lines(self, size: Callable[[int], str] = lambda n: f"{n} bytes") -> list[str]:
        """The plan for a person: one line per candidate, then the totals (``size`` writes a
        byte count)."""
        out = [f"prune {self.repository}, variant {self.variant}: keep the newest "
               f"{self.keep_last} and those younger than {self.keep_days} days; never a release"]
        for c in self.candidates:
            when = (c.created or "no created time")[:10]
            extra = f" (+{len(c.attached)} attached)" if c.delete and c.attached else ""
            out.append(f"  {'delete' if c.delete else 'keep  '}  {c.digest[:19]}  "
                       f"{','.join(c.tags)[:16]:<16}  {when}  {c.reason}{extra}")
        gone = self.doomed
        out.append(f"{len(gone)} to delete ({sum(len(c.attached) for c in gone)} attached), "
                   f"{len(self.candidates) - len(gone)} kept; {size(self.bytes_freed)} freed by "
                   "registry garbage-collect")
        return out

    def to_json(self) -> dict[str, Any]:
        """The plan as a JSON object (``invoke release.prune --json``)."""
        return {"variant": self.variant, "repository": self.repository,
                "keep_days": self.keep_days, "keep_last": self.keep_last,
                "bytes_freed": self.bytes_freed,
                "candidates": [c.to_json() for c in self.candidates]}


@dataclass
class Outcome:
    """What a prune did: its ``plan``; ``deleted`` candidate digests; ``skipped`` {digest: why}
    (named by the release repository since the plan); ``restored``: deleted, then found named,
    and put back."""

    plan: Plan
    deleted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The plan and what happened, as a JSON object."""
        return {**self.plan.to_json(), "deleted": self.deleted, "skipped": self.skipped,
                "restored": self.restored}


def select(found: list[Found], protected: dict[str, str], *, keep_days: int, keep_last: int,
           now: dt.datetime, tagged: dict[str, str] | None = None,
           current: str | None = None) -> list[Candidate]:
    """The verdict on each candidate, newest first (no creation time: last).

    Args:
        found: the candidates. protected: {digest: why} the release repository names.
        keep_days: keep those created less than this many days before ``now`` (UTC).
        keep_last: keep this many newest, released ones counted.
        tagged: {digest: tag} of tags in the candidate repository that are no candidate's nor
            an attachment's (``qa-approved``, by hand): a delete by digest would drop the tag
            too (a trial), so its candidate is kept.
        current: the variant's current candidate (``candidates/<variant>.json``), always kept:
            BuildKit keeps a cached build's ``created``, so the one just pushed can tie with or
            predate older ones (a trial: ``keep_last: 1`` deleted it, and verify then failed).

    Returns:
        one :class:`Candidate` per entry of ``found`` (``attached`` empty).
    """
    epoch = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    ordered = sorted(found, key=lambda f: (f.created or epoch, f.digest), reverse=True)
    out = []
    for rank, f in enumerate(ordered):
        if f.digest in protected:
            keep, why = True, f"released: {protected[f.digest]}"
        elif f.digest == current:
            keep, why = True, "the variant's current candidate (what verify and promote take)"
        elif f.digest in (tagged or {}):
            keep, why = True, f"also tagged {(tagged or {})[f.digest]} (no candidate tag)"
        elif rank < keep_last:
            keep, why = True, f"newest {keep_last}"
        elif f.created is None:
            keep, why = True, "no created time in its config"
        elif now - f.created < dt.timedelta(days=keep_days):
            keep, why = True, f"younger than {keep_days} days"
        else:
            keep, why = False, f"older than {keep_days} days, not among the newest {keep_last}"
        created = f.created.isoformat().replace("+00:00", "Z") if f.created else None
        out.append(Candidate(f.digest, f.tags, created, not keep, why))
    return out


class Guard:
    """The digests the release repository names, read again before each delete.

    Args:
        client: of the release registry. repository: the release repository.
    """

    def __init__(self, client: RegistryClient, repository: str):
        self.client, self.repository = client, repository
        self._fixed: dict[str, str | None] = {}  # immutable tag → digest, resolved once

    def read(self) -> dict[str, str]:
        """{digest: what names it} for every digest the release repository names now: its
        tags (the release tag first), ``rollback target``, the releases of ledger records
        (their ``previous`` digests too), ``attestation subject``.

        Costs: one tag list, the ledger's checkpoints and records not read before by this
        process, a HEAD per moving tag and per immutable tag not seen before.

        Raises:
            RegistryError: the registry failed.
        """
        tags = self.client.list_tags(self.repository)
        plain = [t for t in tags if not t.startswith(("ledger.", "sha256-"))]
        todo = [t for t in plain if t not in self._fixed or not _IMMUTABLE.fullmatch(t)]
        for tag, digest in zip(todo, self.client.each(self._resolve, todo)):
            self._fixed[tag] = digest
        names: dict[str, list[str]] = {}  # digest → what names it, the release tag first
        for tag in sorted(plain, key=lambda t: (not _IMMUTABLE.fullmatch(t), t)):
            if self._fixed.get(tag):
                names.setdefault(str(self._fixed[tag]), []).append(tag)
        for r in ledger.read(self.client, self.repository, tags=tags):
            names.setdefault(r.digest, []).append(f"{r.version}-{r.variant}")
            if r.action == "rollback":
                names[r.digest].insert(1, "rollback target")
            for before in r.previous.values():  # what the record's moving tags pointed to
                if before and "@" in before:
                    version, _, digest = before.partition("@")
                    names.setdefault(digest, []).append(f"{version}-{r.variant}")
        for tag in tags:
            if m := _SUBJECT.match(tag):
                names.setdefault(f"sha256:{m.group(1)}", ["attestation subject"])
        return {d: ", ".join(dict.fromkeys(n)) for d, n in names.items()}

    def _resolve(self, client: RegistryClient, tag: str) -> str | None:
        try:
            return client.resolve(self.repository, tag).digest
        except NotFoundError:
            return None  # deleted since the listing


def retention(settings: Settings, variant: str, *, keep_days: int | None = None,
              keep_last: int | None = None) -> tuple[int, int]:
    """(keep_days, keep_last) of ``variant``: the flags, else its ``retention:`` in
    images/variants.yaml, else the ``retention.*`` settings.

    Raises:
        ConfigError: unknown variant, or a flag below 1.
    """
    v = variants.get(settings, variant)
    for name, given in (("--keep-days", keep_days), ("--keep-last", keep_last)):
        if given is not None and int(given) < 1:
            raise ConfigError(f"{name} must be 1 or more, got {given}",
                              "releases are always kept; these keep candidates besides them")
    days = keep_days or v.keep_days or settings.retention.keep_days
    last = keep_last or v.keep_last or settings.retention.keep_last
    return int(days), int(last)


def plan(settings: Settings, variant: str, *, keep_days: int | None = None,
         keep_last: int | None = None, now: dt.datetime | None = None) -> Plan:
    """What a prune of ``variant`` would delete and keep (nothing is changed).

    Raises:
        ConfigError: unknown variant, bad retention. RegistryError: a registry failed.
    """
    days, last = retention(settings, variant, keep_days=keep_days, keep_last=keep_last)
    client, repo = client_for(settings), settings.registry.repository
    dst, ref = target(settings)
    protected = Guard(dst, ref.repository).read()
    tags = client.list_tags(repo)
    names = list(variants.load(settings))
    found = _candidates(client, repo, tags, variant, names)
    chosen = select(found, protected, keep_days=days, keep_last=last,
                    now=now or dt.datetime.now(dt.timezone.utc),
                    tagged=_tagged_by_hand(client, repo, tags, names),
                    current=getattr(candidate.load_candidate(settings, variant), "digest", None))
    attached = dict(zip((c.digest for c in chosen),
                        client.each(lambda c, d: _attached(c, repo, d, tags),
                                    [c.digest for c in chosen])))
    kept = [d for c in chosen if not c.delete for d in (c.digest, *attached[c.digest])]
    chosen = [Candidate(c.digest, c.tags, c.created, c.delete, c.reason,
                        tuple(d for d in attached[c.digest] if d not in kept) if c.delete else ())
              for c in chosen]
    gone = [d for c in chosen if c.delete for d in (c.digest, *c.attached)]
    return Plan(variant, settings.candidate_repo, days, last, tuple(chosen),
                _freed(client, repo, gone, kept))


def prune(settings: Settings, the_plan: Plan, *, report: Echo = lambda line: None,
          hook: Hook = lambda point, digest: None) -> Outcome:
    """Delete what ``the_plan`` marks, re-reading the release repository before each candidate.

    A candidate the release repository names since the plan is skipped; one it names right
    after its delete is put back. Re-running after a kill converges: what is left is planned
    again. Manifests already gone count as deleted.

    Raises:
        RegistryError: the registry refused a delete (deletes disabled: the hint names
            ``storage.delete.enabled``) or failed.
    """
    client, repo = client_for(settings), settings.registry.repository
    dst, ref = target(settings)
    guard, outcome = Guard(dst, ref.repository), Outcome(the_plan)
    for c in the_plan.doomed:
        hook("recheck", c.digest)
        named = guard.read().get(c.digest)
        if named:
            outcome.skipped[c.digest] = named
            report(f"kept {c.digest[:19]}: named since the plan ({named})")
            continue
        hook("delete", c.digest)
        saved = _save(client, repo, c)
        for digest in (*c.attached, c.digest):
            _delete(client, repo, digest)
        named = guard.read().get(c.digest)
        if named:  # a promotion that read it before the delete: give it back
            _restore(client, repo, saved)
            outcome.restored.append(c.digest)
            report(f"restored {c.digest[:19]}: named during its delete ({named})")
            continue
        outcome.deleted.append(c.digest)
        report(f"deleted {c.digest[:19]} {','.join(c.tags)} (+{len(c.attached)} attached)")
    return outcome


def _tagged_by_hand(client: RegistryClient, repo: str, tags: list[str],
                    names: list[str]) -> dict[str, str]:
    """{digest: tag} of the tags that no variant's candidate rule owns and that name no
    attachment (``sha256-<hex>…``): one HEAD each, and none in a repository only paddlecd tags."""
    other = [t for t in tags if not _SUBJECT.match(t)
             and not any(t.startswith(n + "-") for n in names)]
    found: dict[str, str] = {}
    for tag, digest in zip(other, client.each(lambda c, t: _digest(c, repo, t), other)):
        if digest:
            found[digest] = ", ".join(x for x in (found.get(digest), tag) if x)
    return found


def _candidates(client: RegistryClient, repo: str, tags: list[str], variant: str,
                names: list[str]) -> list[Found]:
    """The candidates of ``variant`` among ``tags``: ``<variant>-…`` tags whose longest matching
    variant name is ``variant`` (``cu120-p261-…`` is not ``cu120``'s), grouped by digest."""
    def owner(tag: str) -> str | None:
        return max((n for n in names if tag.startswith(n + "-")), key=len, default=None)

    mine = [t for t in tags if owner(t) == variant]
    by_digest: dict[str, list[str]] = {}
    for tag, digest in zip(mine, client.each(lambda c, t: _digest(c, repo, t), mine)):
        if digest:
            by_digest.setdefault(digest, []).append(tag)
    digests = sorted(by_digest)
    created = client.each(lambda c, d: _created(_config(c, repo, d)), digests)
    return [Found(d, tuple(sorted(by_digest[d])), t) for d, t in zip(digests, created)]


def _digest(client: RegistryClient, repo: str, tag: str) -> str | None:
    try:
        return client.resolve(repo, tag).digest
    except NotFoundError:
        return None


def _config(client: RegistryClient, repo: str, digest: str) -> dict[str, Any]:
    """The image config of ``digest``; ``{}`` for a manifest without one (no image)."""
    try:
        return client.image_config(repo, digest)
    except (NotFoundError, ConfigError):
        return {}


def _created(config: dict[str, Any]) -> dt.datetime | None:
    """The image config's ``created`` (RFC 3339, image-spec ``config.md``) in UTC; None if
    absent or unreadable."""
    text = str(config.get("created") or "")
    try:  # Go writes up to 9 fraction digits; Python 3.11 reads 6
        when = dt.datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1",
                                                text.replace("Z", "+00:00")))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _attached(client: RegistryClient, repo: str, digest: str, tags: list[str]) -> tuple[str, ...]:
    """Digests of the manifests attached to ``digest``: what its ``sha256-<hex>…`` tags hold, the
    referrers listed for it (index or referrers API) and, for an index, its child images."""
    prefix = referrers.tag_for(digest)
    found = [d for t in tags if t.startswith(prefix) if (d := _digest(client, repo, t))]
    found += [r.digest for r in referrers.referrers(client, repo, digest)]
    manifest = client.get_manifest(repo, digest)
    if manifest.is_index:
        found += [child.digest for child in manifest.children()]
    return tuple(dict.fromkeys(d for d in found if d != digest))


def _blobs(client: RegistryClient, repo: str, digest: str) -> dict[str, int]:
    """{blob digest: size} of manifest ``digest`` (an index: none of its own)."""
    try:
        manifest = client.get_manifest(repo, digest)
    except NotFoundError:
        return {}
    return {} if manifest.is_index else {b.digest: b.size for b in manifest.children()}


def _freed(client: RegistryClient, repo: str, gone: list[str], kept: list[str]) -> int:
    """Bytes of the blobs the ``gone`` manifests use and no ``kept`` one does."""
    sizes = client.each(lambda c, d: _blobs(c, repo, d), [*gone, *kept])
    doomed: dict[str, int] = {}
    for blobs in sizes[: len(gone)]:
        doomed.update(blobs)
    used = {b for blobs in sizes[len(gone):] for b in blobs}
    return sum(size for b, size in doomed.items() if b not in used)


def _save(client: RegistryClient, repo: str, c: Candidate) -> list[tuple[Manifest, list[str]]]:
    """The manifests about to be deleted, each with the tags that name it, to put back."""
    prefix = referrers.tag_for(c.digest)
    named = [t for t in client.list_tags(repo) if t in c.tags or t.startswith(prefix)]
    where = dict(zip(named, client.each(lambda cl, t: _digest(cl, repo, t), named)))
    saved = []
    for digest in (c.digest, *c.attached):
        try:
            manifest = client.get_manifest(repo, digest)
        except NotFoundError:
            continue
        saved.append((manifest, [t for t, d in where.items() if d == digest]))
    return saved


def _delete(client: RegistryClient, repo: str, digest: str) -> None:
    try:
        client.delete_manifest(repo, digest)
    except NotFoundError:
        pass  # gone already: a killed run's, or a shared child


def _restore(client: RegistryClient, repo: str, saved: list[tuple[Manifest, list[str]]]) -> None:
    """Put ``saved`` back, indexes last: distribution refuses an index whose manifests are
    missing (MANIFEST_BLOB_UNKNOWN). The blobs are still linked (a manifest DELETE leaves them
    until garbage collection)."""
    for manifest, tags in sorted(saved, key=lambda m: m[0].is_index):
        media_type = manifest.descriptor.media_type
        for reference in tags or [manifest.descriptor.digest]:
            client.put_manifest(repo, reference, manifest.raw, media_type)
