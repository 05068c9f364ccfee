"""Convergence: a fixed-step run on deterministic data reaches the loss threshold, and the
data-parallel run over all ranks matches the single-process run.

Threshold: measured on paddlepaddle 3.0.0 CPU (2026-11-29): initial loss 0.635, final loss 0.0615
after 400 SGD steps (lr 0.1) on 840 samples. The threshold 0.09 is ~1.5x the measurement: a broken
optimiser, autograd or kernel stays far above it (the untrained loss is 0.63), numeric noise across
builds and devices does not reach it. Tolerance: single-process vs 2-rank data-parallel differ only
in float32 summation order, measured 7.8e-8 relative; we allow 1e-4. On one card, or a number of
cards that does not split the 840 samples evenly, the data-parallel check is skipped with that
reason; a verify.cpu_ranks that does not split them fails it (the user chose it).
"""

from __future__ import annotations

import time

from _common import (
    N_SAMPLES,
    STEPS,
    collective,
    make_data,
    make_model,
    require_collective,
    set_device,
    train,
)
from _figures import figure, repeat

LOSS_THRESHOLD = 0.09
DP_RTOL = 1e-4
LOSS_EVERY = 20  # steps between the points of the recorded loss curve
WARMUP_STEPS = 20  # steps left out of the timing (allocator and kernel caches warm up)


def train_single(device: str, step_times: list[float] | None = None) -> list[float]:
    import paddle

    set_device(device)
    x, y = (paddle.to_tensor(a) for a in make_data())
    return train(make_model(), x, y, step_times=step_times)


def throughput(device: str, first: list[float]) -> list[dict]:
    """The training figures: step time and samples/s, medians of the timed steps after
    :data:`WARMUP_STEPS` of ``first`` (the convergence run's step times) and of
    ``verify.repeat`` − 1 more runs."""
    timed = first[WARMUP_STEPS:]
    for _ in range(repeat() - 1):
        more: list[float] = []
        train_single(device, more)
        timed += more[WARMUP_STEPS:]
    return [figure("train.step_time", [t * 1e3 for t in timed], "ms"),
            figure("train.throughput", [N_SAMPLES / t for t in timed], "samples/s",
                   better="higher")]


def test_single_process_reaches_threshold(expect, metric):
    start, step_times = time.perf_counter(), []
    losses = train_single(expect.device, step_times)
    metric("steps", STEPS)
    metric("initial_loss", losses[0])
    metric("final_loss", losses[-1])
    metric("loss_every", LOSS_EVERY)  # the curve drawn in the step summary (issue 14)
    metric("loss_curve", losses[::LOSS_EVERY] + losses[-1:])
    metric("train_seconds", time.perf_counter() - start)
    metric("warmup_steps", WARMUP_STEPS)
    metric("figures", throughput(expect.device, step_times))
    assert (
        losses[-1] < LOSS_THRESHOLD
    ), f"final loss {losses[-1]:.5f} ≥ threshold {LOSS_THRESHOLD} after {STEPS} steps"
    assert losses[-1] < losses[0] / 5, f"loss fell only from {losses[0]:.4f} to {losses[-1]:.4f}"


def test_data_parallel_matches_single_process(expect, metric):
    require_collective(expect)
    single = train_single(expect.device)[-1]
    result = collective(expect, "train_dp")
    dp = result["losses"][-1]
    rel = abs(dp - single) / max(abs(single), 1e-12)
    metric("world_size", result["world_size"])
    metric("single_final_loss", single)
    metric("dp_final_loss", dp)
    metric("relative_difference", rel)
    assert (
        rel <= DP_RTOL
    ), f"data-parallel loss {dp:.7f} vs single {single:.7f}: relative diff {rel:.2e} > {DP_RTOL}"
