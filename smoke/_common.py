"""Shared smoke code: the expectations, the tiny model, deterministic data, and the launcher helper.

Imported both by the pytest process and by the worker scripts started with
``python -m paddle.distributed.launch`` (which get ``PYTHONPATH`` pointing at this folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _devices import device_index, launch_devices

SMOKE_DIR = Path(__file__).resolve().parent

# Model and data sizes: small enough for 2 CPU cores, big enough that the loss curve means
# something.
# 840 = lcm(1..8): every world size up to 8 gets equal shards, so data parallel equals one process.
D_IN, D_HIDDEN, N_SAMPLES = 8, 32, 840
STEPS, LR = 400, 0.1


@dataclass(frozen=True)
class Expect:
    """What the image must provide, from ``SMOKE_*`` variables (see smoke/README.md)."""

    device: str
    paddle: str | None
    cuda: str | None
    cudnn: str | None
    gpus: int
    cpu_ranks: int
    out: Path

    @property
    def ranks(self) -> int:
        """World size of the collective checks: all cards on GPU, ``cpu_ranks`` processes on CPU."""
        return self.gpus if self.device == "gpu" else self.cpu_ranks

    @classmethod
    def from_env(cls) -> Expect:
        out = Path(os.environ.get("SMOKE_OUT") or tempfile.mkdtemp(prefix="smoke-out-"))
        return cls(
            device=os.environ.get("SMOKE_DEVICE", "cpu"),
            paddle=os.environ.get("SMOKE_EXPECT_PADDLE") or None,
            cuda=os.environ.get("SMOKE_EXPECT_CUDA") or None,
            cudnn=os.environ.get("SMOKE_EXPECT_CUDNN") or None,
            gpus=int(os.environ.get("SMOKE_GPUS", "0")),
            cpu_ranks=int(os.environ.get("SMOKE_CPU_RANKS", "2")),
            out=out,
        )


def is_gpu_run() -> bool:
    """True when the image under test is a GPU variant (``SMOKE_DEVICE=gpu``)."""
    return os.environ.get("SMOKE_DEVICE", "cpu") == "gpu"


def make_data(rank: int = 0, world_size: int = 1):
    """Deterministic regression data ``(x [N/ws, D_IN], y [N/ws, 1])`` float32; rank ``r`` gets rows
    r::ws."""
    import numpy as np

    rng = np.random.default_rng(20261129)
    x = rng.standard_normal((N_SAMPLES, D_IN)).astype("float32")
    w1 = rng.standard_normal((D_IN, 4)).astype("float32")
    y = (np.tanh(x @ w1) @ np.ones((4, 1), "float32") * 0.5).astype("float32")
    return x[rank::world_size], y[rank::world_size]


def make_model():
    """A 2-layer MLP, seeded initialisation (identical on every rank and in single-process runs)."""
    import paddle

    paddle.seed(7)
    return paddle.nn.Sequential(
        paddle.nn.Linear(D_IN, D_HIDDEN), paddle.nn.Tanh(), paddle.nn.Linear(D_HIDDEN, 1)
    )


def set_device(expect_device: str) -> str:
    """Select the device for this process: on GPU images the card the launcher gave it
    (:func:`_devices.device_index` of its environment), ``cpu`` otherwise.

    Raises:
        ValueError: GPU-only: the launcher's card is not visible (the rank and world size said).
    """
    import paddle

    if expect_device == "gpu":  # GPU-only
        index = device_index(os.environ, cards=paddle.device.cuda.device_count())
        return paddle.set_device(f"gpu:{index}")
    return paddle.set_device("cpu")


def train(model, x, y, *, steps: int = STEPS, lr: float = LR, on_loss=None,
          step_times: list[float] | None = None) -> list[float]:
    """Full-batch SGD on ``(x, y)`` with MSE loss for ``steps`` steps; returns the per-step losses.

    ``on_loss(loss_tensor) -> float`` turns each step's loss into the number recorded (default
    ``float(loss)``); data-parallel workers pass one that averages across ranks. ``step_times``,
    when given, receives each step's wall time in seconds (the loss read back included, so the
    step's work is done)."""
    import time

    import paddle
    from _figures import step_sleep

    opt = paddle.optimizer.SGD(learning_rate=lr, parameters=model.parameters())
    losses, pause = [], step_sleep()
    for _ in range(steps):
        start = time.perf_counter()
        loss = paddle.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        if pause:  # a test hook (SMOKE_STEP_SLEEP_S): a measurably slower image
            time.sleep(pause)
        losses.append(on_loss(loss) if on_loss else float(loss))
        if step_times is not None:
            step_times.append(time.perf_counter() - start)
    return losses


def init_worker(description: str):
    """Common start of a launched worker: parse ``--out``/``--device``, select this rank's device
    and initialise the collective (NCCL or gloo). Returns ``(args, rank, world_size)``."""
    import argparse

    import paddle.distributed as dist

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    set_device(args.device)
    dist.init_parallel_env()
    return args, dist.get_rank(), dist.get_world_size()


def require_collective(expect: Expect) -> None:
    """Skip a collective check that cannot run: one card means one process and no process group
    (paddle.distributed.init_parallel_env does nothing below world size 2); shards must be equal,
    and on CPU, where verify.cpu_ranks sets the world size, unequal shards fail the check."""
    import pytest

    if expect.ranks < 2:
        pytest.skip(
            f"needs at least 2 ranks; this run has {expect.ranks} (one card, or verify.cpu_ranks=1)"
        )
    if N_SAMPLES % expect.ranks and expect.device == "gpu":  # the cards decide: not applicable
        pytest.skip(f"{N_SAMPLES} samples do not split evenly over {expect.ranks} ranks")
    if N_SAMPLES % expect.ranks:  # on CPU the user chose the ranks: a skip would read as a pass
        pytest.fail(f"{N_SAMPLES} samples do not split evenly over verify.cpu_ranks="
                    f"{expect.ranks}: use a divisor of {N_SAMPLES} (2, 4, 8 …)")


_COLLECTIVE: dict[tuple, tuple[dict, str | None]] = {}


def collective(expect: Expect, part: str) -> dict:
    """One part (``allreduce`` or ``train_dp``) of workers/collective.py's result: both collective
    checks share one launch per pytest session (each launch costs a launcher and a paddle import
    per rank), made by the first check that asks.

    Raises:
        AssertionError: the launch failed before this part reported; the message carries the
            ranks' log tails.
    """
    key = (expect.device, expect.ranks)
    if key not in _COLLECTIVE:
        _COLLECTIVE[key] = launch("collective.py", expect)
    result, failure = _COLLECTIVE[key]
    if part not in result:
        raise AssertionError(failure or f"collective.py reported no {part!r} result")
    return result[part]


def launch(script: str, expect: Expect, *args: str,
           timeout: float = 600) -> tuple[dict, str | None]:
    """Run ``script`` under ``paddle.distributed.launch`` on ``expect.ranks`` processes (gloo on
    CPU; NCCL over the listed cards on GPU). Returns ``(rank 0's JSON, None)`` on success and
    ``(what rank 0 wrote before the failure or {}, the failure with the ranks' log tails)``
    otherwise (exit code, or the ``timeout`` in seconds). The ranks' logs are copied to
    ``expect.out`` as ``<script stem>.workerlog.<n>`` either way."""
    work = Path(tempfile.mkdtemp(prefix=f"launch-{Path(script).stem}-"))
    result = work / "result.json"
    cmd = [
        sys.executable,
        "-m",
        "paddle.distributed.launch",
        "--log_dir",
        str(work / "log"),
        "--nproc_per_node",
        str(expect.ranks),
    ]
    if expect.device == "gpu":  # GPU-only: every card given to the container
        cmd += ["--devices", ",".join(launch_devices(os.environ, gpus=expect.gpus))]
    cmd += [
        str(SMOKE_DIR / "workers" / script),
        "--out",
        str(result),
        "--device",
        expect.device,
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": f"{SMOKE_DIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=work)
        code, stdout = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        code, stdout = f"timed out after {timeout:.0f} s", exc.stdout or ""
        stdout = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
    logs = sorted((work / "log").glob("workerlog.*"))
    for log in logs:  # kept: verify reads NCCL's INFO lines
        shutil.copyfile(log, expect.out / f"{Path(script).stem}.{log.name}")
    done = json.loads(result.read_text()) if result.exists() else {}
    if code == 0 and result.exists():
        return done, None
    tail = "\n".join(p.read_text(errors="replace")[-1500:] for p in logs[:2]) or stdout[-1500:]
    return done, f"paddle.distributed.launch {script} failed (exit {code}):\n{tail}"
