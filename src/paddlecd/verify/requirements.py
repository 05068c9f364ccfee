"""The NVIDIA Container Toolkit's start rule: an image's ``NVIDIA_REQUIRE_*`` against this host.

Read from NVIDIA/libnvidia-container (legacy mode, what ``docker run --gpus`` goes through):
``src/cli/dsl.c`` @ 5823754b8577d16fabf25a6ef6a1d58f7ff1e5dd (the expression language),
``src/cli/configure.c`` @ 09df17a2424704c1e4af310d3ce51fe475ba292a (the four rules, evaluated
once per visible device), ``src/driver.c`` @ 947344949f269687466e11e9a80f766ffffcb488 (what the
host values are) and ``src/cli/info.c`` @ 5decca393a6635d9d599167b27a6072d8de9fc2f (``info
--csv``, which prints exactly those values); which variables count from
NVIDIA/nvidia-container-toolkit ``internal/config/image/cuda_image.go`` @
1081cecea97d60a9c4e715c3a9ecaa5323d7cdec. The rule in words: docs/gpu.md.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass

# dsl.c ``operators[]``, in its order: a run of "<>=!" picks the first operator it begins
# (strncmp over the run's length), so "<" is LESS and a lone "!" is NOT_EQUAL.
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
# driver.c driver_get_device_brand_1_svc: every other NVML brand (NVIDIA, NVIDIA RTX, GeForce RTX,
# the vGPU ones) is reported as "Unknown" — H100 and A100 are brand=unknown to the toolkit.
BRANDS = ("Quadro", "Tesla", "NVS", "GRID", "GeForce", "TITAN")
_NUMBER = re.compile(r"[0-9]+")


class InvalidExpression(ValueError):
    """A condition the toolkit cannot evaluate ("requirement error: invalid expression")."""


@dataclass(frozen=True)
class Device:
    """One GPU as libnvidia-container sees it: ``index`` (``nvidia-smi`` order), ``uuid``,
    ``brand`` (one of :data:`BRANDS` or ``Unknown``; None: not known) and ``arch`` (compute
    capability ``major.minor``; None: not known)."""

    index: str
    uuid: str | None = None
    brand: str | None = None
    arch: str | None = None


@dataclass(frozen=True)
class Host:
    """The values the rules compare: ``driver`` (NVRM version, ``535.104.05``), ``cuda`` (the
    driver's CUDA version, ``major.minor``: nvmlSystemGetCudaDriverVersion) and the visible
    ``devices``. A None value makes its rules hold, as configure.c does when it lacks one."""

    driver: str | None
    cuda: str | None
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """``satisfied``, and when not, the toolkit's own ``message`` ("unsatisfied condition: …")
    and the ``requirement`` that failed."""

    satisfied: bool
    message: str = ""
    requirement: str = ""


def of_image(env: Mapping[str, str]) -> list[str] | None:
    """The requirements the toolkit applies to an image with config ``env`` (``{NAME: value}``):
    every ``NVIDIA_REQUIRE_*`` except ``NVIDIA_REQUIRE_JETPACK*``, plus ``cuda>=X.Y`` for a
    legacy image (``CUDA_VERSION`` set, ``NVIDIA_REQUIRE_CUDA`` empty); ``[]`` when
    ``NVIDIA_DISABLE_REQUIRE`` is true; None when the image states nothing (no such variable,
    no ``CUDA_VERSION``): the caller falls back to its own table.

    Raises:
        InvalidExpression: a legacy ``CUDA_VERSION`` that is not a version (the hook fails too).
    """
    if _parse_bool(env.get("NVIDIA_DISABLE_REQUIRE", "")):
        return []
    reqs = [
        value
        for name, value in sorted(env.items())
        if name.startswith("NVIDIA_REQUIRE_") and not name.startswith("NVIDIA_REQUIRE_JETPACK")
    ]
    legacy = env.get("CUDA_VERSION", "")
    if legacy and not env.get("NVIDIA_REQUIRE_CUDA"):
        m = re.fullmatch(r"v?([0-9]+)(?:\.([0-9]+))?(?:\.[0-9]+)?(?:[-+].*)?", legacy)
        if not m:
            raise InvalidExpression(f"CUDA_VERSION={legacy} is not a version")
        reqs.append(f"cuda>={m.group(1)}.{m.group(2) or 0}")  # semver.MajorMinor: "12" is 12.0
    return reqs if reqs or legacy else None


def _parse_bool(value: str) -> bool:
    # Go strconv.ParseBool: anything else (an error) is false
    return value in ("1", "t", "T", "TRUE", "true", "True")


def check(requirements: list[str], host: Host, *, visible: list[str] | None = None) -> Outcome:
    """Whether the toolkit would start a container with ``requirements`` (:func:`of_image`) on
    ``host``: each requirement must hold for every visible device (``visible``: indexes or UUIDs
    the container gets; None: all), or once without device when there is none (configure.c).

    Raises:
        InvalidExpression: a requirement the toolkit refuses as invalid.
    """
    devices = [d for d in host.devices if visible is None or {d.index, d.uuid} & set(visible)]
    for device in devices or [None]:
        for req in requirements:
            failed = evaluate(req, host, device)
            if failed is not None:
                return Outcome(False, failed, req)
    return Outcome(True)


def evaluate(predicate: str, host: Host, device: Device | None) -> str | None:
    """dsl_evaluate: None when ``predicate`` holds, else the toolkit's message. Space-separated
    terms are ORed and evaluated left to right; a term's comma-separated conditions are ANDed
    and stop at the first false one (a later invalid condition is never read).

    Raises:
        InvalidExpression: a condition that is read and cannot be evaluated.
    """
    ret = True
    for term in predicate.split(" "):
        if not term:
            continue
        whole = True
        for condition in term.split(","):
            if not condition:
                continue
            ret = _condition(condition, host, device)
            if not ret:
                whole = False
                break
        if whole:
            break
    if ret:
        return None
    first = predicate.split(" ")[0]
    if first.startswith("cuda>="):
        return (f"unsatisfied condition: {first}, please update your driver to a newer version, "
                "or use an earlier cuda container")
    return f"unsatisfied condition: {first}"


def _condition(text: str, host: Host, device: Device | None) -> bool:
    """evaluate_rule + configure.c's check_* functions."""
    name_end = next((i for i, c in enumerate(text) if c in "<>=!"), len(text))
    run_end = next((i for i in range(name_end, len(text)) if text[i] not in "<>=!"), len(text))
    name, run, value = text[:name_end], text[name_end:run_end], text[run_end:]
    op = next((o for o in OPERATORS if o.startswith(run)), None) if run else None
    if not name or op is None or not value:
        raise InvalidExpression(f"{text!r} is not NAME OP VALUE")
    rule = name.lower()
    if rule == "cuda":
        return host.cuda is None or compare_version(host.cuda, op, value)
    if rule == "driver":
        return host.driver is None or compare_version(host.driver, op, value)
    if rule == "arch":
        return device is None or device.arch is None or compare_version(device.arch, op, value)
    if rule == "brand":
        if device is None or device.brand is None:
            return True
        if op not in ("=", "!="):
            raise InvalidExpression(f"{text!r}: a brand compares with = or != only")
        return (device.brand.lower() == value.lower()) == (op == "=")
    raise InvalidExpression(f"{text!r}: no rule {name!r} (cuda, driver, arch, brand)")


def compare_version(v1: str, op: str, v2: str) -> bool:
    """dsl_compare_version: dotted numbers compared number by number (``12.10 > 12.9``), extra
    ``.0`` parts ignored (``12.0 = 12``), runs of dots skipped.

    Raises:
        InvalidExpression: a side with a character other than digits and dots, or a number
            missing where one is due (``12..``).
    """
    order = _cmp(v1, v2)
    return {
        "=": order == 0, "!=": order != 0, "<": order < 0, "<=": order <= 0,
        ">": order > 0, ">=": order >= 0,
    }[op]


def _cmp(v1: str, v2: str) -> int:
    for v in (v1, v2):
        if v.strip("0123456789."):
            raise InvalidExpression(f"{v!r} is not a version")
    i = j = 0
    while i < len(v1) and j < len(v2):
        m1, m2 = _NUMBER.match(v1, i), _NUMBER.match(v2, j)
        if not m1 or not m2:
            raise InvalidExpression(f"{v1!r} or {v2!r} is not a version")
        n1, n2 = int(m1.group()), int(m2.group())
        if n1 != n2:
            return -1 if n1 < n2 else 1
        i, j = _past_dots(v1, m1.end()), _past_dots(v2, m2.end())
    rest1, rest2 = v1[i:].lstrip(".0"), v2[j:].lstrip(".0")
    return 0 if not rest1 and not rest2 else (-1 if not rest1 else 1)


def _past_dots(v: str, i: int) -> int:
    while i < len(v) and v[i] == ".":
        i += 1
    return i


def parse_cli_info(text: str) -> Host:
    """The :class:`Host` of ``nvidia-container-cli info --csv`` output (info.c: a header
    ``NVRM version,CUDA version`` and its row, a blank line, then ``Device Index,Device Minor,
    Model,Brand,GPU UUID,Bus Location,Architecture`` and a row per GPU).

    Raises:
        ValueError: the text is not in that shape.
    """
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    if not blocks:
        raise ValueError("no output")
    driver_rows = list(csv.reader(io.StringIO(blocks[0])))
    if len(driver_rows) < 2 or driver_rows[0][:2] != ["NVRM version", "CUDA version"]:
        raise ValueError(f"unexpected first block: {blocks[0][:80]!r}")
    nvrm, cuda = (c.strip() for c in driver_rows[1][:2])
    devices = []
    rows = list(csv.reader(io.StringIO(blocks[1]))) if len(blocks) > 1 else []
    for row in rows[1:]:
        if len(row) < 7:
            raise ValueError(f"unexpected device row: {','.join(row)[:80]!r}")
        # read by position from both ends: the model name between them may hold a comma
        devices.append(Device(index=row[0].strip(), uuid=row[-3].strip(),
                              brand=row[-4].strip(), arch=row[-1].strip()))
    return Host(driver=nvrm or None, cuda=cuda or None, devices=tuple(devices))
