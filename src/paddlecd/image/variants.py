"""Image variants: ``images/variants.yaml`` loaded, schema-checked and cross-checked.

A variant names one image flavour (``cpu``, ``cu126``…): its base image reference, the Paddle
version the base carries, and for GPU variants the CUDA/cuDNN/TensorRT versions, which must agree
with what the official base tag says (``paddlepaddle/paddle:<ver>-gpu-cuda<X.Y>-cudnn<A.B>-trt<T>``,
the naming used on Docker Hub and the Baidu registry).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd import files
from paddlecd import schema as validation
from paddlecd.config import Settings
from paddlecd.errors import ConfigError

# Official Paddle tag grammar, e.g. 3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5,
# 2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6, 3.0.0 (CPU), 3.0.0-cpu-bookworm (our bootstrapped CPU base).
TAG_RE = re.compile(
    r"^(?P<paddle>\d+\.\d+\.\d+)"
    r"(?:-gpu-cuda(?P<cuda>\d+\.\d+)-cudnn(?P<cudnn>\d+\.\d+)(?:-trt(?P<tensorrt>\d+\.\d+))?"
    r"|(?:-cpu)?(?:-[a-z0-9.]+)?)\Z"  # \Z: "$" would take a final newline
)


@dataclass(frozen=True)
class TagInfo:
    """Versions parsed from a Paddle base tag; ``cuda``/``cudnn``/``tensorrt`` are None on CPU
    tags."""

    paddle: str
    cuda: str | None = None
    cudnn: str | None = None
    tensorrt: str | None = None

    @property
    def device(self) -> str:
        return "gpu" if self.cuda else "cpu"


def parse_base_tag(tag: str) -> TagInfo:
    """Parse a Paddle base image tag into versions.

    Args:
        tag: the tag part only, e.g. ``"3.0.0-gpu-cuda11.8-cudnn8.9-trt8.6"``.

    Raises:
        ConfigError: the tag does not follow the official
            ``<ver>[-gpu-cuda<X.Y>-cudnn<A.B>[-trt<T>]]`` form.
    """
    m = TAG_RE.match(tag)
    if not m:
        raise ConfigError(
            f"base tag '{tag}' is not a Paddle tag",
            "expected <paddle>-gpu-cuda<X.Y>-cudnn<A.B>[-trt<T>] (e.g. "
            "3.0.0-gpu-cuda12.6-cudnn9.5-trt10.5) or <paddle>[-cpu…]",
        )
    return TagInfo(**{k: v for k, v in m.groupdict().items() if v})


@dataclass(frozen=True)
class Bootstrap:
    """How to build a base locally: Debian ``suite``, Paddle ``wheel`` requirement, runtime
    ``packages``."""

    suite: str
    wheel: str
    packages: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variant:
    """One image variant, with ``base`` already expanded (``{registry}`` → registry.url)."""

    name: str
    device: str
    base: str
    paddle: str
    cuda: str | None = None
    cudnn: str | None = None
    tensorrt: str | None = None
    python: str | None = None
    description: str = ""
    dockerfile: str = "Dockerfile"
    packages: tuple[str, ...] = ()
    bootstrap: Bootstrap | None = None
    # release.prune: this variant's retention.keep_days / keep_last (None: the settings')
    keep_days: int | None = None
    keep_last: int | None = None
    declared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def base_tag(self) -> str:
        """The tag part of ``base`` (after the last ``:`` of the last path segment)."""
        last = self.base.rsplit("/", 1)[-1]
        return last.split(":", 1)[1] if ":" in last else "latest"

    @property
    def base_repository(self) -> str:
        """``base`` without its tag (``registry/repo``)."""
        return self.base[: len(self.base) - len(self.base_tag) - 1]

    @property
    def is_gpu(self) -> bool:
        return self.device == "gpu"


def load(settings: Settings) -> dict[str, Variant]:
    """Load, validate and cross-check the variants file named by ``settings.variants_file``.

    Returns:
        ``{name: Variant}`` in file order.

    Raises:
        ConfigError: unreadable/malformed YAML, a schema violation (unknown keys with a "did you
            mean"), a base tag that is not a Paddle tag, or versions that disagree with the tag.
    """
    path = settings.path(settings.variants_file)
    data = _read(path)
    _validate(data, path)
    out = {}
    for name, raw in data["variants"].items():
        base = raw["base"].replace("{registry}", settings.registry.url)
        boot = raw.get("bootstrap")
        v = Variant(
            name=name, device=raw["device"], base=base, paddle=raw["paddle"], cuda=raw.get("cuda"),
            cudnn=raw.get("cudnn"), tensorrt=raw.get("tensorrt"), python=raw.get("python"),
            description=raw.get("description", ""), dockerfile=raw.get("dockerfile", "Dockerfile"),
            packages=tuple(raw.get("packages", ())),
            bootstrap=Bootstrap(suite=boot["suite"], wheel=boot["wheel"],
                                packages=tuple(boot.get("packages", ())),
                                pip=tuple(boot.get("pip", ()))) if boot else None,
            keep_days=(raw.get("retention") or {}).get("keep_days"),
            keep_last=(raw.get("retention") or {}).get("keep_last"),
            declared=dict(raw),
        )
        _cross_check(v, path)
        out[name] = v
    return out


def get(settings: Settings, name: str) -> Variant:
    """The variant ``name``. Raises ConfigError naming the known variants (with a "did you
    mean")."""
    variants = load(settings)
    if name not in variants:
        close = [v for v in variants if v == name.lower()] or difflib.get_close_matches(
            name.lower(), variants, n=1
        )
        hint = (
            (f"did you mean '{close[0]}'? " if close else "")
            + "known variants: "
            + ", ".join(variants)
        )
        raise ConfigError(f"unknown variant '{name}' (not in {settings.variants_file})", hint)
    return variants[name]


def _read(path: Path) -> dict:
    data = files.read_yaml(
        path,
        what="variants file",
        missing_hint="run from the project root or set PADDLECD_VARIANTS_FILE",
    )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping with a 'variants' key",
            "see images/variants.yaml in the repo",
        )
    return data


def _validate(data: dict, path: Path) -> None:
    validation.check(data, "variants.schema.json", source=str(path))


def _cross_check(v: Variant, path: Path) -> None:
    info = parse_base_tag(v.base_tag)
    checks = [
        ("paddle", v.paddle, info.paddle),
        ("device", v.device, info.device),
        ("cuda", v.cuda, info.cuda),
        ("cudnn", v.cudnn, info.cudnn),
        ("tensorrt", v.tensorrt, info.tensorrt),
    ]
    for key, declared, parsed in checks:
        if declared != parsed:
            if parsed is None:  # a trial: "its base tag 3.0.0-cpu-bookworm says None"
                raise ConfigError(
                    f"{path}: variant '{v.name}' declares {key}={declared} but its base tag "
                    f"{v.base_tag} names no {key}",
                    f"drop '{key}' from variant '{v.name}'" + (
                        " (a cpu variant has no CUDA stack)" if v.device == "cpu" else
                        f", or pick the base tag that carries {key} {declared}"))
            raise ConfigError(
                f"{path}: variant '{v.name}' declares {key}={declared} but its base tag "
                f"{v.base_tag} says {parsed}",
                f"make '{key}' match the tag, or pick the base tag that carries {key} {declared}",
            )
