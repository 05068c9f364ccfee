"""The memory and ``/dev/shm`` a GPU node of ``verify --nodes`` gets: a stated per-rank budget.

Each rank of smoke/workers/allreduce.py holds ``HOST_BUFFERS`` NumPy arrays of its largest message
(the float32 sweep ends at 2^28 elements, 1 GiB, as nccl-tests ``-e 1G``), one more for Paddle's
host copy when a tensor crosses to or from the card, and the process itself (Python, Paddle, the
CUDA context, NCCL's host side). NCCL's SHM transport keeps each connection's buffers in
``/dev/shm``: one buffer per protocol, LL + LL128 + Simple (NVIDIA/nccl v2.21.5-1
ab2b89c4c339bd7f816fbc114a4b05d386b66290, src/init.cc ``DEFAULT_LL_BUFFSIZE``,
``DEFAULT_LL128_BUFFSIZE``, ``DEFAULT_BUFFSIZE``; src/transport/shm.cc sums ``buffSizes``), for a
ring send and receive on each of ``MAXCHANNELS`` channels (src/include/device.h). A pod's
``/dev/shm`` is a memory-backed emptyDir, which counts against its memory limit
(cluster/jobfile.py), so the node's memory includes it.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30

SWEEP_MAX_BYTES = GIB  # smoke/workers/allreduce.py: the largest GPU_SWEEP message, float32 bytes
NUMPY_BUFFERS = 4  # smoke/workers/allreduce.py HOST_BUFFERS (tests/unit/test_verify_budget.py)
PADDLE_COPIES = 1  # Paddle's host-side copy in paddle.to_tensor / Tensor.numpy()
PROCESS_BYTES = 2 * GIB  # Python + Paddle GPU + CUDA context + NCCL host side, per rank
LAUNCHER_BYTES = GIB  # the node's paddle.distributed.launch process (it imports paddle)

_LL = 8 * 512 * 8 * 16  # NCCL_LL_LINES_PER_THREAD · NCCL_LL_MAX_NTHREADS · NCCL_STEPS · 16 B
_LL128 = 120 * 640 * 8 * 8  # NCCL_LL128_ELEMS_PER_THREAD · NCCL_LL128_MAX_NTHREADS · STEPS · 8 B
_SIMPLE = 1 << 22  # DEFAULT_BUFFSIZE, 4 MiB
SHM_CONNECTION_BYTES = _LL + _LL128 + _SIMPLE  # 9633792 B ≈ 9.2 MiB
SHM_CONNECTIONS = 2 * 32  # ring send + receive on each of MAXCHANNELS (32) channels


@dataclass(frozen=True)
class Budget:
    """One rank's host bytes and ``/dev/shm`` bytes, and what a node of ``ranks`` of them needs."""

    rank_bytes: int
    shm_rank_bytes: int

    def node_shm(self, ranks: int) -> int:
        """``/dev/shm`` bytes of a node with ``ranks`` GPU ranks."""
        return ranks * self.shm_rank_bytes

    def node_memory(self, ranks: int) -> int:
        """Memory limit bytes of a node: its ranks, the launcher, and the memory-backed shm."""
        return ranks * self.rank_bytes + LAUNCHER_BYTES + self.node_shm(ranks)


def allreduce_sweep(max_bytes: int = SWEEP_MAX_BYTES) -> Budget:
    """The per-rank budget of the AllReduce sweep whose largest message is ``max_bytes`` bytes."""
    held = (NUMPY_BUFFERS + PADDLE_COPIES) * max_bytes
    return Budget(
        rank_bytes=PROCESS_BYTES + held,
        shm_rank_bytes=SHM_CONNECTIONS * SHM_CONNECTION_BYTES,
    )


def quantity(nbytes: int) -> str:
    """``nbytes`` as a Kubernetes quantity in whole MiB, rounded up (``"6144Mi"``)."""
    return f"{-(-nbytes // MIB)}Mi"


def gpu_node(gpus_per_node: int) -> tuple[str, str]:
    """``(memory, shm)`` quantities of a GPU node of ``verify --nodes`` with ``gpus_per_node``
    ranks (one per card).

    Raises:
        ValueError: ``gpus_per_node`` is below 1.
    """
    if gpus_per_node < 1:
        raise ValueError(f"a GPU node has at least one rank, not {gpus_per_node}")
    budget = allreduce_sweep()
    return quantity(budget.node_memory(gpus_per_node)), quantity(budget.node_shm(gpus_per_node))
