"""Figures side by side: two releases (or a release and a candidate digest), and a variant's
figures over its release history (``invoke release.compare``). Reads only; the rules of the gate
that promotion applies are :mod:`paddlecd.release.gates`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd import files
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, NoAttestationError, SigningKeyError
from paddlecd.release import query
from paddlecd.verify import charts
from paddlecd.verify.figures import Figure, from_predicate


@dataclass(frozen=True)
class Side:
    """One side of a comparison: what was named (``1.0.0-cpu``, ``sha256:…``), the image
    ``reference`` (``host/repo@sha256:…``), its hardware class and attested figures (empty: no
    passing signed run with figures)."""

    name: str
    reference: str
    hardware: str
    figures: tuple[Figure, ...]

    def to_json(self) -> dict[str, Any]:
        """The side as JSON."""
        return {"name": self.name, "reference": self.reference, "hardware": self.hardware,
                "figures": [f.to_json() for f in self.figures]}


@dataclass(frozen=True)
class Row:
    """One figure of both sides: ``a``, ``b`` the medians (None: that side lacks it), their
    spreads, and ``ratio`` b / a."""

    name: str
    unit: str
    better: str
    a: float | None
    b: float | None
    a_spread: float = 0.0
    b_spread: float = 0.0

    @property
    def ratio(self) -> float | None:
        """b / a (None when a side lacks the figure)."""
        return self.b / self.a if self.a and self.b is not None else None

    def to_json(self) -> dict[str, Any]:
        """The row as JSON, ``ratio`` included."""
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "ratio": self.ratio}


def side(settings: Settings, target: str, *, required: bool = False) -> Side:
    """The attested figures of ``target``: a release (``1.0.0-cpu``), a candidate digest
    (``sha256:…`` in the candidate repository) or an image reference; from its newest passing
    one-node signed run.

    ``required`` (a side release.compare names): no passing run is an error, not a column of
    dashes (a digest with no attestation, or none in the registry, compared "fine").

    Raises:
        ConfigError: not a release, digest or reference. SigningKeyError: no trusted keys.
        RegistryError: the registry failed. NoAttestationError: ``required`` and no passing
        one-node signed run.
    """
    name = target
    if target.startswith("sha256:"):
        target = f"{settings.candidate_repo}@{target}"
    ref, runs = query.evidence_of(settings, target)
    passing = [r.verified for r in runs if r.verified and r.verified.passed
               and len(r.verified.predicate.get("nodes") or ()) <= 1]
    if not passing and required:
        raise NoAttestationError(
            f"{name}: no passing one-node run of {ref} signed by a trusted key "
            f"({len(runs)} attestation(s) found): nothing to compare",
            f"check it: invoke evidence.show --target {ref}")
    if not passing:
        return Side(name, str(ref), "", ())
    newest = max(passing, key=lambda a: a.created)
    return Side(name, str(ref), str(newest.predicate.get("hardware") or ""),
                from_predicate(newest.predicate))


def rows(a: Side, b: Side) -> list[Row]:
    """Every figure of either side, in ``a``'s order then ``b``'s new ones."""
    fa, fb = {f.name: f for f in a.figures}, {f.name: f for f in b.figures}
    out = []
    for name in [*fa, *(n for n in fb if n not in fa)]:
        x, y = fa.get(name), fb.get(name)
        ref = x or y
        assert ref is not None
        out.append(Row(name, ref.unit, ref.better, x.value if x else None,
                       y.value if y else None, x.spread if x else 0.0, y.spread if y else 0.0))
    return out


def table(a: Side, b: Side) -> list[str]:
    """The comparison as aligned text lines (figure, unit, a ±spread, b ±spread, ratio)."""
    def cell(v: float | None, spread: float) -> str:
        return "—" if v is None else f"{v:.4g} ±{spread:.0%}"

    lines = [f"a: {a.name}  {a.reference}  on {a.hardware or '(no figures)'}",
             f"b: {b.name}  {b.reference}  on {b.hardware or '(no figures)'}"]
    if a.hardware and b.hardware and a.hardware != b.hardware:
        lines.append("note: other hardware classes — the figures are not comparable")
    lines.append(f"{'figure':28} {'unit':10} {'a':>16} {'b':>16} {'b/a':>7}")
    for r in rows(a, b):
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "—"
        lines.append(f"{r.name:28} {r.unit:10} {cell(r.a, r.a_spread):>16} "
                     f"{cell(r.b, r.b_spread):>16} {ratio:>7}")
    return lines


def history(settings: Settings, variant: str) -> list[tuple[str, tuple[Figure, ...]]]:
    """``[(version, figures)]`` of every release of ``variant``, oldest version first: the
    figures its ledger record keeps, else those of its signed attestation.

    Raises:
        ConfigError: an unknown variant, or one without releases. RegistryError.
    """
    releases = query.list_releases(settings, variant)
    if not releases:
        raise ConfigError(f"no releases of variant '{variant}'", "see: invoke release.list")
    out = []
    for record, _ in releases:
        kept = (record.gate or {}).get("figures")
        if isinstance(kept, list):
            hardware = str(record.gate.get("hardware") or "")
            figs = tuple(f for item in kept if (f := Figure.from_json(item, hardware)))
        else:
            try:
                figs = side(settings, f"{record.version}-{record.variant}").figures
            except SigningKeyError:
                figs = ()
        out.append((record.version, figs))
    return out


def series(points: Sequence[tuple[str, Sequence[Figure]]]) -> dict[str, dict[str, Any]]:
    """``{figure: {"unit", "points": [[version, value], …]}}`` over ``points``."""
    out: dict[str, dict[str, Any]] = {}
    for version, figs in points:
        for f in figs:
            entry = out.setdefault(f.name, {"unit": f.unit, "points": []})
            entry["points"].append([version, f.value])
    return out


def history_chart(settings: Settings, variant: str, out: Path | None = None,
                  ) -> tuple[Path, dict[str, dict[str, Any]]]:
    """Write the PNG of each figure over ``variant``'s releases (default
    ``<state>/charts/history-<variant>.png``) and its Markdown twin (mermaid, as verify's step
    summary draws); returns the PNG's path and the series drawn.

    Raises:
        ConfigError: no releases, or none with figures. RegistryError.
    """
    drawn = series(history(settings, variant))
    if not drawn:
        raise ConfigError(f"no release of '{variant}' has attested figures",
                          "promote a candidate verified by this paddlecd (its figures are kept)")
    path = out or settings.state / "charts" / f"history-{variant}.png"
    charts.history_png(drawn, path, title=f"{variant}: figures per release")
    files.write_text(path.with_suffix(".md"), "\n\n".join(
        charts.xychart(name, x_title="release", x_labels=[p[0] for p in s["points"]],
                       y_title=s["unit"], values=[p[1] for p in s["points"]])
        for name, s in drawn.items()) + "\n")
    return path, drawn
