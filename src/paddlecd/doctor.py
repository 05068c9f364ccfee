"""doctor: can this machine run the pipelines? One check per line, a hint for each problem.

Checks: the engine and a BuildKit builder; the registry (reachable, credentials accepted); the host
NVIDIA driver against every GPU variant in use (the ``NVIDIA_REQUIRE_CUDA`` of its locked base when
that image is on this engine, else NVIDIA's table in :mod:`paddlecd.verify.drivers`);
the NVIDIA container runtime; free disk under the engine's root folder; the state folder
(writable, with room); the artifact store (S3
credentials and bucket); the kubeconfig context when the cluster is Kubernetes; the signing and
trusted keys (they load, and the signing keys are trusted).

Status ``fail`` only for what would stop a pipeline here; ``warn`` for what stops only some of it
(GPU variants configured on a machine without a GPU, unless ``require_gpu``). Library code: returns
:class:`Check` rows, never prints.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from paddlecd import engine
from paddlecd.artifacts import storage
from paddlecd.config import Settings
from paddlecd.errors import DoctorError, PaddlecdError, RegistryError
from paddlecd.image import lock, variants
from paddlecd.registry import client as registry
from paddlecd.verify import drivers

GIB = 1024**3
# Disk budget per variant, GiB: image + its base + build cache. The cpu image measures 1.1 GB here
# (docker images); the official Paddle GPU images unpack to well over 10 GB (CUDA + cuDNN +
# TensorRT).
DISK_GIB = {"cpu": 4, "gpu": 25}


@dataclass(frozen=True)
class Check:
    """One doctor line: ``status`` is ``ok``, ``warn``, ``fail`` or ``skip``; ``hint`` says what to
    do."""

    name: str
    status: str
    detail: str
    hint: str | None = None

    def text(self) -> str:
        """The row for a terminal: ``OK    engine          detail``, and the hint on a second line
        for a row that is not ok."""
        line = f"{self.status.upper():<4}  {self.name:<15} {self.detail}"
        return line + (f"\n      hint: {self.hint}" if self.hint and self.status != "ok" else "")

    def to_json(self) -> str:
        """The row as one JSON object (``--log-format json``), shaped like the pipeline's events:
        ``{"event": "check", "check", "status", "detail", "hint"}``, keys sorted."""
        return json.dumps({"event": "check", "check": self.name, "status": self.status,
                           "detail": self.detail, "hint": self.hint}, sort_keys=True)


@dataclass(frozen=True)
class Host:
    """What the checks share: the ``variants`` in use, the NVIDIA ``driver`` and ``gpus`` count of
    this host, the engine ``info`` (None when the engine is down), ``require_gpu``, and
    ``base_env``: the config environment of each GPU variant's locked base found on the engine
    (``{variant: {NAME: value}}``)."""

    settings: Settings
    variants: tuple[variants.Variant, ...]
    driver: str | None
    gpus: int
    info: dict[str, Any] | None
    require_gpu: bool
    base_env: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def gpu_variants(self) -> list[variants.Variant]:
        return [v for v in self.variants if v.is_gpu]


def check_engine(host: Host) -> Check:
    """Engine reachable (``/info``) and a BuildKit builder usable (engine.pick_builder); podman
    builds through its own API (buildah), without a docker CLI."""
    if host.info is None:
        engine.info()  # raises the EngineError with its cause and hint
    if engine.kind() == "podman":
        return Check(name="engine", status="ok",
                     detail=f"podman {host.info['ServerVersion']} (Docker-compatible API); "
                            "builder: buildah through the engine API")
    builder = engine.pick_builder(host.settings.build.docker_cli)
    return Check(
        name="engine",
        status="ok",
        detail=f"Docker {host.info['ServerVersion']}; BuildKit builder: {builder.description}",
    )


def check_registry(host: Host) -> Check:
    """``GET /v2/`` on the candidate registry with the credentials push would use."""
    url = host.settings.registry.url
    return _registry_api(registry.client_for(host.settings), url, "registry")


def _registry_api(client: Any, url: str, name: str) -> Check:
    """``GET /v2/`` answered by the registry API (distribution spec end-1): a 200 that is a web
    page (``text/html`` without ``Docker-Distribution-API-Version``) is a server in front of
    it, not the registry (a trial: nginx's welcome page passed as "OK registry … (logged in
    as …)"); "logged in" only when the registry asked for the credentials and took them."""
    resp = client.request("GET", "", [], f"checking {name} {url}")
    page = (resp.headers.get("Content-Type", "").startswith("text/html")
            or resp.content.lstrip()[:1] == b"<")
    if page and "Docker-Distribution-API-Version" not in resp.headers:
        raise RegistryError(f"{url} answered GET /v2/ with a web page (HTML), not the registry "
                            "API", "check registry.url / release.registry (PADDLECD_*_URL): host "
                            "and port of the registry, not of a web server or proxy page")
    who = (f"logged in as {client.credentials.username}" if client.authenticated
           else "anonymous access allowed")
    return Check(name=name, status="ok", detail=f"{url} answers /v2/ ({who})")


def check_release_registry(host: Host) -> Check:
    """``GET /v2/`` on a separate release registry (``release.registry``) with the credentials
    promote would use; ``skip`` when releases go to ``registry.url`` (a trial: a release
    registry that was down or refused the credentials passed doctor, and the release pipeline
    stopped at promote)."""
    s = host.settings
    url = s.release.registry
    if not url or url == s.registry.url:
        return Check(name="release registry", status="skip",
                     detail="release.registry unset: releases go to registry.url")
    return _registry_api(registry.client_for(s, url), url, "release registry")


def check_gpu_driver(host: Host) -> Check:
    """The host driver against the CUDA of every GPU variant in use (drivers.check)."""
    gpu = host.gpu_variants
    if not host.driver:
        if not gpu and host.require_gpu:  # a trial: the flag was dropped unsaid
            return Check(  # warned, not failed: it makes GPU variants' "no GPU" fail, and none is
                name="gpu driver",  # selected (gpu-smoke.yml passes it for every variant)
                status="warn",
                detail="no GPU on this host; only CPU variants in use, so --require-gpu "
                "requires nothing here",
                hint="drop --require-gpu for CPU variants, or select a GPU variant",
            )
        if not gpu:
            return Check(
                name="gpu driver",
                status="ok",
                detail="no GPU on this host; only CPU variants in use",
            )
        names = ", ".join(v.name for v in gpu)
        return Check(
            name="gpu driver",
            status="fail" if host.require_gpu else "warn",
            detail=f"no GPU on this host (nvidia-smi found none): GPU variants {names} "
            "cannot be verified here",
            hint="run them on a GPU runner, or select CPU variants: invoke doctor --variant cpu",
        )
    refused = []  # the toolkit's rule on a locked base that states NVIDIA_REQUIRE_CUDA
    results = []
    for v in gpu:
        try:
            by_image = (drivers.check_image(v.cuda or "", host.base_env[v.name],
                                            drivers.host_facts(host.driver))
                        if v.name in host.base_env else None)
        except PaddlecdError as e:
            refused.append(f"{v.name}: {e.cause}")
            continue
        results.append(by_image or drivers.check(v.cuda or "", host.driver))
    bad = [r for r in results if not r.ok]
    if bad or refused:
        return Check(
            name="gpu driver",
            status="fail",
            detail="; ".join(refused + [r.message for r in bad]),
            hint=f"upgrade the NVIDIA driver to >= {max(drivers.required(r.cuda)[1] for r in bad)}"
            if bad else "install a driver the base's NVIDIA_REQUIRE_CUDA lists (docs/gpu.md)",
        )
    partial = [r for r in results if not r.full]
    detail = f"driver {host.driver}, {host.gpus} GPU(s); " + (
        "; ".join(r.message for r in partial)
        or f"meets CUDA {', '.join(sorted({r.cuda for r in results})) or '-'}"
    )
    return Check(name="gpu driver", status="warn" if partial else "ok", detail=detail,
                 hint="upgrade the driver for PTX JIT and full features" if partial else None)


def check_nvidia_runtime(host: Host) -> Check:
    """The NVIDIA container runtime is registered with the engine (``docker info`` Runtimes)."""
    runtimes = sorted((host.info or {}).get("Runtimes") or {})
    if "nvidia" in runtimes:
        return Check(
            name="nvidia runtime", status="ok", detail="nvidia runtime registered with the engine"
        )
    needed = bool(host.driver and host.gpu_variants)
    return Check(
        name="nvidia runtime",
        status="fail" if needed or (host.require_gpu and host.gpu_variants) else "warn",
        detail=f"no nvidia runtime (engine runtimes: {', '.join(runtimes) or 'none'})"
        + ("" if host.driver else "; no GPU on this host either"),
        hint="install the NVIDIA Container Toolkit, then: "
        "nvidia-ctk runtime configure --runtime=docker and restart dockerd",
    )


def check_disk(host: Host) -> Check:
    """Free space under the engine's root folder against a per-variant budget (:data:`DISK_GIB`)."""
    root = (host.info or {}).get("DockerRootDir") or "/var/lib/docker"
    root = root if os.path.isdir(root) else "/"  # a remote engine's root is not visible here
    free = shutil.disk_usage(root).free / GIB
    runnable = [v for v in host.variants if not v.is_gpu or host.driver]
    need_here, need_all = (sum(DISK_GIB[v.device] for v in vs) for vs in (runnable, host.variants))
    status = "fail" if free < need_here else "warn" if free < need_all else "ok"
    return Check(
        name="disk",
        status=status,
        detail=f"{free:.0f} GiB free in {root}; the variants in use need about {need_all} GiB",
        hint=None
        if status == "ok"
        else f"free space in {root} (docker system prune / docker builder prune)",
    )


# What a run keeps in the state folder at the least: logs, evidence, records (a verify's evidence
# with its JUnit and rank logs is under 1 MB; the file store's models are more).
STATE_MIN_MIB = 100


def check_state(host: Host) -> Check:
    """The state folder (``state_dir``) can be written: the folder, or the nearest one above it
    that exists (it is made on first use), is writable (``access(2)``: a read-only mount says
    ``EROFS``) and has :data:`STATE_MIN_MIB` free (a trial: doctor said all was well for a
    read-only state folder that every task then failed to write)."""
    state = host.settings.state
    existing = next(p for p in (state, *state.parents) if p.exists())
    where = state if existing == state else f"{state} (to be made in {existing})"
    if not os.access(existing, os.W_OK | os.X_OK):
        return Check(name="state", status="fail", detail=f"{where} cannot be written (a read-only "
                     "mount, or its permissions)",
                     hint="point state_dir (PADDLECD_STATE_DIR) at a writable folder, or remount "
                     "it read-write")
    free = shutil.disk_usage(existing).free
    if free < STATE_MIN_MIB * 1024**2:
        return Check(name="state", status="fail",
                     detail=f"{where}: {free / 1024**2:.0f} MiB free, under {STATE_MIN_MIB} MiB",
                     hint=f"free space there (df -h {existing}), or point state_dir elsewhere")
    return Check(name="state", status="ok", detail=f"{where} writable, {free / GIB:.0f} GiB free")


def check_storage(host: Host) -> Check:
    """The artifact store opens: HeadBucket with the AWS credential chain for s3://, a folder for
    file://; the store's quirks are named (``fail`` for one that makes uploads fail with these
    settings, with its hint; artifacts/storage/quirks.py)."""
    url = storage.default_store_url(host.settings)
    store = storage.store_for(host.settings)
    store.check()
    found = store.quirks()
    failing = [q for q in found if q.hint]
    detail = f"{url} reachable" + (" (credentials accepted)" if url.startswith("s3://") else "")
    return Check(
        name="storage",
        status="fail" if failing else "ok",
        detail="; ".join([detail, *(f"store {q.detail}" for q in found)]),
        hint="; ".join(q.hint for q in failing if q.hint) or None,
    )


def check_kubeconfig(host: Host) -> Check:
    """A kubeconfig and its context load when ``cluster.kind`` is ``k8s``."""
    if host.settings.cluster.kind != "k8s":
        return Check(
            name="kubeconfig",
            status="skip",
            detail=f"cluster.kind is {host.settings.cluster.kind}: no kubeconfig needed",
        )
    from paddlecd.cluster import k8s

    api = k8s.connect(host.settings)
    api.close()
    return Check(name="kubeconfig", status="ok", detail=f"kubeconfig loads; context {api.context}")


def check_keys(host: Host) -> Check:
    """The signing keys and the trusted keys load (present, readable, ECDSA P-256 PEM), and each
    signing key (verify's, and ``artifacts.signing_key`` when set) is among the trusted ones, so
    promote and artifacts.download accept what this machine signs. Keys are named by their id
    (:func:`paddlecd.signing.keys.fingerprint`), as every other command names them.

    ``fail``: a configured key that does not load. ``warn``: no signing key (verify and push sign
    nothing; promote refuses an unsigned candidate), no trusted key, or a signing key no trusted
    key matches (right on a machine that signs for others; wrong where it also promotes)."""
    from paddlecd.signing import keys

    s = host.settings
    signing: list[tuple[str, str]] = []  # (what, id)
    if keys.configured(s):
        signing.append((f"signing key ({keys.signer_source(s)})",
                        keys.fingerprint(_public_of(keys.signer(s)))))
    if s.artifacts.signing_key:
        path = s.path(s.artifacts.signing_key)
        own = keys.load_signer(path, "artifacts.signing_key")
        signing.append((f"model signing key ({path})", keys.fingerprint(_public_of(own))))
    trusted_set = bool(s.release.trusted_keys) or keys.state_pair(s)[1].is_file()
    trusted = keys.trusted(s) if trusted_set else []
    ids = {t.keyid for t in trusted}
    detail = "; ".join(
        [f"{what} {kid}" for what, kid in signing] or ["no signing key"]
    ) + "; trusted: " + (", ".join(f"{t.keyid} ({t.source})" for t in trusted) or "none")
    unmatched = [f"{kid}" for _, kid in signing if trusted and kid not in ids]
    if not signing:
        return Check("keys", "warn", detail, "verify and push sign nothing and promote refuses "
                     "unsigned candidates: create a pair with invoke evidence.keygen, or set "
                     "verify.signing_key")
    if not trusted:
        return Check("keys", "warn", detail, "promote and artifacts.download check nothing "
                     "here: set release.trusted_keys to the committed public key(s)")
    if unmatched:
        return Check("keys", "warn", detail, f"{', '.join(unmatched)} is not a trusted key: "
                     "promote and artifacts.download here refuse what it signs; add its .pub "
                     "to release.trusted_keys (or sign with a trusted key)")
    return Check("keys", "ok", detail)


def _public_of(signer: Any) -> Any:
    """The ``cryptography`` public key of a securesystemslib ``CryptoSigner``."""
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(signer.public_key.keyval["public"].encode())


CHECKS: tuple[tuple[str, Callable[[Host], Check]], ...] = (
    ("engine", check_engine), ("registry", check_registry),
    ("release registry", check_release_registry), ("gpu driver", check_gpu_driver),
    ("nvidia runtime", check_nvidia_runtime), ("disk", check_disk), ("state", check_state),
    ("storage", check_storage),
    ("kubeconfig", check_kubeconfig), ("keys", check_keys),
)


def run(settings: Settings, *, names: Iterable[str] = (), require_gpu: bool = False) -> list[Check]:
    """Run every check; a check that raises a paddlecd error is a ``fail`` row with its cause and
    hint.

    Args:
        names: the variants in use (default: every variant in images/variants.yaml).
        require_gpu: GPU variants without a GPU here fail instead of warn.

    Raises:
        ConfigError: an unknown variant or a bad variants file.
    """
    chosen = tuple(variants.get(settings, n) for n in names) or tuple(
        variants.load(settings).values()
    )
    driver, gpus = drivers.host_gpus()
    try:
        info = engine.info()
    except PaddlecdError:
        info = None
    host = Host(settings=settings, variants=chosen, driver=driver, gpus=gpus, info=info,
                require_gpu=require_gpu,
                base_env=base_envs(settings, chosen) if info and driver else {})
    rows = []
    for name, check in CHECKS:
        try:
            rows.append(check(host))
        except PaddlecdError as e:
            rows.append(Check(name=name, status="fail", detail=e.cause, hint=e.hint))
    return rows


def base_envs(settings: Settings, chosen: Iterable[variants.Variant]) -> dict[str, dict[str, str]]:
    """``{variant: config env}`` of the GPU variants whose locked base image is on this engine
    (what ``build`` pulled); a variant without a pin, or whose base is not here, is left out (its
    driver is then judged by NVIDIA's table). Never raises: a lock or engine problem has its own
    check."""
    try:
        pins = lock.read(settings)
    except PaddlecdError:
        return {}
    found = {}
    for v in chosen:
        entry = pins.get(v.name)
        try:
            if v.is_gpu and entry and engine.image_exists(entry.pinned):
                found[v.name] = engine.image_env(entry.pinned)
        except PaddlecdError:
            continue
    return found


def verdict(rows: Iterable[Check]) -> DoctorError | None:
    """The error a doctor run ends with (exit 11), or None when no row is ``fail``."""
    failed = [r.name for r in rows if r.status == "fail"]
    if not failed:
        return None
    return DoctorError(f"doctor: {len(failed)} check(s) failed: {', '.join(failed)}",
                       "fix the FAIL lines above, then re-run")
