"""Figures: the speed numbers of a verify run (training throughput, busbw, latency, export and
inference times), each with its unit and the hardware class it was measured on.

The smoke suite measures them and computes the median and spread (smoke/_figures.py); this module
reads them back from the checks' ``figures`` and ``hardware`` metrics into typed records, which
the evidence carries and verify signs (``predicate.figures``, ``predicate.hardware``). Release
gates compare them (:mod:`paddlecd.release.gates`). Docs: docs/guides/upgrade-gates.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

HARDWARE_CHECK = "environment/test_hardware_class"


@dataclass(frozen=True)
class Figure:
    """One measured figure.

    Attributes:
        name: e.g. ``train.throughput``, ``allreduce.busbw.4194304B``, ``export.latency.batch1``.
        value: the median of ``samples`` timed repetitions, in ``unit`` (``ms``, ``us``,
            ``samples/s``, ``GB/s``). better: ``lower`` (times) or ``higher`` (rates).
        spread: interquartile range / median (0.05 = 5 %). samples: how many were timed.
        hardware: the class it ran on (``"2x NVIDIA H100 80GB HBM3"``, ``"<CPU model> (2 cores)"``).
    """

    name: str
    value: float
    unit: str
    better: str = "lower"
    spread: float = 0.0
    samples: int = 1
    hardware: str = ""

    def slowdown(self, base: Figure) -> float:
        """How much slower this is than ``base`` as a fraction (0.2: 20 % slower; negative:
        faster): the ratio of times, or of rates inverted."""
        if self.better == "higher":
            return base.value / self.value - 1 if self.value else float("inf")
        return self.value / base.value - 1 if base.value else 0.0

    def to_json(self, *, hardware: bool = True) -> dict[str, Any]:
        """The figure as a JSON object; without ``hardware`` where a record names it once for
        all its figures (the evidence, a ledger record)."""
        data = dataclasses.asdict(self)
        return data if hardware else {k: v for k, v in data.items() if k != "hardware"}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], hardware: str = "") -> Figure | None:
        """A figure from its JSON object (``hardware`` when it names none); None when ``name``,
        ``value`` or ``unit`` is missing or of the wrong type (a record to ignore, not trust)."""
        name, value, unit = data.get("name"), data.get("value"), data.get("unit")
        if not (isinstance(name, str) and isinstance(unit, str)
                and isinstance(value, (int, float)) and not isinstance(value, bool)):
            return None
        better = "higher" if data.get("better") == "higher" else "lower"
        spread = data.get("spread") if isinstance(data.get("spread"), (int, float)) else 0.0
        samples = data.get("samples") if isinstance(data.get("samples"), int) else 1
        return cls(name, float(value), unit, better, float(spread), int(samples),
                   str(data.get("hardware") or hardware))


def hardware_of(checks: Iterable[Any]) -> str | None:
    """The hardware class the environment check recorded (None: an older smoke suite)."""
    for c in checks:
        metrics = c.metrics if hasattr(c, "metrics") else (c.get("metrics") or {})
        name = c.name if hasattr(c, "name") else c.get("name")
        if name == HARDWARE_CHECK and isinstance(metrics.get("hardware"), str):
            return metrics["hardware"]
    return None


def collect(checks: Iterable[Any]) -> tuple[Figure, ...]:
    """Every figure the passed checks recorded, tagged with the run's hardware class (checks
    are :class:`~paddlecd.verify.evidence.Check` records or their JSON objects)."""
    checks = list(checks)
    hardware = hardware_of(checks) or ""
    out: list[Figure] = []
    for c in checks:
        metrics = c.metrics if hasattr(c, "metrics") else (c.get("metrics") or {})
        for item in metrics.get("figures") or ():
            if isinstance(item, Mapping) and (f := Figure.from_json(item, hardware)):
                out.append(f)
    return tuple(out)


def from_predicate(predicate: Mapping[str, Any]) -> tuple[Figure, ...]:
    """The figures of a signed verify predicate: its ``figures`` list, or those its checks
    recorded (a predicate signed before the list was added)."""
    hardware = str(predicate.get("hardware") or "")
    listed = predicate.get("figures")
    if isinstance(listed, list):
        return tuple(f for item in listed if isinstance(item, Mapping)
                     and (f := Figure.from_json(item, hardware)))
    return collect(c for c in predicate.get("checks") or () if isinstance(c, Mapping))
