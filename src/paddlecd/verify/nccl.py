"""NCCL's own account of a run: the transports it chose, parsed from ``NCCL_DEBUG=INFO`` lines.

Formats read from NVIDIA/nccl v2.21.5-1 (ab2b89c4c339bd7f816fbc114a4b05d386b66290) and master
(5067397c2676d5aed50042fc39e5c8ee96eb0027, v2.30): every line starts
``<host>:<pid>:<tid> [<dev>] NCCL INFO `` (src/debug.cc). A transport counts when NCCL connects
a channel through it: ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`` (src/transport/p2p.cc),
``… via SHM/direct`` (shm.cc), ``… [send] via NET/IB/0/GDRDMA`` or ``via NET/Socket/0`` (net.cc),
``CollNet 00/0 : 0 [send] via COLLNET/…`` and ``rank 0 Connected CollNet`` (coll_net.cc).
``Using network IB`` and ``NET/IB : Using …`` name the network plugin every process loads, on one
node too, so they do not count. NVLS counts only when the communicator has NVLS channels:
src/init.cc logs ``N coll channels, M collnet channels, K nvls channels, …`` on every
communicator (``K nvls channels`` alone before v2.19), with K = 0 without NVLink SHARP; M is
``comm->nChannels`` again, so it says nothing about CollNet. ``NVLS comm …`` and ``Connected NVLS
tree`` (src/transport/nvls.cc) are logged only when NVLS buffers are set up. Pure: lines in,
names out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Names as evidence reports them: IB (InfiniBand or RoCE), Socket (TCP), P2P (NVLink or PCIe
# peer-to-peer), SHM (host shared memory), NVLS (NVLink SHARP), CollNet (in-network reduction).
_PATTERNS = (
    ("IB", re.compile(r"via NET/IB")),  # IBext_v8: the RDMA/SHARP plugin's IB
    ("Socket", re.compile(r"via NET/Socket\b")),
    ("P2P", re.compile(r"via P2P/")),
    ("SHM", re.compile(r"via SHM/")),
    ("NVLS", re.compile(r"NVLS comm |Connected NVLS")),
    ("CollNet", re.compile(r"via COLLNET/|Connected CollNet")),
)
NAMES = tuple(name for name, _ in _PATTERNS)  # every transport name, in the order reported
_NVLS_CHANNELS = re.compile(r"\b(\d+) nvls channels\b")


def transports(lines: Iterable[str]) -> tuple[str, ...]:
    """The transports NCCL reported in ``lines`` (``NCCL INFO`` lines; others are ignored), in the
    order of :data:`NAMES`; empty when NCCL logged nothing (``NCCL_DEBUG`` unset, or gloo).

    NVLS is in the result when a channel summary line has ``K nvls channels`` with K > 0, or NVLS
    buffers were set up; ``0 nvls channels`` alone is not NVLS."""
    seen: set[str] = set()
    for line in lines:
        if "NCCL INFO" not in line:
            continue
        seen.update(name for name, pattern in _PATTERNS if pattern.search(line))
        if (nvls := _NVLS_CHANNELS.search(line)) and int(nvls.group(1)) > 0:
            seen.add("NVLS")
    return tuple(name for name in NAMES if name in seen)
