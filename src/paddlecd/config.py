"""Configuration: one cascade in one module (STYLE.md §7).

Order, lowest to highest: packaged defaults (the dataclass defaults below) → project YAML
(``paddlecd.yaml`` at the project root) → ``PADDLECD_*`` environment → flags. The result is a frozen
:class:`Settings`. An unknown key in the project file or a flag is an error with a "did you mean";
an unknown ``PADDLECD_*`` variable only adds a warning to :attr:`Settings.warnings` (a CI secret
that happens to share the prefix must not stop every task).

Environment names are ``PADDLECD_<SECTION>_<KEY>`` (``PADDLECD_REGISTRY_URL``) or ``PADDLECD_<KEY>``
for top-level keys (``PADDLECD_STATE_DIR``); the runtime switches keep their documented short names
``PADDLECD_DEBUG``, ``PADDLECD_KEEP`` and ``PADDLECD_LOG_FORMAT`` as aliases of ``runtime.*``.
Flags are passed as ``{"registry.url": …}``. Credentials are never configured here: they come from
Docker's config.json (or ``PADDLECD_REGISTRY_USERNAME``/``PASSWORD``), the AWS chain and kubeconfig.
Variables for the smoke and training containers have their own prefixes (``SMOKE_*``, ``TRAIN_*``;
see verify/run.py and cluster/render.py), so they never look like settings.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import semver

from paddlecd import files
from paddlecd.errors import ConfigError, quoted
from paddlecd.registry.reference import check_repository

PROJECT_FILE = "paddlecd.yaml"


@dataclass(frozen=True)
class RegistrySettings:
    """Where candidate images are pushed. ``url`` is ``host[:port]``; ``insecure`` means plain
    HTTP."""

    url: str = "127.0.0.1:5000"
    repository: str = "paddlecd/paddle"
    ca_file: str | None = None
    insecure: bool = False
    push_retries: int = 4
    rate_limit_wait: float = 120.0  # s per request waiting out 429/503 Retry-After


@dataclass(frozen=True)
class EngineSettings:
    """The container engine: ``kind`` is ``auto`` (whatever answers on ``DOCKER_HOST`` or
    Docker's socket), ``docker`` or ``podman`` (its API service; ``DOCKER_HOST``, else podman's
    socket). docs/guides/podman.md."""

    kind: str = "auto"


@dataclass(frozen=True)
class BuildSettings:
    """How images are built: ``docker_cli`` is ``auto`` or a path; ``ca_bundle`` enters as a
    secret."""

    docker_cli: str = "auto"
    ca_bundle: str | None = None
    pip_index_url: str | None = None
    debian_mirror: str | None = None
    # BuildKit's cache records are shared by every build on one daemon, and a --no-cache build
    # registers new layers under the same keys, which later cached builds may pick: builds with
    # different scopes never reuse each other's RUN layers (images/Dockerfile's CACHE_SCOPE).
    cache_scope: str | None = None


@dataclass(frozen=True)
class VerifySettings:
    """Smoke run limits: CPU ranks, shm size (Docker syntax), whole-run timeout in seconds.
    ``signing_key``: path of the PEM private key that signs attestations; the env var
    ``PADDLECD_SIGNING_KEY`` may hold the PEM itself instead (a CI secret, never a setting).
    ``attestation_layouts``: where the signed attestation goes, comma-separated, at least one of
    ``bundle`` (a Sigstore bundle referrer, cosign v3's layout) and ``att`` (cosign's
    ``sha256-<hex>.att`` tag, which Kyverno ``type: Cosign`` and policy-controller read)."""

    cpu_ranks: int = 2
    shm_size: str = "2g"
    gpu_shm_size: str = "16g"
    timeout: int = 1800
    signing_key: str | None = None
    attestation_layouts: str = "bundle,att"
    # A GPU all-reduce below this share of its table row fails (verify/bandwidth.py)
    busbw_fraction: float = 0.8
    # seconds a rank of verify --nodes waits for the master; None: verify/nodes.py's rule
    rendezvous_timeout: int | None = None
    # times the smoke suite repeats its timed parts (figures: medians over all of them)
    repeat: int = 1


@dataclass(frozen=True)
class ReleaseSettings:
    """Promotion target and the evidence age limit (hours) after which evidence is stale.
    ``ca_file``/``insecure`` apply when ``registry`` is another registry than the candidates'.
    ``trusted_keys``: PEM public keys (files or folders of ``*.pub``, comma-separated, committed to
    the repository) whose attestations promotion accepts."""

    registry: str | None = None  # None: same registry as candidates
    repository: str = "paddlecd/release"
    evidence_max_age_hours: float = 168.0
    ca_file: str | None = None
    insecure: bool = False
    trusted_keys: str | None = None
    # Promotion needs an attested run on at least this many nodes (verify --nodes N)
    require_nodes: int = 1
    # upgrade gates (release/gates.py): a figure slower than the release the moving tag points
    # at by more than this fraction refuses the promotion; per figure: "name=0.25,prefix.*=0.5"
    max_slowdown: float = 0.1
    max_slowdown_figures: str | None = None
    # models in production (artifacts/gate.py): "name@version,name" checked in every candidate
    models: str | None = None


@dataclass(frozen=True)
class RetentionSettings:
    """What ``release.prune`` keeps of a variant's candidates besides releases: those younger
    than ``keep_days`` days and the ``keep_last`` newest. A variant's ``retention:`` in
    images/variants.yaml overrides both for that variant."""

    keep_days: int = 30
    keep_last: int = 10


@dataclass(frozen=True)
class StorageSettings:
    """Artifact store URL (``file://…`` or ``s3://bucket/prefix``) and S3-compatible endpoint
    knobs."""

    url: str | None = None  # None: file://<state_dir>/artifacts
    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: str = "path"
    checksum_mode: str | None = None  # None: the AWS environment/profile, else when_required
    multipart_threshold_mb: int = 64
    multipart_chunk_mb: int = 16
    max_concurrency: int = 4


@dataclass(frozen=True)
class ArtifactsSettings:
    """Models in object storage: ``signing_key`` is the PEM private key (ECDSA P-256) that signs
    uploaded models (``model.sig``, OpenSSF Model Signing); None: verify's signing key."""

    signing_key: str | None = None


@dataclass(frozen=True)
class ClusterSettings:
    """Cluster defaults: ``kind`` is ``local`` or ``k8s``; namespace and pull secret for k8s."""

    kind: str = "local"
    namespace: str | None = None  # None: the kubeconfig context's, else the pod's, else default
    context: str | None = None
    image_pull_secret: str | None = "paddlecd-registry"


@dataclass(frozen=True)
class RuntimeSettings:
    """Switches for one run: ``debug`` shows tracebacks, ``keep`` keeps the containers and
    networks a run made (for debugging), ``log_format`` is ``text`` or ``json`` (one JSON object
    per line), ``verbose`` streams every tool's output instead of the live view."""

    debug: bool = False
    keep: bool = False
    log_format: str = "text"
    verbose: bool = False


LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class Settings:
    """All settings, resolved. ``root`` is the project root; ``state_dir`` is relative to it.
    ``warnings`` are one-line notes about the environment (ignored ``PADDLECD_*`` variables) for the
    CLI to print; they are not settings."""

    root: Path = Path(".")
    state_dir: str = ".paddlecd"
    variants_file: str = "images/variants.yaml"
    lock_file: str = "images/lock.yaml"
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    build: BuildSettings = field(default_factory=BuildSettings)
    verify: VerifySettings = field(default_factory=VerifySettings)
    release: ReleaseSettings = field(default_factory=ReleaseSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    artifacts: ArtifactsSettings = field(default_factory=ArtifactsSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    warnings: tuple[str, ...] = ()

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
    ``images/variants.yaml``, else ``start`` (cwd).

    Raises:
        ConfigError: ``$PADDLECD_ROOT`` is set but empty (:func:`paddlecd.files.environ_value`).
    """
    named = files.environ_value("PADDLECD_ROOT")
    if named:
        return Path(named).resolve()
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

    Returns:
        The settings; ``warnings`` lists each ``PADDLECD_*`` variable that was ignored because it is
        not a setting (with a "did you mean" when it is close to one).

    Raises:
        ConfigError: malformed project YAML, an unknown key in it or in ``flags`` (with a
            suggestion), a bad value type, a ``state_dir`` that is a file, ``/``, a system folder
            or a home folder whole (:func:`paddlecd.files.place_problem`).
    """
    root = root or find_root()
    project = root / PROJECT_FILE
    from_file = (_flatten(_read_yaml(project), str(project))
                 if project.exists() or project.is_symlink() else {})
    from_env, read_from, warnings = _from_env(environ if environ is not None else os.environ)
    from_flags = {k: v for k, v in (flags or {}).items() if v is not None}
    for origin, layer in ((str(project), from_file), ("flags", from_flags)):
        for key in layer:
            _check_key(key, origin)
    origins = {
        **{k: Origin("file", str(project)) for k in from_file},
        **{k: Origin("env", read_from[k]) for k in from_env},
        **{k: Origin("flag", "flags") for k in from_flags},
    }
    settings = _build(root, {**from_file, **from_env, **from_flags}, origins)
    if settings.state.exists() and not settings.state.is_dir():
        raise ConfigError(f"state_dir {settings.state} is a file, not a folder",
                          "point state_dir (PADDLECD_STATE_DIR) at a folder; it is made if missing")
    # every task writes under state_dir (keys, evidence, the file store): /usr/local/x is refused
    # here by the setting's name, not later as an --out or a store URL nobody gave (a trial)
    problem = files.place_problem(str(settings.state.resolve()), writable=False)
    if problem:
        named = origins.get("state_dir", Origin("default", "")).text("state_dir")
        raise ConfigError(f"state_dir {settings.state} ({named}) {problem}",
                          "point state_dir at a folder of the project's or yours, e.g. .paddlecd")
    # a trial: lock_file naming a folder was "not a regular file (a lock file)", hint "delete it
    # and run: invoke lock" (a folder the user had not meant), exit 3; variants_file the same way
    for key, default in (("variants_file", "images/variants.yaml"),
                         ("lock_file", "images/lock.yaml")):
        path = settings.path(getattr(settings, key))
        if path.exists() and not path.is_file():
            origin = origins.get(key, Origin("default", ""))
            # trial 20: the default path itself a folder was told to point the setting at it
            hint = (f"make {default} the file again (git checkout {default}, or remove what is "
                    f"there), or point {key} at another file" if origin.kind == "default"
                    else f"point {key} at the file itself (default {default})")
            raise ConfigError(f"{key} {path} ({origin.text(key)}) is {files.kind_of(path)}, "
                              "not a file", hint)
    for section in ("registry", "release"):  # a trial: a CA file for plain HTTP, unsaid
        tls = getattr(settings, section)
        if tls.ca_file and tls.insecure:
            warnings.append(f"{section}.ca_file is set but {section}.insecure is true (plain "
                            "HTTP): the CA file is not used")
    return dataclasses.replace(settings, warnings=tuple(warnings))


def debug_requested(environ: Mapping[str, str] | None = None, *, root: Path | None = None) -> bool:
    """Whether ``runtime.debug`` is on, without resolving the whole cascade.

    For the CLI's catch site, which must decide on a traceback even when :func:`load` itself
    failed. See :func:`switch_requested`. Never raises.
    """
    return switch_requested("debug", environ, root=root)


def switch_requested(name: str, environ: Mapping[str, str] | None = None, *,
                     root: Path | None = None) -> bool:
    """Whether the switch ``runtime.<name>`` (debug, verbose) is on, without the whole cascade.

    Reads ``PADDLECD_RUNTIME_<NAME>``, then its alias ``PADDLECD_<NAME>``, then
    ``runtime.<name>`` in the project file; anything unreadable counts as off. Never raises.
    """
    env = os.environ if environ is None else environ
    for var in (f"PADDLECD_RUNTIME_{name.upper()}", f"PADDLECD_{name.upper()}"):
        if env.get(var):
            return env[var].strip().lower() in _TRUE
    try:
        data = _read_yaml((root or find_root()) / PROJECT_FILE)
        return str((data.get("runtime") or {}).get(name, "")).lower() in _TRUE
    except (ConfigError, OSError, AttributeError):
        return False


def _read_yaml(path: Path) -> dict[str, Any]:
    if path.is_symlink() and not path.exists():  # trial 21: read as absent, defaults used
        raise ConfigError(f"{path} is {files.kind_of(path)}, which does not exist",
                          "mount or create the settings file it names, or remove the link")
    if path.exists() and not path.is_file():  # trial 19: hint "pass the file itself" (no flag)
        raise ConfigError(f"{path}: not a regular file ({files.kind_of(path)})",
                          f"the project's settings are read from {path}: make it a YAML file "
                          "of settings, or remove it")
    data = files.read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping at the top level",
            # the README has no 'Configuration' section; the settings are in this doc
            "write section: {key: value} settings, e.g. 'registry: {url: host:5000}' "
            "(docs/configuration.md)",
        )
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


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where one setting's value came from, for the messages about it (a trial: a bad value of
    the project file was blamed on an environment variable nobody set): ``kind`` is ``file``
    (``name``: its path), ``env`` (``name``: the variable read, an alias such as
    ``PADDLECD_LOG_FORMAT`` or the full name), ``flag`` or ``default``."""

    kind: str
    name: str

    def text(self, key: str) -> str:
        """How a message names the value of ``key``: ``/p/paddlecd.yaml: registry.url``,
        ``PADDLECD_REGISTRY_URL``, ``the flag``, ``the default``."""
        return {"file": f"{self.name}: {key}", "env": self.name, "flag": "the flag",
                "default": "the default"}[self.kind]

    def example(self, key: str, value: Any) -> str:
        """``key`` set to ``value`` where it came from: ``PADDLECD_X=3``, or the file's YAML."""
        if self.kind == "file":
            section, _, leaf = key.rpartition(".")
            return (f"'{section}: {{{leaf}: {value}}}'" if section else f"'{key}: {value}'") \
                + f" in {self.name}"
        if self.kind == "env":
            return f"{self.name}={value}"
        return f"{_env_name(key)}={value}"


def _from_env(environ: Mapping[str, str]
              ) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Settings from ``PADDLECD_*`` variables, the variable each was read from (an alias such as
    ``PADDLECD_DEBUG`` or the full name), and a warning for each one that is not a setting."""
    out: dict[str, Any] = {}
    read_from: dict[str, str] = {}
    warnings: list[str] = []
    known = _all_keys()
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in NOT_SETTINGS:
            continue
        key = _env_key(name)
        if key in known:
            if name in ENV_ALIASES and _env_name(key) in environ:  # the full name wins
                if environ[name] != environ[_env_name(key)]:  # said, when they disagree
                    warnings.append(f"ignoring {name}={environ[name][:40]!r}: "
                                    f"{_env_name(key)}={environ[_env_name(key)][:40]!r} is set too "
                                    "and wins")
                continue
            out[key] = value
            read_from[key] = name
            continue
        close = _suggest_env(name, known)
        hint = f" (did you mean {close}?)" if close else ""
        warnings.append(f"ignoring {name}: not a setting{hint}")
    return out, read_from, warnings


ENV_PREFIX = "PADDLECD_"

# The runtime switches' documented short names (README "Configuration"), kept as aliases.
ENV_ALIASES = {"PADDLECD_DEBUG": "runtime.debug", "PADDLECD_KEEP": "runtime.keep",
               "PADDLECD_LOG_FORMAT": "runtime.log_format",
               "PADDLECD_VERBOSE": "runtime.verbose"}

# Variables with our prefix that are read elsewhere and are deliberately not settings: the root
# (read before any settings exist), registry credentials (read by paddlecd.registry.auth straight
# from the environment: secrets are never stored in Settings), the source URL label of a build and
# the golden-file switch of the tests, the signing key's PEM.
NOT_SETTINGS = frozenset({
    "PADDLECD_ROOT", "PADDLECD_REGISTRY_USERNAME", "PADDLECD_REGISTRY_PASSWORD",
    "PADDLECD_SOURCE_URL", "PADDLECD_UPDATE_GOLDEN",
    "PADDLECD_SIGNING_KEY",  # the PEM of the attestation signing key (a CI secret): signing/keys.py
})

_TRUE = ("1", "true", "yes", "on")


def _env_key(name: str) -> str:
    """``PADDLECD_REGISTRY_URL`` → ``registry.url``; ``PADDLECD_STATE_DIR`` → ``state_dir``."""
    if name in ENV_ALIASES:
        return ENV_ALIASES[name]
    section, _, key = name[len(ENV_PREFIX):].lower().partition("_")
    return f"{section}.{key}" if section in SECTIONS and key else f"{section}_{key}".rstrip("_")


def _env_name(key: str) -> str:
    """``registry.url`` → ``PADDLECD_REGISTRY_URL`` (the inverse of :func:`_env_key`)."""
    return ENV_PREFIX + key.replace(".", "_").upper()


def _all_keys() -> list[str]:
    not_keys = {"root", "warnings", *SECTIONS}
    keys = [f.name for f in dataclasses.fields(Settings) if f.name not in not_keys]
    for section, cls in SECTIONS.items():
        keys += [f"{section}.{f.name}" for f in dataclasses.fields(cls)]
    return keys


def _suggest(key: str, known: list[str]) -> str | None:
    """The known key closest to ``key``: a misspelt section alone, a key in a misspelt section,
    or a misspelt key (closeness is difflib's ratio ≥ 0.6)."""
    head, dot, rest = key.partition(".")
    if head not in SECTIONS:
        section = difflib.get_close_matches(head, list(SECTIONS), n=1)
        if section and not dot:
            return section[0]
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return close[0]
    if dot:  # a misspelt section: suggest the section with the same key
        section = difflib.get_close_matches(head, list(SECTIONS), n=1)
        return f"{section[0]}.{rest}" if section else None
    return None


def _suggest_env(name: str, known: list[str]) -> str | None:
    """The variable ``name`` was probably meant to be, compared without the prefix:
    ``PADDLECD_REGISTRY_URLL`` → ``PADDLECD_REGISTRY_URL``, ``PADDLECD_DEBG`` →
    ``PADDLECD_DEBUG``."""
    names = {n[len(ENV_PREFIX):]: n for n in (*map(_env_name, known), *ENV_ALIASES)}
    close = difflib.get_close_matches(name[len(ENV_PREFIX):], list(names), n=1)
    return names[close[0]] if close else None


def _check_key(key: str, origin: str) -> None:
    known = _all_keys()
    if key not in known:
        close = _suggest(key, known)
        hint = f"did you mean '{close}'?" if close else "known keys: " + ", ".join(known)
        raise ConfigError(f"{origin}: unknown setting '{key}'", hint)


ATTESTATION_LAYOUTS = ("bundle", "att")


def _build(root: Path, merged: Mapping[str, Any], origins: Mapping[str, Origin]) -> Settings:
    hints = typing.get_type_hints(Settings)
    kwargs: dict[str, Any] = {"root": root}

    def origin(key: str) -> Origin:
        return origins.get(key) or Origin("default", "")

    for name, sub in SECTIONS.items():
        sub_hints = typing.get_type_hints(sub)
        values = {k.split(".", 1)[1]: v for k, v in merged.items() if k.startswith(name + ".")}
        kwargs[name] = sub(**{k: _coerce(v, sub_hints[k], f"{name}.{k}", origin(f"{name}.{k}"))
                              for k, v in values.items()})
    for key, value in merged.items():
        if "." not in key:
            kwargs[key] = _coerce(value, hints[key], key, origin(key))
    return _checked(Settings(**kwargs), origin)


def _checked(settings: Settings, origin: Callable[[str], Origin]) -> Settings:
    """``settings`` with its log format normalised, once every cross-field rule holds: no
    credentials in URLs, registry hosts as host[:port], formats and bounds, repository names.

    Raises:
        ConfigError: the first rule broken, naming the setting and where its value came from.
    """
    log_format = settings.runtime.log_format.lower()
    if log_format not in LOG_FORMATS:
        where = origin("runtime.log_format")
        raise ConfigError(f"setting 'runtime.log_format' ({where.text('runtime.log_format')}) "
                          f"must be text or json, got {quoted(settings.runtime.log_format)}",
                          "e.g. " + where.example("runtime.log_format", "json"))
    settings = dataclasses.replace(
        settings, runtime=dataclasses.replace(settings.runtime, log_format=log_format))
    for key, hint in CREDENTIAL_FREE.items():  # before any message repeats the value
        section, name = key.split(".")
        value = getattr(getattr(settings, section), name)
        if value and _USERINFO.match(value):
            shown = _USERINFO.sub(lambda m: (m[1] or "") + "***@", value)
            raise ConfigError(f"setting '{key}' holds a user or password ({shown}): paddlecd "
                              "never reads credentials from a URL", hint)
    for key, host in (
        ("registry.url", settings.registry.url),
        ("release.registry", settings.release.registry),
    ):
        if host and ("://" in host or "/" in host):
            raise ConfigError(
                f"setting '{key}' is {host!r}: give host[:port] only",
                "no scheme or path (plain HTTP: registry.insecure=true; repository: "
                "registry.repository)",
            )
        port = host.rpartition(":")[2] if host and ":" in host.rpartition("]")[2] else None
        name = host[:-len(port) - 1] if port is not None else host
        if host and (not _HOST.fullmatch(name) or any(c.isspace() for c in host)):
            # a trial: '127.0.0.1 :5397' reached urllib3, and '127.0.0.1?x=1' port 80, reported
            # as a registry that is down; '127.0.0.1:5000 ' was "the port is not 1..65535"
            raise ConfigError(f"setting '{key}' ({origin(key).text(key)}) is {quoted(host)}: "
                              "not host[:port]",
                              "a DNS name, an IPv4 address or [IPv6], then an optional :port, "
                              "e.g. registry.example.com:5000 (no spaces, '?' or '#')")
        if port is not None and not (re.fullmatch("[0-9]{1,5}", port) and 1 <= int(port) <= 65535):
            raise ConfigError(f"setting '{key}' is {quoted(host)}: the port is not 1..65535",
                              "give host[:port], e.g. registry.example.com:5000")
    attestation_layouts(settings)  # refused here, before any verify runs
    slowdown_figures(settings)  # and here, before a verify's comparison or a promote's gate
    # refused here, not after a whole verify run or in promote's gate (a trial)
    release_models(settings, named=origin("release.models").text("release.models"))
    for key, (pattern, why) in FORMATS.items():
        section, name = key.split(".")
        value = getattr(getattr(settings, section), name)
        if value is not None and not re.fullmatch(pattern, str(value)):
            shown = "" if key in SECRET_FORMATS else f"{quoted(str(value))}: "
            raise ConfigError(f"setting '{key}' ({origin(key).text(key)}) is {shown}not {why}",
                              f"fix {origin(key).text(key)}")
    for key, (low, high, why) in BOUNDS.items():
        section, name = key.split(".")
        value = getattr(getattr(settings, section), name)
        if value is not None and not low <= value <= high:
            raise ConfigError(f"setting '{key}' ({origin(key).text(key)}) must be {low}..{high}, "
                              f"got {quoted(value)}", why)
    for key in ("registry.repository", "release.repository"):  # the spec's rule, up front
        section, name = key.split(".")
        check_repository(getattr(getattr(settings, section), name), what=f"setting '{key}'")
    return settings


# distribution/reference's domain grammar (a DNS name of alphanumeric labels joined by '.',
# inner '-'; or a bracketed IPv6 address) with an optional numeric port
# (a label is 63 characters at most, a name 253: RFC 1035 section 2.3.4; a trial's 300-character
# label ended in urllib3's LocationParseError traceback)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"(?=.{{1,253}}$)(?:{_LABEL}(?:\.{_LABEL})*)|\[[0-9A-Fa-f:.]+\]")
_MODEL_NAME = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"  # an RFC 1123 label, as artifacts.manifest


def release_models(settings: Settings, *, named: str = "release.models"
                   ) -> list[tuple[str, str | None]]:
    """``release.models`` (``"name@version,name"``) as ``[(name, version or None)]`` (None: the
    model's newest complete version), each checked as ``upload`` checks a name (an RFC 1123
    label) and a version (semver 2.0.0, ``semver``'s parser, no white space).

    Raises:
        ConfigError: an empty entry (``"a,,b"``), a bad name or version, naming the setting and
            where it came from (``named``: :meth:`Origin.text`, when :func:`load` checks it).
    """
    raw = settings.release.models
    out: list[tuple[str, str | None]] = []
    example = 'e.g. release.models: "ranker@1.2.0,embedder"'
    for item in (x.strip() for x in (raw or "").split(",")) if raw is not None else ():
        name, at, version = item.partition("@")
        if not item:
            raise ConfigError(f"setting 'release.models' ({named}) has an empty entry: "
                              f"{raw[:200]!r}", f"list models separated by one comma; {example}")
        if not re.fullmatch(_MODEL_NAME, name):
            raise ConfigError(f"setting 'release.models' ({named}): invalid model name "
                              f"{quoted(name)}", "use lowercase letters, digits and '-' (at most "
                              f"63); {example}")
        if at:
            try:
                if not version or any(ch.isspace() for ch in version):
                    raise ValueError(version)
                semver.Version.parse(version)
            except ValueError:
                raise ConfigError(f"setting 'release.models' ({named}): invalid model version "
                                  f"{quoted(version)} of {name}: not semver",
                                  f"write name@MAJOR.MINOR.PATCH, or the name alone for its "
                                  f"newest version; {example}") from None
        out.append((name, version or None))
    return out


def attestation_layouts(settings: Settings) -> tuple[str, ...]:
    """``verify.attestation_layouts`` as a tuple, in the order written (``bundle``, ``att``).

    Raises:
        ConfigError: empty, or a name other than ``bundle`` and ``att``.
    """
    written = [x.strip() for x in settings.verify.attestation_layouts.split(",")]
    given = [x for x in written if x]
    unknown = [x[:40] for x in given if x not in ATTESTATION_LAYOUTS]
    # an empty item ("bundle,,att", "att,") is refused as release.trusted_keys refuses one (a
    # trial: it was dropped without a word)
    empty = given and len(given) != len(written)
    if unknown or not given or empty:
        raise ConfigError(
            f"setting 'verify.attestation_layouts' is "
            f"{quoted(settings.verify.attestation_layouts)}: "
            + ("unknown " + ", ".join(unknown) if unknown else "an empty item" if empty
               else "no layout"),
            "give bundle, att or both (bundle,att: the default)",
        )
    return tuple(x for x in ATTESTATION_LAYOUTS if x in given)


def slowdown_figures(settings: Settings) -> tuple[tuple[str, float], ...]:
    """``release.max_slowdown_figures`` (``"train.*=0.2,allreduce.latency.*=0.5"``) as
    ``((pattern, fraction), …)`` in the order written; each fraction bounded as
    ``release.max_slowdown`` is (:data:`BOUNDS`).

    Raises:
        ConfigError: an empty entry, an entry that is not ``name=fraction``, a fraction outside
            the bounds (a trial: ``train.*=5000`` passed as "limit 5e+03x as slow" where
            ``release.max_slowdown: 5000`` is refused), a pattern given twice.
    """
    text, pairs = settings.release.max_slowdown_figures or "", []
    items = [x.strip() for x in text.split(",")] if text.strip() else []
    if "" in items:  # as release.models (a trial: "a=0.5,,b=1" skipped the gap unsaid)
        raise ConfigError(f"setting 'release.max_slowdown_figures' {quoted(text)} has an empty "
                          "entry", "drop the extra comma")
    low, high, why = BOUNDS["release.max_slowdown"]
    for item in items:
        name, _, value = item.partition("=")
        try:
            number = parse_number(value.strip(), whole=False)  # no nan, inf or 1_0
            if not name.strip() or number <= 0:
                raise ValueError(item)
        except ValueError:
            raise ConfigError(
                f"setting 'release.max_slowdown_figures': {quoted(item)} is not name=fraction",
                "e.g. release.max_slowdown_figures: \"train.*=0.2,allreduce.latency.*=0.5\"",
            ) from None
        if not low <= number <= high:
            raise ConfigError(f"setting 'release.max_slowdown_figures': {quoted(item)}: the "
                              f"fraction must be {low}..{high}, as release.max_slowdown's", why)
        if any(name.strip() == seen for seen, _ in pairs):  # a trial: the second one was
            raise ConfigError(                                # silently ignored
                f"setting 'release.max_slowdown_figures' gives {quoted(name.strip())} twice",
                "keep one limit per pattern")
        pairs.append((name.strip(), number))
    return tuple(pairs)


# Numeric settings with an upper bound besides "greater than 0", and why (the S3 transfer knobs
# are checked where a store is opened: artifacts/storage/s3.py).
BOUNDS = {
    "verify.cpu_ranks": (1, 64, "gloo ranks are processes on this machine (each imports Paddle)"),
    "verify.repeat": (1, 100, "each repetition re-runs the timed parts of the smoke suite"),
    "verify.busbw_fraction": (0, 1, "the share of the expected bus bandwidth a run must reach"),
    # upper bounds on every count, size and duration (a trial: verify.timeout 99999999999 passed
    # the "> 0" rule and ended in an OverflowError traceback from the socket timeout)
    "verify.timeout": (1, 7 * 86400, "the whole smoke run's limit in seconds: a week at most"),
    "verify.rendezvous_timeout": (1, 86400, "seconds the ranks wait for each other: a day at "
                                            "most"),
    "registry.push_retries": (1, 100, "attempts per request"),
    "registry.rate_limit_wait": (0.001, 3600, "seconds to wait on a 429 at most: an hour"),
    "release.evidence_max_age_hours": (0.001, 10 * 8760, "hours: ten years at most"),
    # verify --nodes is 1..512 (train.schema.json nodes): a bigger rule no run can satisfy
    "release.require_nodes": (1, 512, "the attested run's nodes: verify --nodes takes 1..512"),
    "release.max_slowdown": (0.000001, 1000, "a fraction: 0.1 allows 10% slower"),
    "retention.keep_days": (1, 36500, "days: a hundred years at most"),
    "retention.keep_last": (1, 1_000_000, "candidates kept per variant"),
    # S3's limits: 5 MiB..5 GiB a part, 5 TiB an object (AWS S3 User Guide, "Amazon S3 multipart
    # upload limits")
    # (a trial: 4 passed loading and was refused only by upload, naming no file)
    "storage.multipart_chunk_mb": (5, 5 * 1024, "S3 takes parts of 5 MiB..5 GiB"),
    "storage.multipart_threshold_mb": (5, 5 * 1024 * 1024,
                                       "S3 parts are 5 MiB at least, objects 5 TiB at most"),
    "storage.max_concurrency": (1, 64, "parallel part uploads"),
}


# URL settings that may not carry ``user:password@`` (it would be printed back in every message
# naming the endpoint), and where credentials go instead.
CREDENTIAL_FREE = {
    "registry.url": "drop it from the URL: docker login <host>, or PADDLECD_REGISTRY_USERNAME and "
                    "PADDLECD_REGISTRY_PASSWORD",
    "release.registry": "drop it from the URL: docker login <host>",
    "storage.url": "drop it from the URL: credentials come from the AWS chain (AWS_PROFILE, or "
                   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
    "storage.endpoint_url": "drop it from the URL: credentials come from the AWS chain "
                            "(AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
}
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/@\s]*@")


# String settings with a syntax, and what it is.
FORMATS = {
    "engine.kind": (r"auto|docker|podman", "auto, docker or podman"),
    # where a job runs (cluster.render.CLUSTERS): a trial's `kind: K8S` passed release.list and
    # doctor (as local) and was blamed on a --cluster flag nobody gave by deploy
    "cluster.kind": (r"local|k8s", "local or k8s"),
    # botocore's region check (botocore/utils.py validate_region_name, the same pattern), here so
    # that a bad region names the setting, not "the AWS_* variable" botocore blames
    "storage.region": (r"(?![0-9]+$)(?!-)[a-zA-Z0-9-]{,63}(?<!-)", "an AWS region name such as "
                       "us-east-1 (letters, digits and '-')"),
    # docker run --shm-size: a number with a unit b, k, m or g, or none (docker/go-units RAMInBytes)
    # not 0: Docker takes a zero /dev/shm size as "its default" (64 MiB), silently (a trial)
    # and at most 6 digits: 99999999999g overflowed Docker's int64 ShmSize (a trial)
    "verify.shm_size": (r"0*[1-9][0-9]{0,5}[bkmgBKMG]?",
                        "a Docker size above 0 of at most 6 digits, such as 2g or 512m"),
    "verify.gpu_shm_size": (r"0*[1-9][0-9]{0,5}[bkmgBKMG]?",
                            "a Docker size above 0 of at most 6 digits, such as 16g"),
    # botocore's request_checksum_calculation values (botocore/config.py), checked here for every
    # store, not only when an S3 client is made (a trial: `Always` passed on a file:// store)
    "storage.checksum_mode": (r"when_required|when_supported", "when_required or when_supported"),
    # botocore's s3.addressing_style values (botocore/config.py; storage.s3.ADDRESSING_STYLES), the
    # same way, whatever the store (a file:// store never reads it)
    "storage.addressing_style": (r"path|virtual|auto", "path, virtual or auto"),
    # an S3 endpoint is an http(s) URL (ftp:// reached botocore: exit 8, "not a valid URI"):
    # a host (a name, an IPv4 or a [bracketed IPv6]), a port 1..65535, a path; no query or
    # fragment (a trial: "?x=1" and port 99999 reached botocore the same way)
    "storage.endpoint_url": (r"https?://([^/\s:?#@\[\]]+|\[[0-9A-Fa-f:.]+\])"
                             r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}"
                             r"|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?(/[^\s?#]*)?",
                             "an http(s) URL of a host and a port 1..65535 without a query, such "
                             "as http://minio:9000"),
    # handed to debootstrap as its MIRROR argument and to pip as --index-url: a URL, never an
    # option (a trial: '--include=evil' and 'ftp://x y' were planned for debootstrap, and
    # '--trusted-host=evil' passed for pip). debootstrap(8) takes http(s) and file: mirrors;
    # pip(1) an http(s) or file: index. The pip URL may hold a token: never quoted (SECRET_FORMATS)
    "build.debian_mirror": (r"(https?|file):/{1,3}[^\s\x00-\x1f\x7f'\"\\]+",
                            "an http(s) or file: URL such as http://deb.debian.org/debian"),
    "build.pip_index_url": (r"(https?|file):/{1,3}[^\s\x00-\x1f\x7f'\"\\]+",
                            "an http(s) or file: URL such as https://pypi.org/simple"),
    # Kubernetes names: a namespace is an RFC 1123 label, a Secret's name a DNS subdomain
    # (kubernetes.io/docs/concepts/overview/working-with-objects/names)
    "cluster.namespace": (r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a namespace name (RFC 1123 "
                          "label: a-z, 0-9 and '-', at most 63)"),
    "cluster.image_pull_secret": (r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                                  r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                                  "a Secret name (DNS subdomain: a-z, 0-9, '-' and '.')"),
}


# Settings that are comma-separated lists, each item trimmed ("bundle, att")
COMMA_LISTS = frozenset({"verify.attestation_layouts", "release.trusted_keys", "release.models",
                         "release.max_slowdown_figures"})


# FORMATS whose values may carry a secret (a pip index URL with a token): their errors never
# quote the value.
SECRET_FORMATS = frozenset({"build.pip_index_url"})


# ASCII digits only, nothing around them: Python's int()/float() also take "1_0" (10), " 5 ",
# fullwidth "２" and "nan"/"inf", none of which anyone means as a count or a tolerance.
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def parse_number(text: Any, *, whole: bool) -> int | float:
    """``text`` (a string, or a number from YAML) as an int (``whole``) or a finite float.

    Accepts what a person types as a number: ``3``, ``-1``, ``1.5``, ``1e-5`` (ASCII, nothing
    around it); a YAML float is not a whole number and a YAML bool is no number at all.

    Raises:
        ValueError: anything else, including ``1_0``, `` 5 ``, ``２``, ``nan`` and ``inf``.
    """
    if isinstance(text, bool) or (whole and isinstance(text, float)):
        raise ValueError(text)
    if isinstance(text, (int, float)):
        number: int | float = text
    elif isinstance(text, str) and (_WHOLE if whole else _DECIMAL).fullmatch(text):
        number = int(text) if whole else float(text)
    else:
        raise ValueError(text)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(text)
    return number


def _written(value: Any) -> str:
    """``value`` as YAML writes it: ``true``, ``false``, ``null``, a number; text quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return quoted(value)


def _coerce(value: Any, typ: Any, key: str, origin: Origin) -> Any:
    args = typing.get_args(typ)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), typ) if args else typ
    if isinstance(value, str) and not value.strip():
        # an empty value is never the default: a typo'd or unset CI secret must not fall back
        raise ConfigError(
            f"setting '{key}' ({origin.text(key)}) is empty",
            "give a value, or remove the setting to use the default"
            + (" (or write null for none)" if optional else ""),
        )
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null")):
        if optional:
            return None
        raise ConfigError(f"setting '{key}' ({origin.text(key)}) may not be empty",
                          "remove it to use the default")
    if isinstance(value, (list, dict, tuple, set)):  # trial 21: "got a dict", Python's word
        raise ConfigError(
            f"setting '{key}' ({origin.text(key)}) must be a single value, got a "
            f"{'mapping' if isinstance(value, dict) else 'list'}",
            "write one value, e.g. " + origin.example(key, "..."),
        )
    if base is str and isinstance(value, (bool, int, float)):  # trial 21: variants_file: 5 was
        written = _written(value)  # "variants file not found: <root>/5", the setting unnamed
        raise ConfigError(f"setting '{key}' ({origin.text(key)}) is {written}, not text",
                          f"write the text it names; quote it if you mean {written!r} itself")
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
            # True is no count, and 1.5 retries is not 1
            number = base(parse_number(value, whole=base is int))
            if number <= 0:  # every numeric setting is a count, a size or a duration
                raise ConfigError(
                    f"setting '{key}' ({origin.text(key)}) must be greater than 0, got "
                    f"{quoted(value)}",
                    "use a positive number",
                )
            return number
        text = str(value)
        if text != text.strip() and key not in COMMA_LISTS:  # trial 20: storage.url
            # 'file:///s ' made a folder 's ' (a comma list trims each of its items)
            shown = "" if key in SECRET_FORMATS else f" {quoted(text)}"
            raise ConfigError(
                f"setting '{key}' ({origin.text(key)}){shown} has white space around it",
                "drop the spaces: no name, path, URL or reference starts or ends with one")
        return text
    except (TypeError, ValueError) as e:
        digits = str(value).strip().lstrip("+-")
        if base in (int, float) and len(digits) > 100 and digits.isdigit():
            # a trial: 5,000 nines were "not an integer" (past Python's 4,300-digit limit for
            # reading one), while 100 nines were "must be 1..64"
            raise ConfigError(
                f"setting '{key}' ({origin.text(key)}): {quoted(value)} is a number of "
                f"{len(digits)} digits, far past any bound of the setting",
                "give a number within its bound (docs/configuration.md lists them)") from e
        raise ConfigError(
            f"setting '{key}' ({origin.text(key)}): {_written(value)} is not "
            + ("a whole number" if base is int else "a number" if base is float
               else "true or false"),
            "use true or false (also 1/0, yes/no, on/off)" if base is bool
            # a trial: verify.timeout 1.5 was "not an integer", hint "give a number"
            else f"give a whole number, e.g. {origin.example(key, 3)}" if base is int
            else f"give a number, e.g. {origin.example(key, 1.5)}",
        ) from e
