"""AllReduce worker, started by paddle.distributed.launch (NCCL on GPU, gloo on CPU).

Every rank fills element i with (rank+1)·(i mod 13 + 1); after a SUM all-reduce each element must be
exactly (i mod 13 + 1)·n(n+1)/2 — small integers, exact in every dtype tested. Bandwidth follows
nccl-tests' definitions (doc/PERFORMANCE.md): algbw = S / t with S the message size in bytes, and
busbw = algbw · 2(n−1)/n for all-reduce. On GPU a float32 sweep up to 1 GiB follows (nccl-tests
``-e 1G``), its sums checked on several iterations, not only the first (nccl-tests ``-c``).
"""

from __future__ import annotations

import json
import time

import numpy as np
import paddle
import paddle.distributed as dist
from _common import init_worker
from _figures import figure, repeat

CPU_SIZES = [1, 1024, 65536, 1 << 20]  # elements
GPU_SIZES = [1, 1024, 1 << 20, 16 << 20]  # GPU-only: larger messages
GPU_SWEEP = [1 << p for p in range(10, 29, 2)]  # GPU-only: float32 elements, 4 KiB … 1 GiB
DATA_CHECKS = 5  # GPU-only: iterations whose sums are checked
# NumPy arrays of one message's size a rank holds at once in one(): the input and the expected
# sums, then the result's copy and the comparison mask (a byte per element); the rank-scaled
# input is freed before the copy. verify/budget.py sizes a GPU node's memory from it.
HOST_BUFFERS = 4
DTYPES = ["float32", "float64", "int32", "int64"]
LATENCY_ITERS, LATENCY_WARMUP = 50, 5  # one-element all-reduces timed one by one


def busbw(algbw: float, world_size: int) -> float:
    """All-reduce bus bandwidth from algorithm bandwidth (nccl-tests PERFORMANCE.md)."""
    return algbw * 2 * (world_size - 1) / world_size


def one(size: int, dtype: str, rank: int, n: int, iters: int, checks: int = 1) -> dict:
    base = np.resize(np.arange(1, 14, dtype=dtype), size)  # i mod 13 + 1, no int64 temporaries
    expected = base * (n * (n + 1) // 2)
    wrong = 0
    for _ in range(checks):  # correctness passes: a fresh buffer each, every result compared
        x = paddle.to_tensor(base * (rank + 1))
        dist.all_reduce(x)
        wrong += int(np.count_nonzero(x.numpy() != expected))
    y = paddle.to_tensor(base)
    loops = []  # seconds per all-reduce, one mean per timed loop (verify.repeat loops)
    for _ in range(repeat()):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(y)
        paddle.device.synchronize() if paddle.is_compiled_with_cuda() else None
        loops.append((time.perf_counter() - start) / iters)
    seconds = sorted(loops)[len(loops) // 2]
    nbytes = size * np.dtype(dtype).itemsize
    algbw = nbytes / seconds / 1e9
    return {
        "elements": size,
        "dtype": dtype,
        "bytes": nbytes,
        "wrong": wrong,
        "time_us": seconds * 1e6,
        "algbw_GBps": algbw,
        "busbw_GBps": busbw(algbw, n),
        "busbw_samples": [busbw(nbytes / t / 1e9, n) for t in loops],
    }


def latency(n: int) -> dict:
    """The small-message latency figure: one-element float32 all-reduces timed one by one (µs),
    after :data:`LATENCY_WARMUP` untimed ones."""
    x = paddle.to_tensor(np.ones(1, "float32"))
    times = []
    for i in range(LATENCY_WARMUP + LATENCY_ITERS * repeat()):
        start = time.perf_counter()
        dist.all_reduce(x)
        paddle.device.synchronize() if paddle.is_compiled_with_cuda() else None
        if i >= LATENCY_WARMUP:
            times.append((time.perf_counter() - start) * 1e6)
    return figure("allreduce.latency.4B", times, "us")


def figures(results: list[dict], n: int) -> list[dict]:
    """busbw per float32 message size (GB/s; the sweep's sizes on GPU) and the latency."""
    rows = {r["bytes"]: r for r in results if r["dtype"] == "float32"}  # the sweep's row wins
    return [figure(f"allreduce.busbw.{nbytes}B", r["busbw_samples"], "GB/s", better="higher")
            for nbytes, r in sorted(rows.items()) if nbytes > 4] + [latency(n)]


def run(device: str, rank: int, n: int) -> dict:
    """The AllReduce check on an initialised process group: every size and dtype's sums, the GPU
    sweep, the figures. Returns the result document (``world_size``, ``backend``, ``results``,
    ``figures``); every rank takes part, rank 0's document is the one reported."""
    sizes = GPU_SIZES if device == "gpu" else CPU_SIZES
    results = [one(s, d, rank, n, iters=5 if s >= 1 << 20 else 20) for s in sizes for d in DTYPES]
    if device == "gpu":  # GPU-only: the bandwidth sweep judged against verify/bandwidth.py
        results += [one(s, "float32", rank, n, iters=20, checks=DATA_CHECKS) for s in GPU_SWEEP]
    backend = "nccl" if device == "gpu" else "gloo"
    measured = figures(results, n)  # every rank takes part in the latency all-reduces
    wrong = sum(r["wrong"] for r in results)  # each rank's own log says what it saw
    print(f"allreduce: rank {rank}/{n} {backend}: {len(results)} results, {wrong} wrong",
          flush=True)
    return {"world_size": n, "backend": backend, "results": results, "figures": measured}


def main() -> None:
    args, rank, n = init_worker(__doc__)
    result = run(args.device, rank, n)
    if rank == 0:
        with open(args.out, "w") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
