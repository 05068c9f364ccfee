"""Figures: the speed numbers a run records so a release can be compared with the one it replaces.

Each figure is ``{"name", "value", "unit", "better", "spread", "samples"}``: ``value`` is the
median of ``samples`` timed repetitions taken after warm-up, ``spread`` the interquartile range
over the median (0.05: the middle half of the samples lies within 5 % of the median's size),
``better`` says which way is faster (``lower`` for times, ``higher`` for rates). The host reads
them from the ``figures`` property of each check and the ``hardware`` property of the environment
check (paddlecd/verify/figures.py); the rule for medians and spread lives here only.
Standard library only: imported in the pytest process and in launched workers.
"""

from __future__ import annotations

import os
import statistics

# Timing knobs a test image may set: ``SMOKE_REPEAT`` repeats the timed part (verify.repeat);
# ``SMOKE_STEP_SLEEP_S`` sleeps in every training step (how the tests make a slower candidate).
REPEAT_ENV, SLEEP_ENV = "SMOKE_REPEAT", "SMOKE_STEP_SLEEP_S"


def repeat() -> int:
    """How many times the timed part of a check runs (``SMOKE_REPEAT``, default 1, at least 1)."""
    return max(1, int(os.environ.get(REPEAT_ENV) or 1))


def step_sleep() -> float:
    """Seconds each training step sleeps (``SMOKE_STEP_SLEEP_S``, default 0): a test hook."""
    return float(os.environ.get(SLEEP_ENV) or 0)


def figure(name: str, samples: list[float], unit: str, *, better: str = "lower") -> dict:
    """The figure ``name`` of ``samples`` (seconds, rates…, already in ``unit``): their median,
    the interquartile range over the median, and how many there were."""
    value = statistics.median(samples)
    if len(samples) >= 4:
        q1, _, q3 = statistics.quantiles(samples, n=4)
        spread = (q3 - q1) / value if value else 0.0
    else:
        spread = (max(samples) - min(samples)) / value if value else 0.0
    return {"name": name, "value": round(value, 6), "unit": unit, "better": better,
            "spread": round(spread, 4), "samples": len(samples)}


def hardware(device: str, *, gpu_name: str | None = None, gpus: int = 0) -> str:
    """The hardware class figures are compared within: ``"2x NVIDIA A100-SXM4-80GB"`` (model
    and count as the driver names them) on GPU, ``"Intel(R) Xeon(R) … (2 cores)"`` on CPU (the
    ``model name`` of /proc/cpuinfo and the cores this process may run on)."""
    if device == "gpu" and gpu_name:  # GPU-only
        return f"{gpus}x {gpu_name}"
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh
                          if line.lower().startswith(("model name", "cpu model"))), "")
    except OSError:
        pass
    import platform

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model or platform.machine() or 'cpu'} ({cores} cores)"
