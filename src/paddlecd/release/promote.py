"""Release management: promote a verified digest to a semver release, roll back, look up.

A promotion runs as named, timed phases (promo-tools' pipeline; STYLE.md §10):

``plan`` → ``check evidence`` → ``copy`` → ``write ledger`` → ``write tags`` → ``verify digests``

* check evidence: a signed attestation of the digest in the candidate repository, verified with
  ``release.trusted_keys`` (:mod:`paddlecd.verify.registry_store`); ``--force --reason``
  overrides;

* copy: the image goes into the release repository by digest only — blobs mounted within one
  registry (no bytes move), streamed across registries only when missing (crane ``copy``) — and its
  attestation with it, so the release proves itself from the release repository alone;
* write ledger *before* the tags: the ledger record is the intent, and the tags are materialised
  from the ledger's :func:`~paddlecd.release.policy.fold`. So a crash anywhere converges on re-run
  (the re-run plans only what is missing), and two concurrent promoters agree on every moving tag
  because each reconciles the tags against the fold of *all* records after its own writes;
* verify digests: re-read every tag of the version and the ledger; drift is re-written and
  re-checked.

A failure names its phase. Promotions of one variant from one machine are also serialised by a
file lock under the state folder (CI runners on one host), which keeps the registry traffic simple.
Library code never prints: progress goes to the ``report`` callback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import semver

from paddlecd import files
from paddlecd.config import Settings
from paddlecd.errors import (
    ConfigError,
    NotFoundError,
    PaddlecdError,
    PromotionError,
    RegistryError,
    VariantMismatchError,
    quoted,
)
from paddlecd.image import variants
from paddlecd.registry.client import RegistryClient
from paddlecd.release import ledger
from paddlecd.release.plan import (
    Plan,
    currents,
    desired,
    plan_promotion,
    plan_rollback,
)
from paddlecd.release.policy import HistoryNeeded, State, parse_version
from paddlecd.release.query import (  # re-exported
    Release,
    find,
    history,
    list_releases,
    show,
    split_release_tag,
)
from paddlecd.types import Echo
from paddlecd.verify import registry_store


@dataclass
class Outcome:
    """What a promotion or rollback did: its ``plan``, ``phases`` [(name, seconds)], blob ``copied``
    counts (present/mounted/copied), ``bytes_uploaded`` into the target, tags ``written``;
    ``attestation_copied``: the same counts for the attestation artifact; the ledger
    ``checkpoint`` it wrote (blob digest; None when none was due)."""

    plan: Plan | None = None
    phases: list[tuple[str, float]] = field(default_factory=list)
    copied: Counter[str] = field(default_factory=Counter)
    bytes_uploaded: int = 0
    written: list[str] = field(default_factory=list)
    attestation_copied: Counter[str] = field(default_factory=Counter)
    checkpoint: str | None = None  # digest of the ledger checkpoint this action wrote, if any
    record: str | None = None  # id of the ledger record this action wrote, if any

    @contextlib.contextmanager
    def phase(self, name: str, report: Echo) -> Iterator[None]:
        """Time phase ``name``; re-raise any failure as the same error type naming the phase."""
        start = time.monotonic()
        try:
            yield
        except PaddlecdError as e:
            raise type(e)(f"phase '{name}' failed: {e.cause}", e.hint) from e
        except OSError as e:  # the state folder's disk: its path and the usual hint (a trial:
            cause, hint = files.os_error_text(e)  # "OSError: [Errno 28] No space left on device")
            raise PromotionError(f"phase '{name}' failed: {cause}",
                                 f"{hint}: promotion converges") from e
        except Exception as e:  # noqa: BLE001 - anything else is still reported with its phase
            raise PromotionError(
                f"phase '{name}' failed: {type(e).__name__}: {e}",
                "fix the cause and re-run the same command: promotion converges",
            ) from e
        finally:
            self.phases.append((name, time.monotonic() - start))
        report(f"phase {name}: {self.phases[-1][1]:.2f} s")


@dataclass(frozen=True)
class Released:
    """The result of a promotion or rollback for scripts (``invoke promote --json``).

    Attributes:
        action: ``promote`` or ``rollback``. variant, version: the release is
            ``<version>-<variant>`` (:attr:`release`).
        digest: ``sha256:…`` released.
        reference: ``host/repo@sha256:…`` in the release repository.
        executed: False when only planned (``--dry-run``): then ``written`` is empty and
            ``planned`` says what a run with ``--yes`` writes.
        planned: the planned tag writes, each ``{"tag", "digest", "moving", "previous"}``
            (previous: the digest the tag pointed to, or None).
        written: tags written by this run (a complete re-run writes none).
        attestation: digest of the signed attestation copied along (None: none, e.g. ``--force``).
        record: the ledger record id of this release: written now, else the one the ledger has
            (None for a plan whose record is not written yet).
        forced, reason: ``--force`` and its ``--reason``.
        bytes_uploaded: bytes copied into the release registry (0 when blobs were mounted).
        comparison: the upgrade gate (:meth:`paddlecd.release.gates.Comparison.to_json`; the
            ledger record's, for a release already recorded), or None.
    """

    action: str
    variant: str
    version: str
    digest: str
    reference: str
    executed: bool
    planned: tuple[dict[str, Any], ...] = ()
    written: tuple[str, ...] = ()
    attestation: str | None = None
    record: str | None = None
    forced: bool = False
    reason: str | None = None
    bytes_uploaded: int = 0
    comparison: dict[str, Any] | None = None

    @property
    def release(self) -> str:
        """``<version>-<variant>``: the immutable release tag."""
        return f"{self.version}-{self.variant}"

    def to_json(self) -> dict[str, Any]:
        """The fields as plain JSON values, plus ``release``."""
        return {**dataclasses.asdict(self), "release": self.release, "planned": list(self.planned),
                "written": list(self.written)}


def released(outcome: Outcome, *, executed: bool) -> Released:
    """The :class:`Released` record of ``outcome`` (``executed``: whether the plan was carried out).

    The ledger record id is the one written now, else the ledger's record of the same release
    (a re-run that finds everything in place), else None.
    """
    plan = outcome.plan
    assert plan is not None, "released() needs an outcome with a plan"
    known = plan.record or _recorded(plan)  # planned now, or in the ledger already
    record_id = outcome.record or (known.id if known and not plan.record else None)
    attestation = known.attestation if known else None
    if attestation is None and plan.attestation and plan.attestation.location:
        attestation = plan.attestation.location.rsplit("@", 1)[1]
    return Released(
        action=plan.action, variant=plan.variant, version=plan.version, digest=plan.digest,
        reference=f"{plan.target}@{plan.digest}", executed=executed,
        planned=tuple({"tag": w.tag, "digest": w.digest, "moving": w.moving,
                       "previous": w.previous} for w in plan.writes),
        written=tuple(outcome.written), attestation=attestation, record=record_id,
        forced=bool(known and known.forced), reason=known.reason if known else None,
        bytes_uploaded=outcome.bytes_uploaded,
        comparison=plan.comparison.to_json() if plan.comparison else (
            {k: v for k, v in known.gate.items() if k != "figures"}
            if known and known.gate else None))


def _recorded(plan: Plan) -> ledger.Record | None:
    """The ledger's last record of this very release (same action, version, digest), if any."""
    records = plan.ledger_view.records if plan.ledger_view else ()
    same = [r for r in records
            if (r.action, r.version, r.digest) == (plan.action, plan.version, plan.digest)]
    return same[-1] if same else None


@contextlib.contextmanager
def _locked(settings: Settings, variant: str, timeout: float = 600) -> Iterator[None]:
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", f"{settings.release_repo}-{variant}")
    path = settings.state / "locks" / f"release-{slug}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        # filelock opens it O_TRUNC, following a link (a trial: a link to a file outside the
        # state folder emptied that file on the next rollback)
        raise PromotionError(f"the promotion lock {path} is {files.kind_of(path)}, not a plain "
                             "file of the state folder", "remove it (no promotion may run); "
                             "the next promotion makes it again")
    try:
        with filelock.FileLock(str(path), timeout=timeout):
            yield
    except filelock.Timeout as e:
        raise PromotionError(
            f"another promotion of {variant} held {path} for {timeout:.0f} s",
            "wait for it to finish; remove the lock file only if no promotion runs",
        ) from e


def promote(
    settings: Settings,
    *,
    variant: str,
    version: str | None = None,
    part: str | None = None,
    digest: str | None = None,
    force: bool = False,
    reason: str | None = None,
    execute: bool = False,
    report: Echo = lambda line: None,
    accept_regression: str | None = None,
) -> Outcome:
    """Promote a verified digest of ``variant`` to release ``version`` (or the next ``part`` bump).

    Without ``execute`` it stops after the evidence check (``--dry-run``, or no ``--yes``).

    Args:
        digest: ``sha256:…`` in the candidate repository; default: the variant's last candidate
            (``<state>/candidates/<variant>.json``).
        force, reason: promote despite missing/failed/stale evidence; ``reason`` is required and
            recorded.
        accept_regression: promote although the upgrade gate refuses (a figure slower than the
            release it replaces, :mod:`paddlecd.release.gates`); the reason and who are recorded.
        report: receives the plan lines and progress.

    Raises:
        ConfigError: bad flags, invalid version, unknown variant, a tag given as a digest.
        PromotionError: no candidate, digest not in the repository, clobber, evidence refused, a
            failed phase (named in the message).
        RegistryError: the registry failed during planning.
    """
    _check_flags(version=version, part=part, force=force, reason=reason,
                 accept_regression=accept_regression)
    variants.get(settings, variant)  # …and before a lock file is made for it
    outcome = Outcome()
    with _locked(settings, variant) if execute else contextlib.nullcontext():
        with outcome.phase("plan", report):
            plan = outcome.plan = plan_promotion(
                settings,
                variant=variant,
                version=version,
                part=part,
                digest=digest,
                forced=force,
                reason=reason,
                accept_regression=accept_regression,
            )
        for line in plan.describe():
            report(line)
        if plan.noop:
            return outcome
        _refuse(plan, outcome, report, force=force)
        if execute:
            _execute(settings, variant, plan, outcome, report)
    return outcome


def _check_flags(*, version: str | None, part: str | None, force: bool, reason: str | None,
                 accept_regression: str | None) -> None:
    """Refuse bad promote flags (ConfigError) before any registry is asked."""
    if bool(version) == bool(part):
        raise ConfigError("pass exactly one of --version X.Y.Z and --bump major|minor|patch",
                          "e.g. invoke promote --variant cpu --version 1.4.0 --dry-run")
    if force and not (reason or "").strip():
        raise ConfigError(
            "--force needs --reason", 'e.g. --force --reason "GPU runner down, verified by hand"'
        )
    if reason and not force:  # recorded only with --force: never taken and dropped
        raise ConfigError("--reason is for --force (it is recorded with the forced promotion)",
                          "drop --reason, or add --force if the evidence is to be overridden")
    if accept_regression is not None and not accept_regression.strip():
        raise ConfigError("--accept-regression needs a reason",
                          'e.g. --accept-regression "new NCCL, busbw re-baselined"')
    if version:
        parse_version(version)  # bad input is refused before any registry is asked
    if part and part not in ("major", "minor", "patch"):  # …never "no candidate" for a typo
        raise ConfigError(f"--bump {quoted(part)} is not major, minor or patch",
                          "e.g. --bump minor")


def _refuse(plan: Plan, outcome: Outcome, report: Echo, *, force: bool) -> None:
    """Raise the plan's evidence refusal (unless ``force``) or the upgrade gate's, each in its
    phase; ``force`` with evidence that passes is refused (ConfigError): the ledger would
    record an override of nothing (a trial: ``"forced": true`` for a passing digest)."""
    if force and plan.refusal is None:
        raise ConfigError(f"--force: the evidence of {plan.digest} passes: there is nothing to "
                          "force", "drop --force and --reason (a forced record says the evidence "
                          "was overridden)")
    with outcome.phase("check evidence", report):
        if isinstance(plan.refusal, VariantMismatchError):  # --force or not (a trial: a CPU
            raise type(plan.refusal)(f"refused: {plan.refusal.cause}",  # image as cu126)
                                     plan.refusal.hint)
        if plan.refusal and not force:  # the refusal's type (and exit code) is kept
            raise type(plan.refusal)(f"refused: {plan.refusal.cause}",
                                     f"{plan.refusal.hint}; or --force --reason '…' (recorded)")
    if plan.comparison and plan.comparison.status == "refused":
        with outcome.phase("compare", report):
            raise PromotionError(f"refused: {plan.comparison.refusal()}",
                                 "find the cause (invoke release.compare), or promote anyway "
                                 "with --accept-regression \"<reason>\" (recorded)")


def _execute(settings: Settings, variant: str, plan: Plan, outcome: Outcome,
             report: Echo) -> None:
    """Apply ``plan``, adopting the ledger record a killed run of the same promotion left."""
    pending = _pending_path(settings, variant)
    if plan.record is None and plan.dst:
        _finish_head(plan.dst, plan.repository, variant, pending, report)
    adopted = _adoptable(plan, pending)
    if adopted:
        report(f"ledger record {adopted.id} of a killed run of this promotion found: "
               "adopting it (no second record)")
    _apply(plan, outcome, report, pending=pending, adopted=adopted)


@dataclass(frozen=True)
class Repair:
    """What :func:`repair` found: ``writes`` [(tag, digest, release)] that put a release's tags
    where the ledger's fold says (written unless a dry run), and ``lost``: releases the ledger
    records whose image is not in the release repository (nothing can complete them)."""

    writes: tuple[tuple[str, str, str], ...]
    lost: tuple[str, ...]


def repair(settings: Settings, *, variant: str, execute: bool = False,
           report: Echo = lambda line: None) -> Repair:
    """Complete every release of ``variant`` the ledger records: each tag the fold of all its
    records gives (immutable first, then moving) is written where the registry lacks it or has it
    elsewhere (a promotion killed between its record and its tags; a tag deleted by hand).
    Reads the whole ledger and asks every release's tags (one HEAD each): a repair, not a path of
    every promotion (the next promotion completes the newest record only).

    Raises:
        ConfigError: unknown variant. RegistryError: the registry failed.
    """
    from paddlecd.release import plan as planning
    from paddlecd.release.policy import release_tag

    variants.get(settings, variant)
    dst, ref = planning.target(settings)
    with _locked(settings, variant) if execute else contextlib.nullcontext():
        view = ledger.read_view(dst, ref.repository, variant, dst.list_tags(ref.repository))
        state = view.fold()
        want: dict[str, tuple[str, str]] = {}  # tag -> (digest, release)
        for version in sorted(state.releases):
            for tag, digest in planning.desired(state, version, variant).items():
                want.setdefault(tag, (digest, str(state.moving.get(tag, version))))
        images = sorted({d for d, _ in want.values()})
        present = dict(zip(images, dst.each(
            lambda c, d: planning.current(c, ref.repository, d) is not None, images)))
        have = planning.currents(dst, ref.repository, list(want))
        lost = tuple(sorted({f"{r}-{variant} ({d})" for d, r in want.values() if not present[d]}))
        todo = [(t, d, r) for t, (d, r) in want.items() if have[t] != d and present[d]]
        todo.sort(key=lambda w: w[0] not in {release_tag(v, variant) for v in state.releases})
        for tag, digest, release in todo:
            report(f"  write {ref.name}:{tag} → {digest} (release {release}; "
                   f"{'was ' + str(have[tag]) if have[tag] else 'missing'})")
        for name in lost:
            report(f"  lost  {name}: recorded in the ledger, its image is not in {ref.name}")
        if execute and todo:
            for tag, digest, _ in todo:
                manifest = dst.get_manifest(ref.repository, digest)
                dst.put_manifest(ref.repository, tag, manifest.raw,
                                 manifest.descriptor.media_type)
            # read back under the lock (a trial: a registry that answered 201 and kept the old
            # tag had the repair say "repaired"; the next dry run planned the same write)
            after = planning.currents(dst, ref.repository, [t for t, _, _ in todo])
            kept = [t for t, d, _ in todo if after[t] != d]
            if kept:
                raise RegistryError(
                    f"repairing {ref.name}: the registry answered 201 for {', '.join(kept[:5])} "
                    "but still serves another digest there",
                    "the registry (or a proxy or cache in front of it) did not keep the writes: "
                    "check it, then re-run release.repair")
    return Repair(tuple(todo), lost)


def _pending_path(settings: Settings, variant: str) -> Path:
    """``<state>/ledger/pending-<release repo>-<variant>.json``: the record this machine is about
    to append, kept until its head is written."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", f"{settings.release_repo}-{variant}")
    return settings.state / "ledger" / f"pending-{slug}.json"


def _finish_head(dst: RegistryClient, repository: str, variant: str, pending: Path,
                 report: Echo) -> None:
    """Complete what a promotion killed after its record landed, before its head moved, left:
    its re-run finds the release recorded (no record to write, so no adoption), and nothing
    pointed the head at the record, which every read by name (the head chain) then missed, nor
    removed ``pending`` (trial 11). The head is pointed at the pending record when that record
    is in the registry and the head is still its parent; ``pending`` goes either way."""
    try:
        mine = ledger.Record.from_json(json.loads(pending.read_text())["record"])
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        mine = None  # a cut or foreign file: nothing to complete from it
    if mine is not None and mine.variant == variant:
        try:
            there = ledger.fetch(dst, repository, mine.id)
        except NotFoundError:
            there = None
        head = ledger.head(dst, repository, variant)
        if there == mine and (head.id if head else "") == (mine.parent or ""):
            ledger.point_head(dst, repository, mine)
            report(f"ledger head → {mine.id}, the record of a killed run (its head was not "
                   "written)")
    pending.unlink(missing_ok=True)


def _adoptable(plan: Plan, pending: Path) -> ledger.Record | None:
    """The record a killed run of this same promotion left between its record and its head (read
    from ``pending``, checked in the registry: one GET), when the head is still its parent, so
    pointing the head at it keeps the chain whole; None otherwise (the re-run appends its own).

    A kill there left a record no read by name reaches; without this the re-run wrote a second
    record of the same release (harmless to the fold, a duplicate in the history)."""
    if not (plan.record and plan.dst and plan.ledger_view and pending.is_file()):
        return None
    try:
        data = json.loads(pending.read_text())
        mine = ledger.Record.from_json(data["record"])
    except (ValueError, KeyError, TypeError):
        return None
    same = (mine.action, mine.variant, mine.version, mine.digest, mine.target) == (
        plan.record.action, plan.record.variant, plan.record.version, plan.record.digest,
        plan.record.target)
    if not same or mine.parent != plan.ledger_view.last:
        return None
    try:
        there = ledger.fetch(plan.dst, plan.repository, mine.id)
    except NotFoundError:
        return None
    return there if there == mine else None


def rollback(settings: Settings, *, variant: str, to: str, execute: bool = False,
             report: Echo = lambda line: None) -> Outcome:
    """Re-point the moving tags of release ``to`` of ``variant`` back to it (recorded as a
    rollback).

    Raises:
        ConfigError: invalid version, pre-release, unknown variant.
        PromotionError: ``to`` is not a release; a failed phase (named).
    """
    outcome = Outcome()
    with _locked(settings, variant) if execute else contextlib.nullcontext():
        with outcome.phase("plan", report):
            plan = outcome.plan = plan_rollback(settings, variant=variant, to=to)
        for line in plan.describe():
            report(line)
        if execute and not plan.noop:
            _apply(plan, outcome, report)
    return outcome


def _counts(counter: Counter[str]) -> str:
    """``6 mounted, 1 copied`` (``none`` when empty): a person reads this, not a dict."""
    return ", ".join(f"{n} {k}" for k, n in counter.items()) or "none"


def _apply(plan: Plan, outcome: Outcome, report: Echo, *, pending: Path | None = None,
           adopted: ledger.Record | None = None) -> None:
    assert plan.src and plan.dst
    dst, repo = plan.dst, plan.repository
    if plan.action == "promote":
        with outcome.phase("copy", report):
            before = dst.stats["bytes_uploaded"]
            _copy(plan, outcome)
            outcome.bytes_uploaded = dst.stats["bytes_uploaded"] - before
            report(f"blobs {_counts(outcome.copied)}; attestation blobs "
                   f"{_counts(outcome.attestation_copied)}; "
                   f"{outcome.bytes_uploaded} bytes uploaded")
        # the image manifest is in hand: the tag writes need not fetch it again
        plan.manifests.setdefault(plan.digest, plan.src.get_manifest(_repo_of(plan.source),
                                                                     plan.digest))
    with outcome.phase("write ledger", report):
        if (
            plan.record
        ):  # id and time taken now, not at plan time: the ledger order is the write order
            if adopted:
                record = adopted
                ledger.point_head(dst, repo, record)
            else:
                record = dataclasses.replace(plan.record, id=ledger.new_id(plan.variant),
                                             when=files.now_iso("milliseconds"))
                if pending:  # kept until the head is written: a re-run after a kill adopts it
                    files.write_json(pending, {"record": json.loads(record.to_json())})
                ledger.append(dst, repo, record, max_age=ledger.WINDOW / 2)
            if pending:
                pending.unlink(missing_ok=True)
            outcome.record = record.id
            report(f"ledger record {record.id}")
    with outcome.phase("write tags", report):
        # the immutable tag first, so no moving tag names a release before it is there; then the
        # moving ones a few at once (one PUT each; a crash leaves some missing: the re-run
        # writes them)
        batches = [[w for w in plan.writes if not w.moving], [w for w in plan.writes if w.moving]]
        for batch in batches:
            dst.each(lambda c, w: _write_tag(plan, w.tag, w.digest, client=c), batch)
            for w in batch:
                outcome.written.append(w.tag)
                report(f"wrote {plan.target}:{w.tag} → {w.digest}")
    with outcome.phase("verify digests", report):
        view = _reconcile(plan, outcome, report)
    if view.problem:
        report(f"ledger checkpoint ignored: {view.problem}")
    if view.stale or _missed(plan, view, outcome):
        with outcome.phase("write checkpoint", report):
            _checkpoint(plan, view, outcome, report)


def _copy(plan: Plan, outcome: Outcome) -> None:
    """Copy the image and its attestation into the release repository, overlapped (the
    attestation's copy adds no round trip to a promotion): the attestation's blobs are mounted
    meanwhile, its manifest (whose ``subject`` is the image) written once the image is there. The
    attestation uses clients of its own (:meth:`RegistryClient.twin`)."""
    assert plan.src and plan.dst
    source_repo = _repo_of(plan.source)
    if not plan.attestation:
        outcome.copied = plan.dst.copy_image(plan.src, source_repo, plan.digest, plan.repository)
        return
    image_there, copied = threading.Event(), []

    def ready() -> None:
        image_there.wait()
        if not copied:
            raise PromotionError("the image was not copied, so neither is its attestation",
                                 "fix the image copy's error and re-run")

    dst, src = plan.dst.twin(), plan.src.twin()
    with ThreadPoolExecutor(1) as pool:
        attestation = pool.submit(registry_store.copy, dst, src, source_repo, plan.repository,
                                  plan.attestation, ready=ready)
        try:
            outcome.copied = plan.dst.copy_image(plan.src, source_repo, plan.digest,
                                                 plan.repository)
            copied.append(True)
        finally:
            image_there.set()
    outcome.attestation_copied = attestation.result()
    plan.dst.stats.update(dst.stats)
    plan.src.stats.update(src.stats)


def _checkpoint(plan: Plan, view: ledger.View, outcome: Outcome, report: Echo) -> None:
    """Cache the ledger just read back in a checkpoint. The release is complete at this point, so a
    refused write is reported, not raised: readers only fetch more records until the next one."""
    assert plan.dst
    try:
        outcome.checkpoint = ledger.write_checkpoint(plan.dst, plan.repository, view)
    except PaddlecdError as e:
        report(f"ledger checkpoint not written ({e.cause}); a later promotion writes it")
        return
    report(f"ledger checkpoint {outcome.checkpoint}: {len(view.records)} records of {plan.variant}")


def _repo_of(reference: str) -> str:
    return reference.split("@")[0].split("/", 1)[1]


def _missed(plan: Plan, view: ledger.View, outcome: Outcome) -> bool:
    """True when the listing found a record (not this action's) that the plan's read by name did
    not reach: a checkpoint with it is due (ledger invariant 5)."""
    planned = plan.ledger_view
    if planned is None or planned.via != "head":
        return False
    return bool({r.id for r in view.records} - {r.id for r in planned.records} - {outcome.record})


def _write_tag(plan: Plan, tag: str, digest: str, *, client: RegistryClient | None = None) -> None:
    client = client or plan.dst
    assert client
    if digest not in plan.manifests:
        plan.manifests[digest] = client.get_manifest(plan.repository, digest)
    manifest = plan.manifests[digest]
    client.put_manifest(plan.repository, tag, manifest.raw, manifest.descriptor.media_type)


def _reread(plan: Plan, view: ledger.View | None) -> tuple[ledger.View, State]:
    """The ledger read back after this promotion's writes, and its fold: the window after the
    checkpoint's state when the plan started from one, the whole tag list otherwise (or when the
    window shows a late record, or names a version the state knows only as claimed)."""
    assert plan.dst
    if view is not None and view.state is not None:
        window = ledger.read_window(plan.dst, plan.repository, view)
        try:
            if window is not None:
                return window, window.fold()
        except HistoryNeeded:
            pass
        view = None
    tags = plan.dst.list_tags(plan.repository)
    view = ledger.read_view(plan.dst, plan.repository, plan.variant, tags, since=view)
    return view, view.fold()


def _reconcile(plan: Plan, outcome: Outcome, report: Echo, rounds: int = 8) -> ledger.View:
    """Check every tag of the version against the fold of all ledger records; rewrite drift.

    Returns the last read of the ledger (what a checkpoint may cache: read after every write)."""
    assert plan.dst
    version = semver.Version.parse(plan.version)
    view = plan.ledger_view
    for _ in range(rounds):
        # the consistency check: the one tag listing of a promotion, after its own writes
        # (ledger invariant 5); the records it adds to the plan's read are its concurrent ones.
        # From a checkpoint's state only the window after it is listed (invariant 6).
        view, state = _reread(plan, view)
        want = desired(state, version, plan.variant)
        have = currents(plan.dst, plan.repository, list(want))
        drift = {t: d for t, d in want.items() if have[t] != d}
        plan.dst.each(lambda c, td: _write_tag(plan, *td, client=c), list(drift.items()))
        for tag, digest in drift.items():
            outcome.written.append(tag)
            report(f"reconciled {plan.target}:{tag} → {digest}")
        if plan.action == "promote" and state.releases.get(version) is None:
            # a trial: "claimed first by None" blamed a concurrent promotion when the registry
            # had dropped the record, or its tag list did not show it
            raise PromotionError(
                f"the ledger of {plan.variant} in {plan.target} shows no record of "
                f"{plan.version}-{plan.variant} after this promotion wrote one",
                "the registry did not keep the record, or its tag list does not show it: check "
                "it (GET /v2/<repository>/tags/list), then re-run the same command")
        if (
            plan.action == "promote" and state.releases.get(version) != plan.digest
        ):  # tags restored above
            raise PromotionError(
                f"{plan.version}-{plan.variant} was claimed first by {state.releases.get(version)}",
                "a concurrent promotion took this version; promote yours as another version",
            )
        if not drift:
            return view
    raise PromotionError(
        f"tags of {plan.version}-{plan.variant} kept changing under this promotion",
        "another promotion is running; re-run when it has finished",
    )


__all__ = ["Outcome", "Plan", "Release", "Released", "Repair", "find", "history", "list_releases",
           "promote", "released", "repair", "rollback", "show", "split_release_tag"]
