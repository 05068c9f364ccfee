"""Plans for promotions and rollbacks: what tags change where, and whether evidence allows it.

Evidence is the signed attestation of the digest in the candidate repository
(:func:`paddlecd.verify.registry_store.check`), never a local file: a promotion from any machine
sees the same evidence, and only what a trusted key signed counts.

A plan is computed from the registry (current tags) and the ledger (the order of past actions): the
ledger's :func:`~paddlecd.release.policy.fold`, with this action appended, says where every tag of
the version must point; a :class:`TagWrite` is planned for each tag that does not point there yet. A
re-run after a crash therefore plans exactly the writes that are still missing (convergence), and a
complete re-run plans nothing (idempotent no-op). Nothing here writes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import semver

from paddlecd import files
from paddlecd.config import Settings
from paddlecd.engine import refuse_image_id
from paddlecd.errors import ConfigError, NotFoundError, PaddlecdError, PromotionError
from paddlecd.image import candidate, variants
from paddlecd.registry.client import Manifest, RegistryClient, client_for
from paddlecd.registry.reference import Reference, check_digest, check_tag, parse_reference
from paddlecd.release import gates, ledger
from paddlecd.release.ledger import Record, actions_of
from paddlecd.release.policy import (
    Action,
    HistoryNeeded,
    State,
    bump,
    check_not_a_release_name,
    fold,
    moving_tags,
    parse_release_tag,
    parse_version,
    release_tag,
)
from paddlecd.verify import registry_store
from paddlecd.verify.attestation import VerifiedAttestation


@dataclass(frozen=True)
class TagWrite:
    """One planned tag write: ``tag`` → ``digest`` (release ``version``); ``previous`` digest or
    None."""

    tag: str
    digest: str
    version: str
    previous: str | None
    previous_version: str | None
    moving: bool
    completes: bool = False  # a tag of another release its own promotion never wrote (killed)


@dataclass
class Plan:
    """A promotion or rollback, fully decided. ``record`` is None when the ledger already has it.

    ``evidence_problem`` is why evidence refuses (None: evidence is fine or not needed), ``refusal``
    the typed error saying so; ``attestation`` the verified attestation to copy with the image.
    """

    action: str
    variant: str
    version: str
    digest: str
    source: str
    target: str
    repository: str
    writes: list[TagWrite]
    kept: list[str]
    record: Record | None
    evidence_problem: str | None = None
    refusal: PaddlecdError | None = None
    attestation: VerifiedAttestation | None = None
    src: RegistryClient | None = field(default=None, repr=False)
    dst: RegistryClient | None = field(default=None, repr=False)
    manifests: dict[str, Manifest] = field(
        default_factory=dict, repr=False
    )  # by digest, for tag writes
    ledger_view: ledger.View | None = field(default=None, repr=False)  # the read it was made from
    comparison: gates.Comparison | None = None  # the upgrade gate (release/gates.py)
    # other versions the ledger read knows as releases of this digest (a trial: a rebuilt
    # candidate, byte-identical to release 0.1.0, planned as "release 1.0.0; new" and no more)
    also: tuple[str, ...] = ()

    @property
    def noop(self) -> bool:
        """True when every tag already points where it must and the ledger has the record."""
        return not self.writes and self.record is None

    def describe(self) -> list[str]:
        """The plan as lines for the user: every tag, where, from which digest, what it pointed
        to."""
        head = f"{self.action} {self.version}-{self.variant}: {self.source} → {self.target}"
        if self.noop:
            return [
                head,
                "  nothing to do: already released (every tag is in place and the ledger has "
                "the record); the evidence is not re-checked",
            ]
        lines = [head]
        for w in self.writes:
            was = f"was {w.previous_version or '?'} ({w.previous})" if w.previous else "new"
            kind = "moving" if w.moving else "immutable"
            why = "; completes a promotion killed after its ledger record" if w.completes else ""
            lines.append(
                f"  write {kind:9} {self.target}:{w.tag} → {w.digest} (release {w.version}; "
                f"{was}{why})"
            )
        lines += [f"  keep            {k}" for k in self.kept]
        if self.also:
            lines.append(f"  note            {self.digest} is already release "
                         + ", ".join(f"{v}-{self.variant}" for v in self.also))
        if self.attestation:  # what the promotion rests on, and who signed it
            a = self.attestation
            lines.append(
                f"  evidence        {a.location} (verified {a.created}, key {a.keyid})"
            )
        elif self.refusal:
            lines.append(f"  evidence        REFUSED: {self.refusal.cause}")
        lines += self.comparison.describe(shown_by=f"invoke release.show {self.version}-"
                                          f"{self.variant}, once promoted"
                                          ) if self.comparison else []
        lines.append(f"  ledger record   new {self.action} record in {self.target}" if self.record
                     else "  ledger          already recorded")
        return lines


def target(settings: Settings) -> tuple[RegistryClient, Reference]:
    """Client and reference (no tag) of the release repository."""
    host = settings.release.registry or settings.registry.url
    return client_for(settings, host), Reference(host, settings.release.repository)


def current(client: RegistryClient, repository: str, tag: str) -> str | None:
    """The digest ``tag`` points to now, or None when it does not exist."""
    try:
        return client.resolve(repository, tag).digest
    except NotFoundError:
        return None


def _read_new(client: RegistryClient, repository: str, variant: str,
              version: str) -> tuple[ledger.View | None, State | None, bool]:
    """The partial read (:func:`paddlecd.release.ledger.read_head`) and its fold, for a version
    the ledger has never claimed; (None, None, …) when the history must be read instead: no state
    to start from, an old version (its claim and record are in the history), or a record after
    the state that names one (a rollback). The last item: whether the variant has a head."""
    view, has_head = ledger.read_head_or_absent(client, repository, variant)
    if view is None or view.state is None or parse_version(version) in view.state.claimed:
        return None, None, has_head
    try:
        return view, view.fold(), has_head
    except HistoryNeeded:
        return None, None, has_head


def desired(state: State, version: semver.Version, variant: str) -> dict[str, str]:
    """``{tag: digest}`` the immutable and moving tags of ``version`` must have in ``state``."""
    want = {release_tag(version, variant): state.releases.get(version)}
    want.update({t: state.digest_of(t) for t in moving_tags(version, variant)})
    return {t: d for t, d in want.items() if d}


def currents(client: RegistryClient, repository: str, tags: list[str]) -> dict[str, str | None]:
    """``{tag: digest or None}`` for ``tags``, asked a few at once (HEADs,
    :meth:`~paddlecd.registry.client.RegistryClient.each`)."""
    return dict(zip(tags, client.each(lambda c, t: current(c, repository, t), tags)))


def _writes(have: dict[str, str | None], old: State, new: State, version: semver.Version,
            variant: str) -> tuple[list[TagWrite], list[str]]:
    """The tag writes from ``old`` to ``new`` given what the tags point to now (``have``)."""
    writes, kept = [], []
    immutable = release_tag(version, variant)
    for tag, digest in desired(new, version, variant).items():
        points_to = new.moving.get(tag, version)
        if tag != immutable and points_to != version:
            kept.append(
                f"{tag} stays on {points_to} (higher than {version}: moving tags only move forward)"
            )
        have_now = have.get(tag)
        if have_now != digest:
            before = _release_of(old, tag, have_now) if tag != immutable else None
            writes.append(
                TagWrite(
                    tag=tag,
                    digest=digest,
                    version=str(points_to),
                    previous=have_now,
                    previous_version=str(before) if before else None,
                    moving=tag != immutable,
                )
            )
    return writes, kept


def _release_of(state: State, tag: str, digest: str | None) -> semver.Version | None:
    """The release whose digest ``tag`` serves now: the one the ledger says the tag is on when
    its digest matches, else the highest release of that digest, else None (unknown).

    A re-run after a kill between the ledger record and the tag writes reads a ledger that has
    the tag on the new version already, while the registry still serves the old digest (trial 4:
    "latest-cpu → 1.0.0; was 1.0.0 (sha256:<1.1.0's>)"): the registry's answer is the truth."""
    if digest is None:
        return None
    named = state.moving.get(tag)
    if named is not None and state.releases.get(named) == digest:
        return named
    matches = sorted(v for v, d in state.releases.items() if d == digest)
    return matches[-1] if matches else None


def check_tags(variant: str, version: semver.Version) -> None:
    """Refuse a release whose tags the registry cannot hold, before anything is asked or written.

    Rule: the distribution spec's tag grammar ``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`` (at most 128
    characters; opencontainers/distribution-spec, "Pulling manifests"). A long pre-release
    (``1.5.0-<100 characters>``) would otherwise be recorded in the ledger and then refused by the
    registry: a release the ledger promises and the registry does not hold.

    Raises:
        ConfigError: a release tag, moving tag or the ledger record tag breaks the grammar
            (:func:`paddlecd.registry.reference.check_tag`).
    """
    for tag in (
        release_tag(version, variant),
        *moving_tags(version, variant),
        ledger.new_id(variant),
    ):
        try:
            check_tag(tag, what=f"release {version}-{variant}: tag")
        except ConfigError as e:
            raise ConfigError(e.cause, f"{e.hint}; use a shorter version (pre-release) or variant "
                                       "name") from None


def _source(
    settings: Settings, variant: str, digest: str | None
) -> tuple[RegistryClient, Reference]:
    if digest is None:
        cand = candidate.load_candidate(settings, variant)
        if not cand:
            raise PromotionError(
                f"no candidate recorded for variant '{variant}'",
                f"run: invoke push --variant {variant} && invoke verify --variant {variant}, or "
                "pass --digest sha256:…",
            )
        ref = parse_reference(cand.reference)
        return client_for(settings, ref.registry), ref.by_digest(cand.digest)
    src = client_for(settings)
    # A tag never has a ':' (distribution spec tag grammar): 'md5:…' or 'SHA256:…' is a bad
    # digest, and calling it a tag sent users looking for a tag they never gave.
    if ":" not in digest:
        try:
            now = current(src, settings.registry.repository, digest)
        except PaddlecdError:
            now = None  # not even a valid tag: the message below still applies
        hint = f"it points to {now} now; " if now else ""
        raise ConfigError(
            f"--digest {digest!r} is a tag, not a digest: tags move, evidence is per digest",
            hint
            + "pass the digest verify checked (--digest sha256:…), or only --variant for the last "
              "candidate",
        )
    return src, refuse_image_id(Reference(
        settings.registry.url, settings.registry.repository, None, check_digest(digest)
    ))


def evidence_problem(settings: Settings, src: RegistryClient, repository: str, variant: str,
                     digest: str) -> tuple[PaddlecdError | None, VerifiedAttestation | None]:
    """Why no attestation of ``digest`` in ``repository`` allows a promotion (None: one does), and
    the one that does.

    Raises:
        RegistryError: the registry failed (a refusal is returned, not raised).
    """
    try:
        return None, registry_store.check(settings, src, repository, digest, variant)
    except registry_store.REFUSALS as e:
        return e, None


def _summary(att: VerifiedAttestation | None) -> dict[str, Any] | None:
    """The ledger's ``evidence_summary`` of the attestation a promotion rests on (its predicate
    is a signed dict; ``passed``/``failed`` are read by type)."""
    if not att:
        return None
    checks = att.predicate.get("checks", [])
    skipped = sum(1 for c in checks if isinstance(c, dict) and c.get("skipped") is True)
    return {"passed": att.passed, "checks": len(checks), "skipped": skipped,
            "created": att.created, "failed": att.failed}


def plan_promotion(
    settings: Settings,
    *,
    variant: str,
    version: str | None = None,
    part: str | None = None,
    digest: str | None = None,
    forced: bool = False,
    reason: str | None = None,
    accept_regression: str | None = None,
) -> Plan:
    """Plan promoting ``digest`` (default: the variant's last candidate) to ``version`` (or
    ``--bump part``); ``accept_regression`` is the reason a refused upgrade gate is overridden
    (:mod:`paddlecd.release.gates`).

    Raises:
        ConfigError: unknown variant, invalid version, a tag given as ``digest``, a release tag
            the registry cannot hold (:func:`check_tags`).
        PromotionError: no candidate, digest not in the candidate repository, clobber of an
            immutable tag.
        RegistryError: the registry failed.
    """
    variants.get(settings, variant)
    if version:
        check_not_a_release_name(parse_version(version), variants.load(settings))
        check_tags(variant, parse_version(version))  # before any registry is asked
    src, src_ref = _source(settings, variant, digest)
    d = src_ref.digest or ""
    dst, dst_ref = target(settings)
    # The attestation lookup asks the candidate registry, the rest the release one: overlapped
    # (the lookup adds no round trip to the plan). ``src`` is used by that thread only.
    with ThreadPoolExecutor(1) as pool:
        checked = pool.submit(evidence_problem, settings, src, src_ref.repository, variant, d)
        if dst.host == src.host:  # same registry: asked with a twin of the release client
            _check_source(dst.twin(), src_ref)
        tags = _plan_tags(dst, dst_ref, variant=variant, version=version, part=part, digest=d)
        refusal, att = checked.result()
    if dst.host != src.host:  # another registry: asked after its lookup (src is not shared)
        _check_source(src, src_ref)
    comparison = None if tags.done else gates.gate(
        settings, dst, dst_ref.repository, variant=variant, version=tags.version, digest=d,
        state=tags.old, records=tags.records, attestation=att, accept=accept_regression)
    gates.check_accept(comparison, accept_regression)  # before any write, dry-run too
    record = None if tags.done else _promote_record(
        tags, variant=variant, digest=d, source=str(src_ref), target=dst_ref.name,
        attestation=att, comparison=comparison, forced=forced, reason=reason)
    also = {str(v) for v, dg in tags.old.releases.items() if dg == d} | {
        r.version for r in tags.records if r.action == "promote" and r.digest == d}
    return Plan(action="promote", variant=variant, version=str(tags.version), digest=d,
                source=str(src_ref), target=dst_ref.name, repository=dst_ref.repository,
                writes=tags.writes, kept=tags.kept, record=record,
                evidence_problem=refusal.cause if refusal else None, refusal=refusal,
                attestation=att, src=src, dst=dst, ledger_view=tags.view, comparison=comparison,
                also=tuple(sorted(also - {str(tags.version)}, key=_version_order)))


@dataclass(frozen=True)
class _Tags:
    """The release registry's side of a promotion plan: the ledger read it rests on (``view``,
    its ``records`` and their fold ``old``), the version, the fold with this promotion ``new``,
    and the tag writes from one to the other. ``done``: the ledger already has the promotion."""

    view: ledger.View
    records: list[Record]
    old: State
    new: State
    version: semver.Version
    record_id: str
    done: bool
    writes: list[TagWrite]
    kept: list[str]


def _version_order(text: str) -> tuple[int, semver.Version | str]:
    """Sort key of a recorded version: by semver precedence, any unparsable one last."""
    try:
        return 0, semver.Version.parse(text)
    except ValueError:
        return 1, text


def _plan_tags(dst: RegistryClient, ref: Reference, *, variant: str, version: str | None,
               part: str | None, digest: str) -> _Tags:
    """The ledger read, the version, and the tag writes of promoting ``digest`` in ``ref``."""
    view, old, tags = _read_ledger(dst, ref, variant, version)
    records = list(view.records)
    known = set(old.releases) | set(old.claimed) | {
        v for t in tags if (v := parse_release_tag(t, variant))}
    newest = max(records, key=lambda r: r.id, default=None)
    if not version and newest is not None and newest.action == "promote" and \
            newest.digest == digest:
        # --bump again for the digest the newest record promoted (a promotion killed after its
        # record, re-run): that release is completed, not a second one made of the same digest
        # (a trial: the re-run of a killed --bump patch made 1.7.2 beside the unfinished 1.7.1)
        v = parse_version(newest.version)
    else:
        v = parse_version(version) if version else bump(known, part or "patch")
    check_tags(variant, v)
    ours = [release_tag(v, variant), *moving_tags(v, variant)]
    last = _last_other(records, v)  # a killed promotion's record is the newest (the head)
    theirs = [t for t in (release_tag(last, variant), *moving_tags(last, variant))
              if t not in ours] if last else []
    have = currents(dst, ref.repository, [*ours, *theirs])
    if view.state is not None and any(have[t] not in (None, old.digest_of(t))
                                      for t in moving_tags(v, variant)):
        # the state says a moving tag of this version stands elsewhere than the registry has
        # it (moved by hand, or a state not to be trusted; a missing one is a killed
        # promotion's, which the reconcile writes): fold the records instead (no request
        # more when they agree, the usual case)
        view = ledger.read_by_name(dst, ref.repository, variant) or ledger.read_view(
            dst, ref.repository, variant, dst.list_tags(ref.repository))
        records, old = list(view.records), view.fold()
    _refuse_clobber(ref, old, v, variant, digest, have)
    done = any(r.action == "promote" and r.version == str(v) and r.digest == digest
               for r in records)
    record_id = ledger.new_id(variant)
    new = fold(
        [*actions_of(records), *([] if done else [Action("promote", v, digest, record_id)])],
        variant, start=view.state,
    )
    writes, kept = _writes(have, old, new, v, variant)
    if last:
        writes += _complete_killed(dst, ref, have, new, last, variant, theirs, kept)
    return _Tags(view=view, records=records, old=old, new=new, version=v, record_id=record_id,
                 done=done, writes=writes, kept=kept)


def _read_ledger(dst: RegistryClient, ref: Reference, variant: str,
                 version: str | None) -> tuple[ledger.View, State, list[str]]:
    """The ledger read a promotion plans from, its fold, and the tag list when it was read.

    --version X: the checkpoint's folded state and the head (no tag list, bytes bounded whatever
    the history), or the ledger by name when that is not enough; --bump: the tags are needed for
    the releases the ledger does not know, so the ledger is read from them.
    """
    view, old, has_head = _read_new(dst, ref.repository, variant, version) \
        if version else (None, None, False)
    if view is None and has_head:  # no head: read_by_name would find none either
        view = ledger.read_by_name(dst, ref.repository, variant)
    tags = [] if view else dst.list_tags(ref.repository)
    view = view or ledger.read_view(dst, ref.repository, variant, tags)
    return view, old or view.fold(), tags


def _complete_killed(dst: RegistryClient, ref: Reference, have: dict[str, str | None],
                     new: State, last: semver.Version, variant: str, theirs: list[str],
                     kept: list[str]) -> list[TagWrite]:
    """The writes completing release ``last`` (a killed promotion's); when its image is gone
    from ``ref``, none, and a line saying so appended to ``kept``."""
    completing = _completing(have, new, last, variant, theirs)
    image = new.releases.get(last) if completing else None
    if image and current(dst, ref.repository, image) is None:
        kept.append(f"{last}-{variant} is recorded but its image {image} is "
                    f"not in {ref.name}: it cannot be completed (invoke release.repair "
                    f"--variant {variant} names it)")
        return []
    return completing


def _promote_record(tags: _Tags, *, variant: str, digest: str, source: str, target: str,
                    attestation: VerifiedAttestation | None,
                    comparison: gates.Comparison | None, forced: bool,
                    reason: str | None) -> Record:
    """The ledger record of the promotion ``tags`` plans."""
    att, v = attestation, tags.version
    return Record(
        id=tags.record_id,
        action="promote",
        variant=variant,
        version=str(v),
        digest=digest,
        source=source,
        target=target,
        tags=tuple(desired(tags.new, v, variant)),
        previous=_previous(tags.old, v, variant),
        evidence=f"{digest}@{att.created}" if att else None,
        evidence_summary=_summary(att),
        attestation=att.location.rsplit("@", 1)[1] if att and att.location else None,
        forced=forced,
        reason=reason,
        who=files.who(),
        when=files.now_iso("milliseconds"),
        parent=tags.view.last,
        gate=gates.ledger_gate(comparison, att),
    )


def _last_other(records: list[Record], version: semver.Version) -> semver.Version | None:
    """The version of the newest ledger record when it is of another version than ``version``: a
    promotion killed between its record and its tags leaves that record as the newest one, and
    the next promotion of the variant completes it (a trial: only the same promotion did)."""
    newest = max(records, key=lambda r: r.id, default=None)
    if newest is None or newest.version == str(version):
        return None
    try:
        return parse_version(newest.version)
    except ConfigError:
        return None


def _completing(have: dict[str, str | None], state: State, version: semver.Version,
                variant: str, tags: list[str]) -> list[TagWrite]:
    """The writes that put ``tags`` (of release ``version``, not the one promoted) where the fold
    ``state`` says and the registry has them not: what a killed promotion left undone."""
    want = desired(state, version, variant)
    return [TagWrite(tag=t, digest=want[t], version=str(state.moving.get(t, version)),
                     previous=have.get(t), previous_version=None,
                     moving=t != release_tag(version, variant), completes=True)
            for t in tags if t in want and have.get(t) != want[t]]


def _check_source(client: RegistryClient, ref: Reference) -> None:
    """Refuse a candidate digest its repository does not hold (PromotionError)."""
    try:
        client.resolve(ref.repository, ref.digest or "")
    except NotFoundError as e:
        client.check_api()  # a 404 of a server that is no registry says nothing of the digest
        raise PromotionError(
            f"digest {ref.digest} is not in {ref.name}",
            "pass a digest that was pushed there (see invoke push output / the candidate record)",
        ) from e


def _refuse_clobber(ref: Reference, state: State, v: semver.Version, variant: str, d: str,
                    have: dict[str, str | None]) -> None:
    tag = release_tag(v, variant)
    existing = state.releases.get(v) or have.get(tag)
    if existing and existing != d:
        raise PromotionError(
            f"{ref.name}:{tag} exists on {existing}; releases are immutable, refusing to re-point "
            f"it to {d}",
            "promote a new version (e.g. --bump patch); a release is never overwritten",
        )


def _previous(state: State, v: semver.Version, variant: str) -> dict[str, str | None]:
    return {
        t: (f"{state.moving[t]}@{state.digest_of(t)}" if t in state.moving else None)
        for t in moving_tags(v, variant)
    }


def plan_rollback(settings: Settings, *, variant: str, to: str) -> Plan:
    """Plan re-pointing the moving tags of release ``to`` back to it.

    Raises:
        ConfigError: unknown variant, invalid version or a pre-release.
        PromotionError: ``to`` is no release of ``variant`` in the ledger.
    """
    variants.get(settings, variant)
    v = parse_version(to)
    check_not_a_release_name(v, variants.load(settings), flag="--to")
    if v.prerelease:
        raise ConfigError(
            f"cannot roll back to pre-release {v}: it owns no moving tag",
            "roll back to a release X.Y.Z",
        )
    dst, ref = target(settings)
    view = ledger.read_by_name(dst, ref.repository, variant) or ledger.read_view(
        dst, ref.repository, variant, dst.list_tags(ref.repository))
    records = list(view.records)
    old = fold(actions_of(records), variant)
    if v not in old.releases:
        raise PromotionError(f"no release {release_tag(v, variant)} in the ledger of {ref.name}",
                             f"see: invoke release.list --variant {variant}")
    d, record_id = old.releases[v], ledger.new_id(variant)
    new = fold([*actions_of(records), Action("rollback", v, d, record_id)], variant)
    have = currents(dst, ref.repository, [release_tag(v, variant), *moving_tags(v, variant)])
    writes, _ = _writes(have, old, new, v, variant)
    done = all(old.moving.get(t) == v for t in moving_tags(v, variant))
    record = None if done else Record(
        id=record_id, action="rollback", variant=variant, version=str(v), digest=d,
        source=str(ref.by_digest(d)), target=ref.name, tags=tuple(moving_tags(v, variant)),
        previous=_previous(old, v, variant), who=files.who(), when=files.now_iso("milliseconds"),
        parent=records[-1].id if records else "")
    return Plan(action="rollback", variant=variant, version=str(v), digest=d,
                source=str(ref.by_digest(d)), target=ref.name, repository=ref.repository,
                writes=writes, kept=[], record=record, src=dst, dst=dst, ledger_view=view)
