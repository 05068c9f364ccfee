"""Bandwidth expectations: is the all-reduce busbw a run measured right for its cards?

``busbw`` follows nccl-tests (doc/PERFORMANCE.md): algbw · 2(n−1)/n for all-reduce, so it is
comparable across world sizes and 0 by definition on one rank. Each row of :data:`TABLE` is the
typical busbw at large messages (≥ 1 GiB) for one GPU model × cards per node × nodes ×
interconnect, with the public measurement it comes from. A result below ``fraction`` of its row
(``verify.busbw_fraction``, default 0.8) fails; a setup without a row is "no expectation" — a
warning, never a pass in disguise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paddlecd.verify.evidence import Check

CHECK_NAME = "allreduce/busbw_expectation"


@dataclass(frozen=True)
class Expectation:
    """One row: ``cards`` GPUs of ``gpu`` per node on ``nodes`` nodes joined by ``interconnect``
    reach ``busbw_GBps`` (GB/s, 1e9 bytes) all-reduce busbw at large messages, per ``source``."""

    gpu: str
    cards: int
    nodes: int
    interconnect: str
    busbw_GBps: float
    source: str


# Interconnects: "nvls" NVLink SHARP (NCCL's default all-reduce on NVSwitch H100/H200),
# "nvlink" NVLink ring/tree (NCCL_ALGO=Ring, or A100), "p2p" peer-to-peer over PCIe or an NVLink
# bridge, "ib" InfiniBand/RoCE between nodes, "socket" TCP between nodes.
TABLE: tuple[Expectation, ...] = (
    Expectation(
        gpu="A100-SXM",
        cards=8,
        nodes=1,
        interconnect="nvlink",
        busbw_GBps=230.0,
        source="NVIDIA/nccl-tests#149 (8×A100-SXM4-80GB ≈ 200–230 GB/s), "
        "NVIDIA/nccl-tests#175 (232.5 GB/s, one node, 4 GiB)",
    ),
    Expectation(
        gpu="H100-SXM",
        cards=8,
        nodes=1,
        interconnect="nvls",
        busbw_GBps=480.0,
        source="NVIDIA/nccl-tests#212 (sjeaugey: 8 GPUs with NVLink SHARP peak ≈ 480 GB/s)",
    ),
    Expectation(
        gpu="H100-SXM",
        cards=8,
        nodes=1,
        interconnect="nvlink",
        busbw_GBps=370.0,
        source="NVIDIA/nccl-tests#212 (sjeaugey: ≈ 370 GB/s effective NVLink, NCCL_ALGO=RING)",
    ),
    Expectation(
        gpu="H200-SXM",
        cards=8,
        nodes=1,
        interconnect="nvls",
        busbw_GBps=475.0,
        source="NVIDIA/nccl-tests#272 (8×H200 ≈ 475 GB/s)",
    ),
    Expectation(
        gpu="H100-PCIe",
        cards=2,
        nodes=1,
        interconnect="p2p",
        busbw_GBps=115.0,
        source="NVIDIA/nccl-tests#194 (2×H100 PCIe, NVLink bridge: 115–116 GB/s at 1–4 GiB)",
    ),
    Expectation(
        gpu="A100-SXM",
        cards=8,
        nodes=3,
        interconnect="ib",
        busbw_GBps=96.0,
        source="NVIDIA/nccl-tests#119 (3 nodes × 8×A100-SXM4-40GB, 4×HDR IB: peak 96 GB/s)",
    ),
)

# What cudaGetDeviceProperties().name and nvidia-smi say → the table's model name. The product
# names are the driver's (NVIDIA/open-gpu-kernel-modules 560.31.02 README.md, "Compatible GPUs"):
# "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA H100 PCIe",
# "NVIDIA H100 NVL", "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H200", "NVIDIA GH200 480GB". \b keeps
# H200 off GH200 (the Grace Hopper superchip, which has no row); the 40 GB A100 spells PCIE.
_MODELS = (
    (r"\bA100-SXM", "A100-SXM"),
    (r"\bA100\b.*\bPCI[Ee]\b", "A100-PCIe"),
    (r"\bH100\b.*\bPCI[Ee]\b", "H100-PCIe"),
    (r"\bH100 NVL\b", "H100-NVL"),
    (r"\bH100\b", "H100-SXM"),
    (r"\bH200 NVL\b", "H200-NVL"),
    (r"\bH200\b", "H200-SXM"),
)


def gpu_model(name: str) -> str:
    """The table's model for a CUDA device name: ``"NVIDIA H100 80GB HBM3"`` → ``"H100-SXM"``;
    an unknown name comes back without its ``NVIDIA `` prefix."""
    for pattern, model in _MODELS:
        if re.search(pattern, name):
            return model
    return name.removeprefix("NVIDIA ").strip()


def interconnect(model: str, *, nodes: int, transports: Iterable[str]) -> str:
    """The table's interconnect for a run: between nodes ``ib`` or ``socket`` (the NCCL
    transport); on one node ``nvls`` when NCCL used NVLink SHARP, else ``nvlink`` on SXM parts
    and ``p2p`` on PCIe ones. ``transports`` are :func:`paddlecd.verify.nccl.transports` names."""
    seen = set(transports)
    if nodes > 1:
        return "ib" if "IB" in seen else "socket"
    if "NVLS" in seen:
        return "nvls"
    return "nvlink" if model.endswith("-SXM") else "p2p"


def expectation(model: str, *, cards: int, nodes: int, link: str) -> Expectation | None:
    """The row for this setup, or None (no expectation)."""
    return next(
        (
            e
            for e in TABLE
            if (e.gpu, e.cards, e.nodes, e.interconnect) == (model, cards, nodes, link)
        ),
        None,
    )


@dataclass(frozen=True)
class Judgement:
    """``verdict``: ``pass``, ``below``, ``no-expectation`` or ``one-card``; ``measured_GBps`` the
    busbw at the largest message (``message_bytes``); ``expected`` the row used (or None)."""

    verdict: str
    message: str
    measured_GBps: float
    message_bytes: int = 0
    expected: Expectation | None = None

    def to_check(self, fraction: float) -> Check:
        """As an evidence check: ``below`` fails; ``no-expectation``/``one-card`` are skipped with
        their reason (and are warnings in the evidence), never a silent pass."""
        e = self.expected
        metrics: dict[str, Any] = {
            "verdict": self.verdict,
            "measured_GBps": self.measured_GBps,
            "message_bytes": self.message_bytes,
            "fraction": fraction,
        }
        if e:
            metrics.update(
                expected_GBps=e.busbw_GBps,
                source=e.source,
                setup=f"{e.nodes}×{e.cards}×{e.gpu} {e.interconnect}",
            )
        return Check(
            name=CHECK_NAME,
            passed=self.verdict != "below",
            skipped=self.verdict in ("no-expectation", "one-card"),
            metrics=metrics,
            message="" if self.verdict == "pass" else self.message,
        )


def judge(
    results: Sequence[Mapping[str, Any]],
    *,
    gpu_name: str,
    cards: int,
    nodes: int = 1,
    transports: Iterable[str] = (),
    fraction: float = 0.8,
) -> Judgement:
    """Compare a sweep's busbw at its largest message with the table.

    Args:
        results: the allreduce worker's rows (``bytes``, ``busbw_GBps``, …), nccl-tests-like.
        gpu_name: CUDA device name. cards: GPUs per node. nodes: node count.
        transports: NCCL transports seen (``IB``, ``Socket``, ``P2P``, ``SHM``, ``NVLS``).
        fraction: the share of the expectation a result must reach (``verify.busbw_fraction``).
    """
    if cards * nodes < 2:
        return Judgement(
            verdict="one-card",
            message="one card: busbw is 0 by definition (2(n−1)/n with n = 1, "
            "nccl-tests PERFORMANCE.md); no bandwidth check on a single rank",
            measured_GBps=0.0,
        )
    largest = max(results, key=lambda r: (r["bytes"], r["busbw_GBps"]))
    measured, size = float(largest["busbw_GBps"]), int(largest["bytes"])
    model = gpu_model(gpu_name)
    link = interconnect(model, nodes=nodes, transports=transports)
    row = expectation(model, cards=cards, nodes=nodes, link=link)
    at = f"busbw {measured:.1f} GB/s at {size / 2**20:.0f} MiB"
    if row is None:
        return Judgement(
            verdict="no-expectation",
            message=f"no expectation for {nodes}×{cards}×{model} over {link}:"
            f" {at} not judged (add a sourced row to verify/bandwidth.py)",
            measured_GBps=measured,
            message_bytes=size,
        )
    setup = f"{nodes}×{cards}×{model} over {link}"
    if measured < fraction * row.busbw_GBps:
        return Judgement(
            verdict="below",
            message=f"{at} is below {fraction:g} × {row.busbw_GBps:g} GB/s expected for"
            f" {setup} (source: {row.source})",
            measured_GBps=measured,
            message_bytes=size,
            expected=row,
        )
    return Judgement(
        verdict="pass",
        message=f"{at} ≥ {fraction:g} × {row.busbw_GBps:g} GB/s ({setup})",
        measured_GBps=measured,
        message_bytes=size,
        expected=row,
    )


def check(
    checks: Sequence[Check], *, fraction: float, nodes: int = 1, transports: Iterable[str] = ()
) -> Check:
    """The busbw expectation check of a GPU run, from its smoke checks: the allreduce results and
    world size, and the ``gpu_name`` ``environment/test_gpu_devices_visible`` recorded.

    A run whose allreduce check was skipped (one card) gets the ``one-card`` check; one without
    results (the allreduce failed) gets a failed check saying so.
    """
    metrics = {k: v for c in checks for k, v in c.metrics.items()}
    allreduce = next((c for c in checks if c.name == "allreduce/test_allreduce_exact_sums"), None)
    gpu_name = str(metrics.get("gpu_name", "unknown GPU"))
    cards = int(metrics.get("device_count") or 0)
    if (allreduce is None or allreduce.skipped) and cards * nodes < 2:
        return judge([], gpu_name=gpu_name, cards=cards, nodes=nodes).to_check(fraction)
    if allreduce is None or allreduce.skipped:
        return Check(
            name=CHECK_NAME,
            passed=True,
            skipped=True,
            metrics={"verdict": "skipped"},
            message=f"the allreduce check did not run on {cards} cards: busbw not judged",
        )
    results = allreduce.metrics.get("results") or []
    if not results:
        return Check(
            name=CHECK_NAME,
            passed=False,
            message="no all-reduce results to judge (the allreduce check failed)",
        )
    per_node = int(allreduce.metrics.get("world_size", cards * nodes)) // max(nodes, 1)
    return judge(
        results,
        gpu_name=gpu_name,
        cards=per_node,
        nodes=nodes,
        transports=transports,
        fraction=fraction,
    ).to_check(fraction)
