"""Upgrade gates: a candidate's figures judged against the release its moving tag points at now.

The baseline is the release that ``X.Y-<variant>`` points at (else ``latest-<variant>``) before
this promotion; its figures are those its promotion copied into its ledger record from the signed
attestation it verified (so the comparison reads no more than the plan does), or, for a release
whose record carries none, read from its attestation in the release repository. Only figures of
the same hardware class are compared. A figure is a regression when it is slower by more than its
limit (``release.max_slowdown``, per figure ``release.max_slowdown_figures``) *and* the two
medians differ beyond their noise: the notches of a box plot, median ± 1.58·IQR/√n (McGill,
Tukey and Larsen 1978, "Variations of Box Plots"), do not overlap. A figure with fewer than
:data:`MIN_SAMPLES` timed samples is shown, never judged. Rules and examples:
docs/guides/upgrade-gates.md.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import semver

from paddlecd import files
from paddlecd.config import Settings, slowdown_figures
from paddlecd.errors import ConfigError, NotFoundError, SigningKeyError
from paddlecd.registry.client import RegistryClient
from paddlecd.release import ledger
from paddlecd.release.ledger import Record
from paddlecd.release.policy import State
from paddlecd.verify.attestation import VerifiedAttestation
from paddlecd.verify.figures import Figure, from_predicate

MIN_SAMPLES = 4  # below this an IQR says nothing: the figure is reported, not judged
NOTCH = 1.58  # McGill et al. 1978: medians whose notches do not overlap differ (~95 %)


@dataclass(frozen=True)
class Verdict:
    """One figure of the candidate against the baseline.

    Attributes:
        name, unit: the figure. base, new: the two medians; base_spread, new_spread: their
            IQR / median. slowdown: fraction slower (0.25: 25 % slower; negative: faster).
        limit: the allowed slowdown. status: ``ok``, ``regression``, ``noise`` (slower than the
            limit, but within the runs' noise), ``unjudged`` (too few samples) or ``new`` (the
            baseline lacks it).
    """

    name: str
    unit: str
    base: float | None
    new: float
    base_spread: float = 0.0
    new_spread: float = 0.0
    slowdown: float = 0.0
    limit: float = 0.0
    status: str = "ok"

    @property
    def ratio(self) -> float | None:
        """new / base (None without a baseline)."""
        return self.new / self.base if self.base else None

    def line(self) -> str:
        """``train.step_time 0.77 ms (±63%) → 2.9 ms (±4%): 277% slower (limit 10%)``."""
        new = f"{self.new:.4g} {self.unit} (±{self.new_spread:.0%})"
        if self.base is None:
            return f"{self.name} {new}: no baseline figure"
        way = f"{abs(self.slowdown):.0%} {'slower' if self.slowdown > 0 else 'faster'}"
        note = {"regression": f" (limit {self.limit:.0%}): REGRESSION",
                "noise": f" (limit {self.limit:.0%}): within the runs' noise",
                "unjudged": ": too few samples to judge (raise verify.repeat)"}.get(self.status, "")
        return (f"{self.name} {self.base:.4g} {self.unit} (±{self.base_spread:.0%}) → "
                f"{new}: {way}{note}")

    def to_json(self) -> dict[str, Any]:
        """The verdict as a JSON object."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """Inverse of :meth:`to_json` (unknown keys ignored)."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Comparison:
    """The upgrade gate of one promotion.

    Attributes:
        status: ``passed``, ``refused``, ``accepted`` (refused, promoted by
            ``--accept-regression``) or ``not compared``.
        hardware: the candidate's hardware class. digest: the candidate's digest.
        baseline: ``<version>-<variant>`` compared with (None: none). baseline_digest: its digest.
        tag: the moving tag that named the baseline. note: why not compared, when not.
        verdicts: per figure. reason, who: of ``--accept-regression``.
        models: one line per ``release.models`` entry that fails in the candidate or was not
            checked there (:func:`model_problems`); any refuses, as a regression does.
        unmatched: the ``release.max_slowdown_figures`` patterns that match none of the
            candidate's figures (a typo limits nothing: a trial took one without a word).
    """

    status: str
    hardware: str
    digest: str
    baseline: str | None = None
    baseline_digest: str | None = None
    tag: str | None = None
    note: str = ""
    verdicts: tuple[Verdict, ...] = ()
    reason: str | None = None
    who: str | None = None
    models: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()

    @property
    def regressions(self) -> tuple[Verdict, ...]:
        """The figures that refuse the promotion."""
        return tuple(v for v in self.verdicts if v.status == "regression")

    def refusal(self) -> str:
        """The one-line cause of a refusal: each regressed figure, both values, both digests and
        the hardware class."""
        parts = [f"model {m}" for m in self.models]
        if self.regressions:
            figs = "; ".join(v.line().removesuffix(": REGRESSION") for v in self.regressions)
            parts.append(f"slower than {self.baseline} on {self.hardware}: {figs} "
                         f"(candidate {self.digest}, baseline {self.baseline_digest})")
        return "; ".join(parts)

    def describe(self, *, every: bool = False, shown_by: str = "invoke release.show VERSION"
                 ) -> list[str]:
        """Lines for a person: the verdict, then the figures' table (:func:`table`; ``every``:
        the figures too few timed samples judged as rows too, not counted in its notes;
        ``shown_by``: the command its notes name for those rows), then one line per model
        problem."""
        models = [f"    model {m}" for m in self.models]
        if self.status == "not compared" or (self.note and not self.verdicts):
            state = {"refused": "REFUSED, ", "accepted": f"accepted by {self.who}: "
                     f"{self.reason}, "}.get(self.status, "")
            return [f"  comparison      {state}not compared ({self.note})", *models]
        head = {"passed": "passed", "refused": "REFUSED", "accepted":
                f"regression accepted by {self.who}: {self.reason}"}[self.status]
        lines = [f"  comparison      {head} against {self.baseline} ({self.tag}, "
                 f"{(self.baseline_digest or '?')[:19]}…) on {self.hardware}"]
        unmatched = [f"    warning: release.max_slowdown_figures pattern {p[:80]!r} matches no "
                     "figure of the candidate: it limits nothing" for p in self.unmatched]
        return (lines + [f"    {x}" for x in table(self.verdicts, every=every,
                                                      shown_by=shown_by)] + models
                + unmatched)

    def to_json(self) -> dict[str, Any]:
        """The comparison as stored in the ledger record (``gate``)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["verdicts"] = [v.to_json() for v in self.verdicts]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:
        """Inverse of :meth:`to_json` (unknown keys ignored)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["verdicts"] = tuple(Verdict.from_json(v) for v in data.get("verdicts") or ())
        known["models"] = tuple(data.get("models") or ())
        known["unmatched"] = tuple(data.get("unmatched") or ())
        return cls(**known)


JUDGED = ("ok", "noise", "regression")  # the statuses a figure with enough samples gets


def table(verdicts: Sequence[Verdict], *, every: bool = False,
          shown_by: str = "invoke release.show VERSION") -> list[str]:
    """The verdicts as a table for a person: a header (figure, baseline, candidate, change,
    verdict), one row per judged figure (``every``: per figure), then one line of notes in
    parentheses: the limit when the judged figures share one (else it is in each verdict), and
    how many figures are not shown (too few timed samples, or none in the baseline) and
    ``shown_by``, the command that shows them (a trial: a bare ``invoke release.show`` was
    refused for its missing version).

    ``train.step_time   0.9486 ms   1.91 ms   101% slower   ok``; values are medians, the
    change is the candidate's slowdown (:attr:`Verdict.slowdown`)."""
    judged = [v for v in verdicts if v.status in JUDGED]
    limits = {v.limit for v in judged}
    shared = limits.pop() if len(limits) == 1 else None
    rows = [("figure", "baseline", "candidate", "change", "verdict")]
    for v in verdicts if every else judged:
        way = "slower" if v.slowdown > 0 else "faster"
        change = "" if v.base is None else f"{abs(v.slowdown):.0%} {way}"
        verdict = {"regression": "REGRESSION", "unjudged": "too few samples",
                   "new": "no baseline"}.get(v.status, v.status)
        if v.status in JUDGED and shared is None:
            verdict += f" (limit {_limit(v.limit)})"
        rows.append((v.name, _median(v.base, v.unit), _median(v.new, v.unit), change, verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"{r[0]:{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}  "
             f"{r[3]:>{widths[3]}}  {r[4]}" for r in rows]
    notes = [f"limit {_limit(shared)}"] if shared is not None else []
    if any(v.status == "noise" for v in judged):
        notes.append("noise: slower than the limit, within the runs' noise")
    few, new = (sum(v.status == s for v in verdicts) for s in ("unjudged", "new"))
    if not every and few + new:
        notes.append(", ".join(
            ([f"{few} more figure{'s' * (few > 1)}, too few timed samples to judge"] if few
             else []) + ([f"{new} new (none in the baseline)"] if new else []))
            + f": {shown_by}")
    return lines + ([f"({'; '.join(notes)})"] if notes else [])


def _median(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return (f"{value:,.0f}" if value >= 1000 else f"{value:.4g}") + f" {unit}"


def _limit(limit: float) -> str:
    """``10% slower``; from 1 (100 %) up, as a factor: ``50x as slow``."""
    return f"{limit:.0%} slower" if limit < 1 else f"{1 + limit:.3g}x as slow"


@dataclass(frozen=True)
class Limits:
    """Allowed slowdown per figure: ``default`` (``release.max_slowdown``) unless a pattern of
    ``by_name`` (``release.max_slowdown_figures``, fnmatch) matches the figure's name."""

    default: float = 0.1
    by_name: tuple[tuple[str, float], ...] = field(default_factory=tuple)

    def of(self, name: str) -> float:
        """The limit of figure ``name``: the first matching pattern's, else the default."""
        return next((v for pattern, v in self.by_name if fnmatch.fnmatchcase(name, pattern)),
                    self.default)


def limits(settings: Settings) -> Limits:
    """The limits the settings give (``release.max_slowdown`` and, per figure,
    :func:`paddlecd.config.slowdown_figures`).

    Raises:
        ConfigError: as :func:`paddlecd.config.slowdown_figures`.
    """
    return Limits(settings.release.max_slowdown, slowdown_figures(settings))


def judge(new: Figure, base: Figure | None, limit: float) -> Verdict:
    """The verdict on one figure (rules: the module docstring)."""
    if base is None:
        return Verdict(new.name, new.unit, None, new.value, new_spread=new.spread, status="new")
    slowdown = new.slowdown(base)
    status = "ok"
    if min(new.samples, base.samples) < MIN_SAMPLES:
        status = "unjudged"
    elif slowdown > limit:
        noise = NOTCH * (new.spread * new.value / math.sqrt(new.samples)
                         + base.spread * base.value / math.sqrt(base.samples))
        status = "regression" if abs(new.value - base.value) > noise else "noise"
    return Verdict(new.name, new.unit, base.value, new.value, base.spread, new.spread,
                   round(slowdown, 4), limit, status)


def compare(candidate: Sequence[Figure], baseline: Sequence[Figure], *, digest: str,
            hardware: str, limits: Limits, release: str, baseline_digest: str, tag: str,
            accept: str | None = None, who: str | None = None) -> Comparison:
    """Compare the ``candidate``'s figures on ``hardware`` with the ``baseline``'s on the same
    class; ``accept`` (the ``--accept-regression`` reason) turns a refusal into ``accepted``."""
    base = {f.name: f for f in baseline if f.hardware == hardware}
    if not base:
        return not_compared(digest, hardware, f"no baseline on {hardware}",
                            release=release, baseline_digest=baseline_digest, tag=tag)
    verdicts = tuple(judge(f, base.get(f.name), limits.of(f.name))
                     for f in candidate if f.hardware == hardware)
    refused = any(v.status == "regression" for v in verdicts)
    status = ("accepted" if accept else "refused") if refused else "passed"
    unmatched = tuple(p for p, _ in limits.by_name
                      if not any(fnmatch.fnmatchcase(v.name, p) for v in verdicts))
    return Comparison(status, hardware, digest, release, baseline_digest, tag, "", verdicts,
                      accept if refused else None, who if refused else None,
                      unmatched=unmatched)


def check_accept(comparison: Comparison | None, accept: str | None) -> None:
    """Refuse an ``--accept-regression`` reason the gate has no use for: it passed or compared
    nothing (the record keeps a reason only for a refusal, so it would be dropped unsaid). No
    comparison (an existing release, repaired or re-run) takes it silently, so re-runs converge.

    Raises:
        ConfigError: naming the flag and the gate's result.
    """
    if not accept or comparison is None or comparison.status not in ("passed", "not compared"):
        return
    did = "passed" if comparison.status == "passed" else "compared nothing"
    why = comparison.note or f"against {comparison.baseline}"
    raise ConfigError(f"--accept-regression: nothing to accept, the upgrade gate {did} ({why})",
                      "drop --accept-regression; it is for a gate that refuses")


def not_compared(digest: str, hardware: str, note: str, **where: str | None) -> Comparison:
    """A comparison that could not be made, saying why (``note``)."""
    return Comparison("not compared", hardware, digest, where.get("release"),
                      where.get("baseline_digest"), where.get("tag"), note)


def record_figures(figures: Sequence[Figure]) -> list[dict[str, Any]]:
    """The figures as a ledger record keeps them (what the next promotion compares with); the
    record names their hardware class once (``gate["hardware"]``)."""
    return [f.to_json(hardware=False) for f in figures]


def baseline_of(state: State, version: semver.Version, variant: str
                ) -> tuple[str, semver.Version, str] | None:
    """``(moving tag, its release version, digest)`` the candidate is compared with: what
    ``X.Y-<variant>`` points at in the ledger's ``state`` before this promotion, else
    ``latest-<variant>``; None on a first release."""
    for tag in (f"{version.major}.{version.minor}-{variant}", f"latest-{variant}"):
        at, digest = state.moving.get(tag), state.digest_of(tag)
        if at is not None and digest:
            return tag, at, digest
    return None


def _record_of(client: RegistryClient, repository: str, variant: str, version: str,
               digest: str, records: Sequence[Record]) -> Record | None:
    """The promote record of ``version`` on ``digest``: among ``records`` (the plan's read), else
    the head when it is that record (one GET), else None."""
    same = [r for r in records if (r.action, r.version, r.digest) == ("promote", version, digest)]
    if same:
        return same[-1]
    try:
        head = ledger.fetch(client, repository, ledger.head_tag(variant))
    except NotFoundError:
        return None
    if head and (head.action, head.version, head.digest) == ("promote", version, digest):
        return head
    return None


def baseline_figures(settings: Settings, client: RegistryClient, repository: str, *,
                     variant: str, version: str, digest: str,
                     records: Sequence[Record]) -> tuple[Figure, ...]:
    """The figures of release ``version`` (``digest``): those its ledger record keeps (copied
    from the attestation its promotion verified), else those of its newest passing attestation
    in the release repository (verified with ``release.trusted_keys``); empty when neither has
    any.

    Raises:
        RegistryError: the registry failed.
    """
    record = _record_of(client, repository, variant, version, digest, records)
    kept = (record.gate or {}).get("figures") if record else None
    if isinstance(kept, list):
        hardware = str((record.gate or {}).get("hardware") or "") if record else ""
        return tuple(f for item in kept if isinstance(item, Mapping)
                     and (f := Figure.from_json(item, hardware)))
    from paddlecd.signing import keys
    from paddlecd.verify import stored

    try:
        found = stored.runs(client, repository, digest, keys.trusted(settings))
    except SigningKeyError:
        return ()
    passing = [r.verified for r in found if r.verified and r.verified.passed
               and len(r.verified.predicate.get("nodes") or ()) <= 1]
    return from_predicate(max(passing, key=lambda a: a.created).predicate) if passing else ()


def model_problems(settings: Settings, attestation: VerifiedAttestation | None) -> list[str]:
    """One line per model of ``release.models`` that the candidate's signed run did not pass:
    ``ranker@1.2.0: legacy-in-pir (<cause>)``, or ``ranker: not checked in this image``.

    Raises:
        ConfigError: a bad ``release.models``.
    """
    from paddlecd.verify.models import ModelResult, wanted

    listed = wanted(settings)
    if not listed or attestation is None:
        return []
    results = [ModelResult.from_json(m) for m in attestation.predicate.get("models") or ()
               if isinstance(m, Mapping)]
    problems = []
    for name, version in listed:
        mine = [r for r in results if r.model.partition("@")[0] == name
                and (version is None or r.model == f"{name}@{version}")]
        if not mine:
            problems.append(f"{name}{'@' + version if version else ''}: not checked in this "
                            "image (run: invoke verify --models)")
        problems += [f"{r.model}: {r.code} ({r.cause})" for r in mine if not r.passed]
    return problems


def gate(settings: Settings, client: RegistryClient, repository: str, *, variant: str,
         version: semver.Version, digest: str, state: State, records: Sequence[Record],
         attestation: VerifiedAttestation | None, accept: str | None = None) -> Comparison:
    """The upgrade gate of promoting ``digest`` to ``version``: its attested figures against
    the baseline's (:func:`baseline_of`) on the same hardware class, and the models of
    ``release.models`` in the candidate (:func:`model_problems`).

    Raises:
        ConfigError: a bad ``release.max_slowdown_figures`` or ``release.models``.
        RegistryError: the registry failed.
    """
    result = _figures_gate(settings, client, repository, variant=variant, version=version,
                           digest=digest, state=state, records=records,
                           attestation=attestation, accept=accept)
    problems = tuple(model_problems(settings, attestation))
    if not problems:
        return result
    status = "accepted" if accept else "refused"
    return dataclasses.replace(result, status=status, models=problems,
                               reason=accept or None, who=files.who() if accept else None)


def _figures_gate(settings: Settings, client: RegistryClient, repository: str, *, variant: str,
                  version: semver.Version, digest: str, state: State, records: Sequence[Record],
                  attestation: VerifiedAttestation | None, accept: str | None) -> Comparison:
    allowed = limits(settings)
    figures = from_predicate(attestation.predicate) if attestation else ()
    hardware = str(attestation.predicate.get("hardware") or "") if attestation else ""
    found = baseline_of(state, version, variant)
    if found is None:
        return not_compared(digest, hardware or "?", f"no baseline: neither {version.major}."
                            f"{version.minor}-{variant} nor latest-{variant} names a release")
    tag, at, base_digest = found
    where = {"release": f"{at}-{variant}", "baseline_digest": base_digest, "tag": tag}
    if base_digest == digest:
        return not_compared(digest, hardware, f"{tag} already points at this digest", **where)
    if not figures or not hardware:
        why = ("no attestation (--force)" if attestation is None else
               "an attestation without figures (a failed or incomplete run, or one verified "
               "by an older paddlecd)")
        return not_compared(digest, hardware or "?", f"the candidate has {why}", **where)
    base = baseline_figures(settings, client, repository, variant=variant, version=str(at),
                            digest=base_digest, records=records)
    return compare(figures, base, digest=digest, hardware=hardware, limits=allowed,
                   release=f"{at}-{variant}", baseline_digest=base_digest, tag=tag,
                   accept=accept, who=files.who() if accept else None)


def ledger_gate(comparison: Comparison | None,
                attestation: VerifiedAttestation | None) -> dict[str, Any] | None:
    """What a ledger record keeps of the gate: the comparison and the release's own figures
    (the next promotion's baseline)."""
    if comparison is None:
        return None
    figures = from_predicate(attestation.predicate) if attestation else ()
    hardware = figures[0].hardware if figures else comparison.hardware
    return {**comparison.to_json(), "hardware": hardware, "figures": record_figures(figures)}
