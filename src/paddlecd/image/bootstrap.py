"""Base bootstrap (the air-gapped path): build the CPU Paddle base locally and push it.

Steps, each cached: ``debootstrap`` a minimal Debian rootfs from the host's configured mirror with
the runtime packages Paddle needs (libgomp1 for its OpenMP kernels, python3-venv…), import it into
the engine, BuildKit-build ``images/base/Dockerfile.cpu`` on it (PyPI ``paddlepaddle`` in a venv; CA
bundle and index URL as secrets), tag it as the variant's ``base`` and push it to the configured
registry.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from paddlecd import engine, proc
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, EngineError, NotFoundError
from paddlecd.image import downloads, lock, variants
from paddlecd.image import push as publish
from paddlecd.image.build import buildkit_build
from paddlecd.registry import client as registry
from paddlecd.types import Echo, Transfer

DEFAULT_MIRROR = "http://deb.debian.org/debian"


def host_mirror(settings: Settings, sources: list[Path] | None = None) -> str:
    """The Debian mirror to debootstrap from: settings.build.debian_mirror, else the first ``URIs:``
    / ``deb`` line of the host's apt sources (deb822 ``*.sources`` or ``sources.list``) that is a
    Debian archive (not security, not Ubuntu's), else deb.debian.org."""
    if settings.build.debian_mirror:
        return settings.build.debian_mirror
    if sources is None:
        sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [
            Path("/etc/apt/sources.list")
        ]
    for path in sources:
        text = path.read_text() if path.is_file() else ""
        m = re.search(r"^URIs:\s*(\S+)", text, re.M) or re.search(
            r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M
        )
        # an Ubuntu (or other derivative's) archive does not serve Debian suites such as bookworm
        if m and "security" not in m.group(1) and "ubuntu" not in m.group(1).lower():
            return m.group(1)
    return DEFAULT_MIRROR


def base_present(settings: Settings, v: variants.Variant) -> bool:
    """True when the registry already holds ``v.base``."""
    ref = registry.parse_reference(v.base)
    try:
        registry.client_for(settings, ref.registry).resolve(ref.repository, ref.identifier)
        return True
    except NotFoundError:
        return False


def rootfs(settings: Settings, v: variants.Variant, *, on_line: Echo | None = None,
           on_transfer: Transfer | None = None) -> str:
    """Debootstrap (cached under ``<state>/bootstrap``) and import the rootfs; returns the local
    image ref. ``on_line`` gets debootstrap's output, ``on_transfer`` the bytes of the packages
    it retrieves (:class:`downloads.DebootstrapOutput`).

    Raises:
        EngineError: debootstrap or the import failed (debootstrap needs root).
    """
    assert v.bootstrap is not None
    boot = v.bootstrap
    key = "-".join([boot.suite, *sorted(boot.packages)])
    ref = f"paddlecd-rootfs:{boot.suite}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if engine.image_exists(ref):
        return ref
    work = settings.state / "bootstrap" / ref.split(":")[1]
    target, tar = work / "rootfs", work / "rootfs.tar"
    if not (target / ".paddlecd-complete").exists():
        if os.geteuid() != 0:
            raise EngineError(
                "debootstrap needs root to build the base rootfs",
                "run the bootstrap as root: sudo -E .venv/bin/invoke image.bootstrap (once per "
                "registry)",
            )
        if target.exists():  # a half-made rootfs from an interrupted run
            shutil.rmtree(target)
        target.mkdir(parents=True)
        debootstrap(boot.suite, target, host_mirror(settings), boot.packages, on_line=on_line,
                    on_transfer=on_transfer)
        (target / ".paddlecd-complete").touch()
    proc.run(
        ["tar", "-C", str(target), "--exclude=./.paddlecd-complete", "-cf", str(tar), "."],
        what="packing the rootfs",
    )
    engine.import_rootfs(str(tar), ref, changes=["ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'])
    tar.unlink()
    return ref


def debootstrap(suite: str, target: Path, mirror: str, packages: tuple[str, ...], *,
                on_line: Echo | None = None, on_transfer: Transfer | None = None) -> None:
    """Debootstrap a minbase ``suite`` with ``packages`` into ``target`` from ``mirror``, in its
    debian-installer mode with fd 3 (the protocol that carries the byte counts) merged into
    stdout, read by :class:`downloads.DebootstrapOutput`.

    Raises:
        EngineError: debootstrap is missing, or it failed (its last message is the cause).
    """
    reader = downloads.DebootstrapOutput(on_line, on_transfer)
    args = ["--variant=minbase", "--include=" + ",".join(packages), suite, str(target), mirror]
    # debootstrap refuses --debian-installer unless fd 3 is open; a shell is the one way to
    # open it, since proc runs each command with fds 0-2 only
    done = proc.run(["sh", "-c", 'exec "$@" 3>&1', "debootstrap", proc.which("debootstrap"),
                     "--debian-installer", *args], on_line=reader, check=False,
                    what=f"debootstrap {suite}")
    if done.returncode:
        raise EngineError(f"debootstrap {suite} failed (exit {done.returncode}): "
                          f"{reader.last_message or 'no message'}",
                          "see its output above; a mirror that cannot be reached: set "
                          "build.debian_mirror (PADDLECD_BUILD_DEBIAN_MIRROR)")


def bootstrap(settings: Settings, variant_name: str = "cpu", *, force: bool = False,
              on_line: Echo | None = None, on_progress: Echo | None = None,
              on_transfer: Transfer | None = None) -> str | None:
    """Build and push the base of ``variant_name`` unless the registry already has it.

    ``on_line`` gets the tools' output, ``on_progress`` the push's layer progress, ``on_transfer``
    the bytes of debootstrap's packages and pip's wheels (:mod:`.downloads`).

    Returns:
        the pushed base digest, or None when the base was already present (and ``force`` is off).

    Raises:
        ConfigError: the variant has no ``bootstrap`` section. EngineError, RegistryError: as raised
            by the steps.
    """
    v = _bootstrappable(settings, variant_name)
    if not force and base_present(settings, v):
        return None
    build_base(settings, v.name, on_line=on_line, on_transfer=on_transfer)
    return publish.push_reference(settings, v.base, on_progress=on_progress or on_line)


def build_base(settings: Settings, variant_name: str, *, on_line: Echo | None = None,
               on_transfer: Transfer | None = None) -> str:
    """Debootstrap the rootfs (:func:`rootfs`) and build the base of ``variant_name`` on it as the
    local image ``v.base``, without pushing; returns that tag. Both steps are cached by the engine,
    so a later :func:`bootstrap` of the same variant into any registry only pushes.

    Raises:
        ConfigError: the variant has no ``bootstrap`` section.
        EngineError: debootstrap, the import or the build failed.
    """
    v = _bootstrappable(settings, variant_name)
    assert v.bootstrap is not None  # checked by _bootstrappable
    base_ref = rootfs(settings, v, on_line=on_line, on_transfer=on_transfer)
    dockerfile = settings.root / "images" / "base" / "Dockerfile.cpu"
    buildkit_build(
        settings,
        context=dockerfile.parent,
        dockerfile=dockerfile,
        tag=v.base,
        build_args={
            "ROOTFS": base_ref,
            "PADDLE_WHEEL": v.bootstrap.wheel,
            "PIP_PACKAGES": " ".join(v.bootstrap.pip),
        },
        labels={
            "org.opencontainers.image.title": (
                f"paddlecd CPU base ({v.bootstrap.suite}, {v.bootstrap.wheel})"
            ),
            "io.paddlecd.paddle.version": v.paddle,
            "io.paddlecd.device": "cpu",
        },
        log_name=f"bootstrap-{v.name}",
        on_line=downloads.PipOutput(on_line, on_transfer),
    )
    return v.base


@dataclass(frozen=True)
class Bootstrapped:
    """What :func:`bootstrap_and_lock` did: the pushed ``digest`` (None: the base was already in the
    registry) and the ``locked`` entry (None when locking was not asked for)."""

    variant: str
    digest: str | None
    locked: lock.LockEntry | None


def bootstrap_and_lock(settings: Settings, variant_name: str = "cpu", *, force: bool = False,
                       then_lock: bool = True, on_line: Echo | None = None,
                       on_progress: Echo | None = None,
                       on_transfer: Transfer | None = None) -> Bootstrapped:
    """:func:`bootstrap`, then pin the base in ``<state>/lock.local.yaml`` (image.bootstrap).

    Raises:
        ConfigError, EngineError, RegistryError: as :func:`bootstrap`.
        LockError: as :func:`lock.lock`.
    """
    digest = bootstrap(settings, variant_name, force=force, on_line=on_line,
                       on_progress=on_progress, on_transfer=on_transfer)
    entries = lock.lock(settings, [variant_name]) if then_lock else {}
    return Bootstrapped(variant_name, digest, entries.get(variant_name))


def plan(settings: Settings, variant_name: str = "cpu", *, force: bool = False) -> str:
    """One line saying what :func:`bootstrap` would do (``--dry-run``): nothing, or build from
    which Debian suite and mirror and push where. Asks the registry whether the base is there;
    changes nothing.

    Raises:
        ConfigError: the variant is unknown or has no ``bootstrap`` section. RegistryError: the
            registry cannot be asked.
    """
    v = _bootstrappable(settings, variant_name)
    if not force and base_present(settings, v):
        return f"dry run: base {v.base} is in the registry: nothing to do"
    assert v.bootstrap is not None  # checked by _bootstrappable
    return (f"dry run: base {v.base} would be built (debootstrap {v.bootstrap.suite} from "
            f"{host_mirror(settings)}) and pushed")


def _bootstrappable(settings: Settings, name: str) -> variants.Variant:
    v = variants.get(settings, name)
    if v.bootstrap is None:
        raise ConfigError(f"variant '{v.name}' has no bootstrap section: its base {v.base} is "
                          "pulled, not built",
                          "bootstrap a variant with a 'bootstrap:' block (e.g. cpu)")
    return v
