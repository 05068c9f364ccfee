"""Configuration: one cascade in one module (STYLE.md §7).

Order, lowest to highest: packaged defaults (the dataclass defaults below) → project YAML
(``paddlecd.yaml`` at the project root) → ``PADDLECD_*`` environment → flags. The result is a frozen
:class:`Settings`. Unknown keys anywhere are rejected with a "did you mean".

Environment names are ``PADDLECD_<SECTION>_<KEY>`` (``PADDLECD_REGISTRY_URL``) or ``PADDLECD_<KEY>``
for top-level keys (``PADDLECD_STATE_DIR``). Flags are passed as ``{"registry.url": …}``.
Credentials are never configured here: they come from Docker's config.json, the AWS chain and
kubeconfig.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from paddlecd.errors import ConfigError

PROJECT_FILE = "paddlecd.yaml"


@dataclass(frozen=True)
class RegistrySettings:
    """Where candidate images are pushed. ``url`` is ``host[:port]``; ``insecure`` means plain HTTP."""

    url: str = "127.0.0.1:5000"
    repository: str = "paddlecd/paddle"
    ca_file: str | None = None
    insecure: bool = False
    push_retries: int = 4


@dataclass(frozen=True)
class BuildSettings:
    """How images are built: ``docker_cli`` is ``auto`` or a path; ``ca_bundle`` enters as a secret."""

    docker_cli: str = "auto"
    ca_bundle: str | None = None
    pip_index_url: str | None = None
    debian_mirror: str | None = None


@dataclass(frozen=True)
class VerifySettings:
    """Smoke run limits: CPU ranks, shm size (Docker syntax), whole-run timeout in seconds."""

    cpu_ranks: int = 2
    shm_size: str = "2g"
    gpu_shm_size: str = "16g"
    timeout: int = 1800


@dataclass(frozen=True)
class ReleaseSettings:
    """Promotion target and the evidence age limit (hours) after which evidence is stale.
    ``ca_file``/``insecure`` apply when ``registry`` is another registry than the candidates'."""

    registry: str | None = None  # None: same registry as candidates
    repository: str = "paddlecd/release"
    evidence_max_age_hours: float = 168.0
    ca_file: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class StorageSettings:
    """Artifact store URL (``file://…`` or ``s3://bucket/prefix``) and S3-compatible endpoint knobs."""

    url: str | None = None  # None: file://<state_dir>/artifacts
    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: str = "path"
    checksum_mode: str | None = None  # None: the AWS environment/profile, else when_required
    multipart_threshold_mb: int = 64
    multipart_chunk_mb: int = 16
    max_concurrency: int = 4


@dataclass(frozen=True)
class ClusterSettings:
    """Cluster defaults: ``kind`` is ``local`` or ``k8s``; namespace and pull secret for k8s."""

    kind: str = "local"
    namespace: str | None = None  # None: the kubeconfig context's, else the pod's, else default
    context: str | None = None
    image_pull_secret: str | None = "paddlecd-registry"


@dataclass(frozen=True)
class Settings:
    """All settings, resolved. ``root`` is the project root; ``state_dir`` is relative to it."""

    root: Path = Path(".")
    state_dir: str = ".paddlecd"
    variants_file: str = "images/variants.yaml"
    lock_file: str = "images/lock.yaml"
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    build: BuildSettings = field(default_factory=BuildSettings)
    verify: VerifySettings = field(default_factory=VerifySettings)
    release: ReleaseSettings = field(default_factory=ReleaseSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)

    @property
    def state(self) -> Path:
        """Absolute state folder (evidence, logs, records, local registry data, file store)."""
        p = Path(self.state_dir)
        return p if p.is_absolute() else (self.root / p).resolve()

    def path(self, rel: str) -> Path:
        """``rel`` resolved against the project root (absolute paths pass through)."""
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    @property
    def candidate_repo(self) -> str:
        """``registry/repository`` of candidate images, e.g. ``127.0.0.1:5000/paddlecd/paddle``."""
        return f"{self.registry.url}/{self.registry.repository}"

    @property
    def release_repo(self) -> str:
        """``registry/repository`` of releases."""
        return f"{self.release.registry or self.registry.url}/{self.release.repository}"


SECTIONS: dict[str, type] = {
    name: t for name, t in typing.get_type_hints(Settings).items() if dataclasses.is_dataclass(t)
}


def find_root(start: Path | None = None) -> Path:
    """The project root: ``$PADDLECD_ROOT``, else the nearest folder up from ``start`` holding
    ``images/variants.yaml``, else ``start`` (cwd)."""
    if os.environ.get("PADDLECD_ROOT"):
        return Path(os.environ["PADDLECD_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "images" / "variants.yaml").exists():
            return d
    return here


def load(flags: Mapping[str, Any] | None = None, *, root: Path | None = None,
         environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve the cascade into a frozen :class:`Settings`.

    Args:
        flags: dotted keys (``"registry.url"``) or top-level keys; ``None`` values are ignored.
        root: project root; default :func:`find_root`.
        environ: environment to read ``PADDLECD_*`` from; default ``os.environ``.

    Raises:
        ConfigError: malformed project YAML, an unknown key (with a suggestion), a bad value type.
    """
    root = root or find_root()
    layers: list[tuple[str, dict[str, Any]]] = []
    project = root / PROJECT_FILE
    if project.exists():
        layers.append((str(project), _flatten(_read_yaml(project), str(project))))
    env = environ if environ is not None else os.environ
    layers.append(("environment", _from_env(env)))
    layers.append(("flags", {k: v for k, v in (flags or {}).items() if v is not None}))
    merged: dict[str, Any] = {}
    for origin, layer in layers:
        for key, value in layer.items():
            _check_key(key, origin)
            merged[key] = value
    return _build(root, merged)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or str(e).splitlines()[0]}",
                          "fix the syntax") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level", "see README 'Configuration'")
    return data


def _flatten(data: Mapping[str, Any], origin: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{origin}: '{key}' must be a mapping", f"e.g. {key}: {{...}}")
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith("PADDLECD_") or name == "PADDLECD_ROOT":
            continue
        rest = name[len("PADDLECD_"):].lower()
        if rest in _IGNORED_ENV:
            continue
        section, _, key = rest.partition("_")
        out[f"{section}.{key}" if section in SECTIONS and key else rest] = value
    return out


# Variables read elsewhere (debug switches), not settings. Registry credentials are read by
# paddlecd.registry.auth straight from the environment: secrets are never stored in Settings.
_IGNORED_ENV = {
    "debug", "keep", "log_format", "registry_username", "registry_password", "source_url", "update_golden",
    # set inside smoke and training containers (smoke/README.md, cluster/render.py), never settings
    "device", "expect_paddle", "expect_cuda", "expect_cudnn", "gpus", "cpu_ranks", "out",
    "release", "image", "model", "output", "checkpoint_dir", "variant", "digest", "job",
}


def _all_keys() -> list[str]:
    keys = [f.name for f in dataclasses.fields(Settings) if f.name not in SECTIONS and f.name != "root"]
    for section, cls in SECTIONS.items():
        keys += [f"{section}.{f.name}" for f in dataclasses.fields(cls)]
    return keys


def _check_key(key: str, origin: str) -> None:
    known = _all_keys()
    if key not in known:
        head = key.split(".", 1)[0]
        section = difflib.get_close_matches(head, list(SECTIONS), n=1) if head not in SECTIONS else []
        close = [section[0]] if section and "." not in key else difflib.get_close_matches(key, known, n=1)
        if not close and "." in key:  # a misspelt section: suggest the section
            section = difflib.get_close_matches(key.split(".", 1)[0], list(SECTIONS), n=1)
            close = [f"{section[0]}.{key.split('.', 1)[1]}"] if section else []
        hint = f"did you mean '{close[0]}'?" if close else "known keys: " + ", ".join(known)
        raise ConfigError(f"{origin}: unknown setting '{key}'", hint)


def _build(root: Path, merged: Mapping[str, Any]) -> Settings:
    hints = typing.get_type_hints(Settings)
    kwargs: dict[str, Any] = {"root": root}
    for name, sub in SECTIONS.items():
        sub_hints = typing.get_type_hints(sub)
        values = {k.split(".", 1)[1]: v for k, v in merged.items() if k.startswith(name + ".")}
        kwargs[name] = sub(**{k: _coerce(v, sub_hints[k], f"{name}.{k}") for k, v in values.items()})
    for key, value in merged.items():
        if "." not in key:
            kwargs[key] = _coerce(value, hints[key], key)
    settings = Settings(**kwargs)
    for key, host in (("registry.url", settings.registry.url), ("release.registry", settings.release.registry)):
        if host and ("://" in host or "/" in host):
            raise ConfigError(f"setting '{key}' is {host!r}: give host[:port] only",
                              "no scheme or path (plain HTTP: registry.insecure=true; repository: registry.repository)")
    return settings


def _coerce(value: Any, typ: Any, key: str) -> Any:
    args = typing.get_args(typ)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), typ) if args else typ
    if value is None or (optional and isinstance(value, str) and value.lower() in ("", "none", "null")):
        if optional:
            return None
        raise ConfigError(f"setting '{key}' may not be empty", "remove it to use the default")
    try:
        if base is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if base in (int, float):
            number = base(value)
            if number <= 0:  # every numeric setting is a count, a size or a duration
                raise ConfigError(f"setting '{key}' must be greater than 0, got {value!r}", "use a positive number")
            return number
        return str(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"setting '{key}': {value!r} is not {'an integer' if base is int else 'a ' + base.__name__}", "fix the value") from e

