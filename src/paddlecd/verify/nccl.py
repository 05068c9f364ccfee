"""NCCL's own account of a run: the transports it chose, parsed from ``NCCL_DEBUG=INFO`` lines.

NCCL logs one line per channel connection (``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC``; between
nodes ``via NET/IB/0/GDRDMA`` or ``via NET/Socket/0``), ``Using network IB|Socket`` once per
communicator, and ``NVLS`` lines when NVLink SHARP is set up (NVIDIA/nccl src/transport/*.cc,
src/transport/nvls.cc). Pure: lines in, names out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Names as the issue asks for them: IB (InfiniBand or RoCE), Socket (TCP), P2P (NVLink or PCIe
# peer-to-peer), SHM (host shared memory), NVLS (NVLink SHARP), CollNet (in-network reduction).
_PATTERNS = (
    ("IB", re.compile(r"via NET/IB|Using network IB|NET/IB : Using")),
    ("Socket", re.compile(r"via NET/Socket|Using network Socket")),
    ("P2P", re.compile(r"via P2P/")),
    ("SHM", re.compile(r"via SHM/")),
    ("NVLS", re.compile(r"Connected NVLS|NVLS comm|via NVLS|\d+ nvls channels")),
    ("CollNet", re.compile(r"via COLLNET|CollNet.*(?:[Cc]onnected|enabled)")),
)
NAMES = tuple(name for name, _ in _PATTERNS)  # every transport name, in the order reported


def transports(lines: Iterable[str]) -> tuple[str, ...]:
    """The transports NCCL reported in ``lines`` (``NCCL INFO`` lines; others are ignored), in the
    order of :data:`_PATTERNS`; empty when NCCL logged nothing (``NCCL_DEBUG`` unset, or gloo)."""
    seen: set[str] = set()
    for line in lines:
        if "NCCL INFO" not in line:
            continue
        seen.update(name for name, pattern in _PATTERNS if pattern.search(line))
    return tuple(name for name in NAMES if name in seen)
