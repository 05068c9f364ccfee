"""NVIDIA driver requirements for CUDA images, checked on the host before any GPU container starts.

Source: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions"
(Linux x86_64, "Toolkit Driver Version", the GA release of each minor) and Table 2 "CUDA Minor
Version Compatibility" (minimum driver for any toolkit of a major line: >= 450.80.02 for CUDA 11.x,
>= 525.60.13 for CUDA 12.x). https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html

Below the minor-compatibility minimum nothing runs. Between it and the toolkit's own driver version
CUDA itself runs most kernels (no PTX JIT). Whether a container starts is the NVIDIA Container
Toolkit's decision, from the image's own ``NVIDIA_REQUIRE_CUDA`` (nvidia/cuda images — Paddle's
derive from them — list the data-centre branches their cuda-compat package serves, e.g.
``brand=tesla,driver>=535,driver<536``): :func:`require_for` applies that rule
(:mod:`paddlecd.verify.requirements`) when the image states one, and the table only when it does
not (``doctor`` too, on a locked base it finds on the engine; without one it warns in that band).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from paddlecd import proc
from paddlecd.errors import VerifyError
from paddlecd.verify import requirements

# CUDA major.minor -> driver shipped with that toolkit's GA release (Table 3, Linux).
TOOLKIT_DRIVER: dict[str, str] = {
    "11.0": "450.36.06",
    "11.1": "455.23.05",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
}
# CUDA major -> minimum driver under minor version compatibility (Table 2).
MINOR_COMPAT_MIN: dict[str, str] = {"11": "450.80.02", "12": "525.60.13"}


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class DriverCheck:
    """Outcome: ``ok`` (runs), ``full`` (meets the toolkit driver too), a one-line ``message``."""

    cuda: str
    driver: str
    ok: bool
    full: bool
    message: str


def required(cuda: str) -> tuple[str, str]:
    """``(minimum, toolkit)`` driver versions for CUDA ``major.minor``.

    Raises:
        VerifyError: the CUDA version is not in the table (add it from NVIDIA's release notes).
    """
    key = ".".join(cuda.split(".")[:2])
    if key not in TOOLKIT_DRIVER or key.split(".")[0] not in MINOR_COMPAT_MIN:
        raise VerifyError(
            f"CUDA {cuda} is not in the driver table",
            "add it to paddlecd/drivers.py from NVIDIA's Table 3",
        )
    return MINOR_COMPAT_MIN[key.split(".")[0]], TOOLKIT_DRIVER[key]


def check(cuda: str, driver: str) -> DriverCheck:
    """Compare host ``driver`` (e.g. ``"550.54.15"``) with what CUDA ``cuda`` needs."""
    minimum, toolkit = required(cuda)
    ok, full = _v(driver) >= _v(minimum), _v(driver) >= _v(toolkit)
    if not ok:
        msg = (
            f"driver {driver} is older than {minimum}, the minimum for CUDA {cuda.split('.')[0]}.x"
        )
    elif not full:
        msg = (
            f"driver {driver} runs CUDA {cuda} under minor-version compatibility "
            f"(toolkit driver {toolkit}; no PTX JIT)"
        )
    else:
        msg = f"driver {driver} >= {toolkit} (CUDA {cuda} toolkit driver)"
    return DriverCheck(cuda=cuda, driver=driver, ok=ok, full=full, message=msg)


def pinned_devices() -> list[str] | None:
    """GPU indexes this job is pinned to on a shared host: ``$NVIDIA_VISIBLE_DEVICES`` or
    ``$CUDA_VISIBLE_DEVICES`` as a comma list (``all``/empty/unset: not pinned → None)."""
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value and value not in ("all", "none", "void"):
            return [d.strip() for d in value.split(",") if d.strip()]
    return None


def host_gpus() -> tuple[str | None, int]:
    """``(driver version, GPU count)`` from ``nvidia-smi``; ``(None, 0)`` when there is no NVIDIA
    driver.
    When the job is pinned (:func:`pinned_devices`) the count is the number of pinned cards."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None, 0
    try:
        out = proc.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            stdout_only=True,
            timeout=30,
            error=VerifyError,
        ).stdout.split()
    except VerifyError:  # a driver that does not answer counts as none (doctor says why)
        return None, 0
    pinned = pinned_devices()
    return (out[0] if out else None), (min(len(pinned), len(out)) if pinned else len(out))


def driver_cuda(driver: str) -> str | None:
    """The CUDA version a driver reports (``major.minor``), estimated from :data:`TOOLKIT_DRIVER`:
    the newest toolkit whose GA driver ``driver`` meets (535.104.05 → 12.2); None below 11.0."""
    met = [c for c, d in TOOLKIT_DRIVER.items() if _v(driver) >= _v(d)]
    return max(met, key=_v) if met else None


def host_facts(driver: str) -> requirements.Host:
    """What the NVIDIA Container Toolkit compares an image's requirements with on this host:
    ``nvidia-container-cli info --csv`` (its own view: NVRM and CUDA version, each GPU's brand
    and arch); where that tool is missing or fails, ``driver`` with :func:`driver_cuda` and no
    device facts (brand and arch rules then hold, as they do for the toolkit without a device)."""
    exe = shutil.which("nvidia-container-cli")
    if exe:
        try:
            out = proc.run([exe, "info", "--csv"], stdout_only=True, timeout=30,
                           error=VerifyError).stdout
            return requirements.parse_cli_info(out)
        except (VerifyError, ValueError):
            pass  # the estimate below still decides the cuda and driver rules
    return requirements.Host(driver=driver, cuda=driver_cuda(driver))


def check_image(cuda: str, env: Mapping[str, str], host: requirements.Host) -> DriverCheck | None:
    """The toolkit's own rule for an image with config ``env`` on ``host``, limited to the pinned
    cards (:func:`pinned_devices`); None when the image states no requirement (use
    :func:`check`). ``full`` says whether the driver also meets the CUDA ``cuda`` toolkit driver.

    Raises:
        VerifyError: an ``NVIDIA_REQUIRE_*`` the toolkit cannot evaluate, or one it would refuse.
    """
    try:
        reqs = requirements.of_image(env)
        if reqs is None:
            return None
        outcome = requirements.check(reqs, host, visible=pinned_devices())
    except requirements.InvalidExpression as e:
        raise VerifyError(f"the image's NVIDIA_REQUIRE_* cannot be evaluated: {e}",
                          "the NVIDIA Container Toolkit refuses it too; rebuild from a "
                          "nvidia/cuda base") from e
    driver = host.driver or "unknown"
    at = f"driver {driver}, CUDA {host.cuda or 'unknown'}"
    if not outcome.satisfied:
        raise VerifyError(
            f"the NVIDIA Container Toolkit would not start this image ({at}): {outcome.message}",
            "install a driver the image's NVIDIA_REQUIRE_CUDA lists (its cuda>= minimum, or a "
            "data-centre branch it names): docker inspect shows it",
        )
    key = ".".join(cuda.split(".")[:2])
    full = key in TOOLKIT_DRIVER and host.driver is not None and (
        _v(host.driver) >= _v(TOOLKIT_DRIVER[key]))
    how = "meets" if full else "is below the toolkit driver but satisfies"
    return DriverCheck(cuda=cuda, driver=driver, ok=True, full=full,
                       message=f"{at} {how} the image's NVIDIA_REQUIRE_CUDA")


def require_for(cuda: str, env: Mapping[str, str] | None = None) -> DriverCheck:
    """Check this host can start a CUDA ``cuda`` image with config environment ``env`` (GPU-only
    path of verify): the toolkit's rule on the image's ``NVIDIA_REQUIRE_*``
    (:func:`check_image`), or without one the toolkit driver of :data:`TOOLKIT_DRIVER`.

    Raises:
        VerifyError: no NVIDIA driver/GPU, or the driver would not start the image.
    """
    driver, count = host_gpus()
    if not driver or count == 0:
        raise VerifyError(
            "no NVIDIA GPU/driver on this host (nvidia-smi found none)",
            "run GPU variants on a GPU runner; verify the cpu variant here",
        )
    if env is not None:
        by_image = check_image(cuda, env, host_facts(driver))
        if by_image is not None:
            return by_image
    result = check(cuda, driver)
    if not result.full:
        # No NVIDIA_REQUIRE_CUDA to go by: an nvidia/cuda-derived image would carry at least
        # cuda>=X.Y, which the toolkit refuses below the toolkit driver; fail here, clearly.
        raise VerifyError(
            result.message + "; an image stating no NVIDIA_REQUIRE_CUDA is held to its CUDA's "
            "toolkit driver",
            f"upgrade the NVIDIA driver to >= {required(cuda)[1]}",
        )
    return result
