"""The container engine, behind one module (STYLE.md §1): nothing else imports ``docker``.

docker-py drives the engine API (inspect, push, run, logs, networks) through one cached client.
Callers describe a container with a :class:`ContainerSpec`; only this module turns it into
docker-py keyword arguments. Every docker-py and transport error is translated once, by
:func:`_translated`, into a :mod:`paddlecd.errors` type naming the reference, with the original
as its cause. docker-py has no BuildKit, so secret-using builds go through a Docker CLI chosen
explicitly by :func:`pick_builder` (run through :mod:`paddlecd.proc`).

The engine is Docker or podman's Docker-compatible API service (``engine.kind``; :func:`kind`
tells which one answers). What differs on podman (docs/guides/podman.md) is handled here: builds
go through the engine API (buildah, :func:`api_build`), the pushed digest comes from a status
line, imported and listed names are normalised, and every container names its network mode.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import docker
import docker.constants
import docker.errors
import docker.types
import requests

from paddlecd import files, proc
from paddlecd.errors import (
    ContainerTimeout,
    EngineError,
    PaddlecdError,
    RegistryAuthError,
    RegistryError,
    network_reason,
)
from paddlecd.types import Echo, EngineInfo

if TYPE_CHECKING:
    from paddlecd.registry.auth import Credentials
    from paddlecd.registry.reference import Reference


DOCKER_HOST_DEFAULT = "unix:///var/run/docker.sock"
START_HINT = "start it: scripts/stack.sh up (or: dockerd &); check DOCKER_HOST and socket access"
# podman's API socket as its systemd units place it (podman-system-service(1)): root's, and a
# user's under $XDG_RUNTIME_DIR
PODMAN_ROOT_SOCKET = "unix:///run/podman/podman.sock"
PODMAN_START_HINT = ("start it: podman system service --time=0 unix:///run/podman/podman.sock & "
                     "(see docs/guides/podman.md); check DOCKER_HOST")

_wanted = "auto"  # engine.kind of the settings in use (select)


def select(kind: str) -> None:
    """Use the engine that setting ``engine.kind`` names: ``auto`` (whatever answers on
    ``DOCKER_HOST`` or Docker's socket), ``docker`` or ``podman`` (``DOCKER_HOST``, else podman's
    socket, :func:`default_host`). A change drops the cached client."""
    global _wanted
    if kind != _wanted:
        reset_client()
        _wanted = kind


def default_host(kind: str = "auto") -> str:
    """Where the engine of ``kind`` listens when ``DOCKER_HOST`` is unset: Docker's socket, or
    for ``podman`` root's API socket (``/run/podman/podman.sock``) or, for another user,
    ``$XDG_RUNTIME_DIR/podman/podman.sock``."""
    if kind != "podman":
        return DOCKER_HOST_DEFAULT
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if os.geteuid() != 0 and runtime:
        return f"unix://{runtime}/podman/podman.sock"
    return PODMAN_ROOT_SOCKET


# How long the engine's first answers (/_ping, /version) may take: an engine busy with builds
# answers them in well under a second; one that takes the connection and says nothing is hung.
PING_TIMEOUT_S = 30


@functools.lru_cache(maxsize=1)
def client() -> docker.DockerClient:
    """The one docker-py client, from the environment (``DOCKER_HOST``, else the socket of the
    selected kind: :func:`default_host`), made and pinged on first use and then shared
    (:func:`reset_client` drops it).

    Raises:
        ConfigError: Docker's config.json is broken (registry.auth.docker_config).
        EngineError: the engine does not answer, or it is not the kind ``engine.kind`` names
            (nothing is cached then).
    """
    from paddlecd.registry import auth as registry_auth

    registry_auth.docker_config()  # docker-py reads it too, and fails with a traceback
    host = os.environ.get("DOCKER_HOST") or default_host(_wanted)
    name = "podman engine" if _wanted == "podman" else "Docker engine"
    try:
        with _translated(f"connecting to the {name} ({host})"):
            # the first answers (docker-py's API version query, /_ping, /version) within
            # PING_TIMEOUT_S, the transfers within 600 s (a trial: a socket that took the
            # connection and never answered hung every task, silent, for 10 minutes, then hinted
            # "start it")
            hung = EngineError(
                f"connecting to the {name} ({host}): it took the connection and gave no answer "
                f"within {PING_TIMEOUT_S} s", "the engine is hung or overloaded: check its log "
                "(journalctl -u docker, or dockerd's output) and DOCKER_HOST")
            try:
                c = docker.from_env(timeout=PING_TIMEOUT_S,
                                    environment={**os.environ, "DOCKER_HOST": host})
            except docker.errors.DockerException as e:
                if _timed_out(e):
                    raise hung from e
                raise
            try:
                try:
                    c.ping()
                    answered = kind_of(c.version())
                except requests.Timeout as e:
                    raise hung from e
                c.api.timeout = 600
            except BaseException:
                c.close()
                raise
    except EngineError as e:
        if _wanted != "podman":
            raise
        raise EngineError(e.cause, PODMAN_START_HINT) from e
    if _wanted != "auto" and answered != _wanted:
        c.close()
        raise EngineError(f"engine.kind is {_wanted} but {host} answers as {answered}",
                          f"point DOCKER_HOST at the {_wanted} socket, or set engine.kind "
                          f"(PADDLECD_ENGINE_KIND) to {answered} or auto")
    _kinds[id(c)] = answered
    return c


def _timed_out(e: BaseException) -> bool:
    """Whether ``e`` (or an error it was raised from) is a request that timed out: docker-py
    words its API version query's timeout as a DockerException around requests' ReadTimeout."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, requests.Timeout) or "timed out" in str(e).lower():
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


_kinds: dict[int, str] = {}  # id(client) → the kind it answered as


def kind_of(version: Mapping[str, Any]) -> str:
    """``docker`` or ``podman`` from the engine's ``/version`` answer: podman's service names
    itself in ``Components`` (``{"Name": "Podman Engine"}``, podman pkg/api/handlers/compat
    version.go) and Docker's says ``Engine``; ``Platform.Name`` is checked too."""
    names = [str(c.get("Name", "")) for c in version.get("Components") or []]
    names.append(str((version.get("Platform") or {}).get("Name", "")))
    return "podman" if any("podman" in n.lower() for n in names) else "docker"


def kind() -> str:
    """``docker`` or ``podman``: which engine answers (asked once per client).

    Raises:
        EngineError: as :func:`client`.
    """
    c = client()
    if id(c) not in _kinds:  # a client made elsewhere (a test's): ask it
        with _translated("reading the engine's /version"):
            _kinds[id(c)] = kind_of(c.version())
    return _kinds[id(c)]


def reset_client() -> None:
    """Forget the cached client (after ``DOCKER_HOST`` changed, or in tests)."""
    if client.cache_info().currsize:
        _kinds.pop(id(client()), None)
        client().close()
    client.cache_clear()


@contextlib.contextmanager
def _translated(doing: str, *, error: type[PaddlecdError] = EngineError,
                hint: str | None = None) -> Iterator[None]:
    """The one translation of docker-py and transport errors into paddlecd errors.

    Everything that talks to the engine runs inside it; the cause names what was being done and
    the reference (``"pushing reg/app:1.2: …"``) and keeps the original exception as ``__cause__``.

    Args:
        doing: what was being done, naming the image, container or network.
        error: the error type (``RegistryError`` for push and pull); a missing local image is
            always an :class:`EngineError`.
        hint: what to do about a refusal; defaults per kind of failure.

    Raises:
        EngineError: a local image is missing, or docker-py failed before any request.
        error: the engine refused the request (``APIError``: its ``explanation``), or it could not
            be reached or the connection broke.
    """
    try:
        yield
    except docker.errors.ImageNotFound as e:
        raise EngineError(f"{doing}: image not found in the local engine ({_explain(e)})",
                          "build, pull or push it first") from e
    except docker.errors.APIError as e:
        raise error(f"{doing}: {_explain(e)}",
                    hint or "check the reference and the daemon log") from e
    except (requests.ConnectionError, requests.Timeout) as e:  # ``error``: a cut push is retried
        raise error(f"{doing}: the Docker engine did not answer ({_first_line(e)})",
                    START_HINT) from e
    except (docker.errors.DockerException, requests.RequestException) as e:  # from_env, TLS, config
        if "Error while fetching server API version" in str(e):  # trial 21: docker-py's and
            raise EngineError(f"{doing}: no engine answered ({network_reason(e)})",  # Python's
                              START_HINT) from e  # exception reprs, "('Connection aborted.', …"
        raise EngineError(f"{doing}: {_first_line(e)}", START_HINT) from e


def _explain(e: docker.errors.APIError) -> str:
    return _first_line(e.explanation or e)


def _first_line(e: object) -> str:
    return (str(e).strip().splitlines() or ["unknown error"])[0][:300]


def info() -> EngineInfo:
    """The engine's ``/info`` (``docker info``): ``ServerVersion``, ``Runtimes``, ``DockerRootDir``…

    Raises:
        EngineError: the daemon does not answer.
    """
    with _translated("reading the Docker engine's /info", hint="check the daemon log"):
        return dict(client().info())


# --------------------------------------------------------------------------- images

def image_labels(ref: str) -> dict[str, str]:
    """Labels of local image ``ref``. Raises EngineError if the image is not present locally."""
    return dict(_image(ref).labels or {})


def image_env(ref: str) -> dict[str, str]:
    """The environment of local image ``ref``'s config (``Config.Env``, ``NAME=value`` entries)
    as ``{NAME: value}``. Raises EngineError if the image is not present locally."""
    entries = _image(ref).attrs.get("Config", {}).get("Env") or []
    return dict(e.split("=", 1) for e in entries if "=" in e)


def image_id(ref: str) -> str:
    """Local image ID (``sha256:…`` of the config) of ``ref``."""
    return _image(ref).id


def image_exists(ref: str) -> bool:
    """True when ``ref`` is present in the local engine."""
    return _exists(f"looking up image {ref}", lambda: client().images.get(ref))


def volume_exists(name: str) -> bool:
    """True when the engine holds the named volume ``name``."""
    return _exists(f"looking up volume {name}", lambda: client().volumes.get(name))


def _exists(doing: str, lookup: Callable[[], Any]) -> bool:
    """Whether ``lookup`` finds its object (NotFound: False; other failures: _translated)."""
    with _translated(doing):
        try:
            lookup()
        except docker.errors.NotFound:  # ImageNotFound too
            return False
    return True


def repo_digests(ref: str) -> list[str]:
    """``repo@sha256:…`` names the engine recorded for ``ref`` after pushes/pulls, as Docker
    writes them (:func:`short_name`)."""
    return [short_name(n) for n in _image(ref).attrs.get("RepoDigests") or []]


def short_name(name: str) -> str:
    """``name`` as Docker lists it: podman lists every name fully qualified
    (``docker.io/library/x:1``, ``docker.io/org/x:1``), Docker drops Docker Hub's domain and
    ``library/`` (distribution/reference normalize.go, FamiliarName)."""
    for prefix in ("docker.io/library/", "docker.io/"):
        rest = name[len(prefix):]
        if name.startswith(prefix) and (prefix.endswith("library/") or "/" in rest):
            return rest
    return name


def image_user(ref: str) -> str:
    """The default user of image ``ref`` (``Config.User``; empty means root)."""
    return str(_image(ref).attrs.get("Config", {}).get("User") or "")


def _image(ref: str) -> Any:
    with _translated(f"inspecting image {ref}"):
        return client().images.get(ref)


def tag(ref: str, new_ref: str) -> None:
    """Tag local image ``ref`` as ``new_ref`` (``repo:tag``)."""
    repo, t = _split_tag(new_ref)
    with _translated(f"tagging {ref} as {new_ref}", hint="check the reference"):
        if not _image(ref).tag(repo, t):
            raise EngineError(f"tagging {ref} as {new_ref} failed", "check the reference")


def _split_tag(ref: str) -> tuple[str, str]:
    """``("host:5000/repo", "tag")`` of ``host:5000/repo:tag``; ``latest`` when no tag is given."""
    if ":" in ref.rsplit("/", 1)[-1]:
        repo, _, t = ref.rpartition(":")
        return repo, t
    return ref, "latest"


def remove_image(ref: str) -> None:
    """Remove local image tag ``ref``; a missing image is not an error."""
    with _translated(f"removing image {ref}"), contextlib.suppress(docker.errors.ImageNotFound):
        client().images.remove(ref, noprune=False)


def import_rootfs(tar_path: str, ref: str, *, changes: Sequence[str] = ()) -> str:
    """Import a root filesystem tarball as image ``ref`` (``docker import``); returns the image ID.

    ``changes`` are Dockerfile instructions applied on import (``ENV``, ``CMD``…).

    Raises:
        EngineError: the engine refused the tarball.
    """
    repo, t = _split_tag(ref)
    with _translated(f"importing rootfs {tar_path} as {ref}", hint="check the tarball"), \
            open(tar_path, "rb") as fh:
        out = client().api.import_image_from_data(fh, repository=repo, tag=t, changes=list(changes))
    status = json.loads(out.splitlines()[-1]) if isinstance(out, str) else out
    if "error" in status:
        raise EngineError(
            f"importing rootfs as {ref} failed: {status['error']}", "check the tarball"
        )
    if not image_exists(ref):  # podman's import names the image <repo>:latest, whatever the tag
        tag(str(status.get("id") or status.get("status")), ref)
    return image_id(ref)


# --------------------------------------------------------------------------- push / pull

def decode_stream(
    chunks: Iterator[Any], *, what: str, on_progress: Echo | None = None
) -> list[dict]:
    """Decode every chunk of a push/pull/build JSON stream and raise on an error chunk.

    docker-py's ``push`` returns in-band errors inside an HTTP 200 stream (docker/docker-py#3161),
    so a 200 proves nothing: each decoded message is checked for ``error``/``errorDetail``.

    Args:
        chunks: items of ``APIClient.push(..., stream=True, decode=True)`` (dicts) or raw bytes
            lines.
        what: the action, for the error message ("pushing reg/app:cpu-1a2b3c4").

    Returns:
        every decoded message, in order.

    Raises:
        RegistryAuthError: the error chunk says the registry denied access.
        RegistryError: any other error chunk.
    """
    messages: list[dict] = []
    for chunk in chunks:
        for msg in _messages(chunk):
            messages.append(msg)
            if "error" in msg or "errorDetail" in msg:
                text = msg.get("error") or msg.get("errorDetail", {}).get(
                    "message", "unknown error"
                )
                raise stream_error(str(text), what=what)
            if on_progress and msg.get("status"):
                on_progress(
                    " ".join(str(msg[k]) for k in ("id", "status", "progress") if msg.get(k))
                )
    return messages


def stream_error(text: str, *, what: str) -> RegistryError:
    """The typed error for an error chunk of a push, pull or build stream: the registry's answer
    inside it read by status and OCI code like the registry client's (registry.answers), an
    HTML page summarised by its title; else the engine's own text."""
    from paddlecd.registry import answers  # the reading of answers; no client, no I/O

    if "server gave HTTP response to HTTPS client" in text:  # podman: no plain-HTTP default
        host = _host_of(what) or "the registry"
        return RegistryError(f"{what}: {host} speaks plain HTTP and the engine expects HTTPS",
                             f"podman: add [[registry]] location = \"{host}\" insecure = true "
                             "to registries.conf and restart its service (Docker: the daemon's "
                             "insecure-registries); or serve the registry over TLS")
    answer = answers.from_engine_text(text)
    if re.search(r"unauthorized|authentication required|denied|no basic auth", text, re.I) and (
            answer is None or not answer.foreign):
        return RegistryAuthError(f"{what}: {text[:300]}", _login_hint(what))
    if answer is not None:
        return answers.to_error(answer, what=what, host=_host_of(what) or "the registry",
                                login_hint=lambda: _login_hint(what))
    if "unsupported media type" in text:  # trial 21: an attestation's manifest given to pull
        return RegistryError(f"{what}: not an image the engine can run ({text[:160]}): an "
                             "artifact, such as an attestation or a signature",
                             "give an image's digest (invoke release.list lists the releases)")
    if "invalid checksum digest format" in text:  # trial 19: an HTTP 200 page for every request
        host = _host_of(what) or "the registry"  # (a sign-in portal): no Docker-Content-Digest
        return RegistryError(f"{what}: {host} answered without a valid Docker-Content-Digest "
                             f"(the engine: {text[:120]}): not a registry's answer",
                             f"check {host} is the registry and nothing between (a proxy, a "
                             "sign-in portal) rewrites its answers")
    return RegistryError(f"{what}: {text[:300]}",
                         "check the registry is up and has space; re-run to retry")


def _host_of(what: str) -> str | None:
    """The registry host of the reference that ends ``what`` ("pushing reg:5000/app:1" →
    "reg:5000"), or None."""
    return what.split()[-1].split("/", 1)[0] if "/" in what else None


def _login_hint(what: str) -> str:
    host = _host_of(what) or "<registry>"
    if os.environ.get("PADDLECD_REGISTRY_USERNAME") and os.environ.get(
        "PADDLECD_REGISTRY_PASSWORD"
    ):
        return (
            f"{host} rejected PADDLECD_REGISTRY_USERNAME/PASSWORD: "
            "check them (or unset them to use docker login)"
        )
    from paddlecd.registry import auth as registry_auth

    try:  # a trial: rejected credentials of config.json were hinted as if none were given
        given = registry_auth.find_credentials(host) if host != "<registry>" else None
    except PaddlecdError:
        given = None
    if given:
        return (f"{host} rejected the credentials from {given.source}: check them "
                f"(docker login {host} rewrites them)")
    return f"run: docker login {host} (or set PADDLECD_REGISTRY_USERNAME/PASSWORD)"


def _messages(chunk: Any) -> Iterator[dict]:
    if isinstance(chunk, dict):
        yield chunk
        return
    for line in (chunk.decode() if isinstance(chunk, bytes) else str(chunk)).splitlines():
        if line.strip():
            yield json.loads(line)


def push(ref: str, *, credentials: Credentials | None = None,
         on_progress: Echo | None = None) -> str:
    """Push local ``ref`` (``registry/repo:tag``) and return the manifest digest the engine reports.

    Args:
        credentials: sent to the registry when given (:mod:`paddlecd.registry.auth`); else the
            engine uses Docker's config.json (docker-py reads it).

    Raises:
        RegistryAuthError, RegistryError: see :func:`decode_stream`; also when no digest was
            reported or the engine refused or lost the request.
    """
    repo, t = _split_tag(ref)
    with _translated(f"pushing {ref}", error=RegistryError,
                     hint="check the registry address and that it is up; re-run to retry"):
        stream = client().api.push(repo, tag=t, stream=True, decode=True,
                                   auth_config=_auth_config(credentials))
        messages = decode_stream(stream, what=f"pushing {ref}", on_progress=on_progress)
    for msg in reversed(messages):
        digest = (msg.get("aux") or {}).get("Digest")
        # podman sends no aux message, only Docker CLI's last line: "<tag>: digest: sha256:…
        # size: N" (podman pkg/api/handlers/compat/images_push.go)
        said = re.search(r"\bdigest: (sha256:[0-9a-f]{64})\b", str(msg.get("status") or ""))
        if digest or said:
            return str(digest or said.group(1))
    raise RegistryError(
        f"pushing {ref}: the engine reported no digest", "re-run; check the registry logs"
    )


def pull(ref: str, *, credentials: Credentials | None = None,
         on_progress: Echo | None = None) -> None:
    """Pull ``ref`` (``repo:tag`` or ``repo@sha256:…``) into the local engine, decoding every chunk
    (see :func:`decode_stream`); ``credentials`` as for :func:`push`.

    Raises:
        RegistryAuthError, RegistryError: the registry refused, or the engine refused or lost the
            request.
    """
    repo, sep, rest = ref.partition("@")
    if not sep:
        repo, rest = _split_tag(ref)
    with _translated(f"pulling {ref}", error=RegistryError,
                     hint="check the reference and the registry"):
        stream = client().api.pull(repo, tag=rest, stream=True, decode=True,
                                   auth_config=_auth_config(credentials))
        decode_stream(stream, what=f"pulling {ref}", on_progress=on_progress)


def ensure_local(ref: str, *, credentials: Credentials | None = None,
                 on_progress: Echo | None = None) -> bool:
    """Pull ``ref`` unless the engine has it already; True when it pulled. Starting a container
    of a missing image would make docker-py pull it without ``credentials``.

    Raises:
        RegistryAuthError, RegistryError: as :func:`pull`.
    """
    if image_exists(ref):
        return False
    pull(ref, credentials=credentials, on_progress=on_progress)
    return True


def _auth_config(credentials: Credentials | None) -> dict[str, str] | None:
    """docker-py's ``auth_config`` (the engine API's ``X-Registry-Auth``) for ``credentials``."""
    if credentials is None:
        return None
    if credentials.identity_token:  # Docker stores OAuth refresh tokens under the user <token>
        return {"identitytoken": credentials.password}
    return {"username": credentials.username, "password": credentials.password}


# --------------------------------------------------------------------------- builds (BuildKit via
# CLI)


@dataclass(frozen=True)
class Builder:
    """A BuildKit-capable build command: ``argv`` prefix, extra ``env``, and a human
    ``description``."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    description: str


@functools.lru_cache(maxsize=8)
def pick_builder(preference: str = "auto") -> Builder:
    """Choose the BuildKit builder explicitly.

    Order: the ``buildx`` plugin of any ``docker`` CLI (``docker buildx build --load``); else a
    classic CLI older than 23.0 with ``DOCKER_BUILDKIT=1`` (Debian's docker.io 20.10). A newer CLI
    without buildx refuses BuildKit ("BuildKit is enabled but the buildx component is missing"), so
    it is skipped even when first on PATH (DESIGN.md, machine facts).

    The probes (``buildx version`` and the client-only ``--version`` of every candidate) run at
    once, in threads, and are then read in that order: run one after the other, with the
    daemon-asking ``docker version``, they were 0.19-0.29 s of every ``invoke build`` on the 2-core
    VM (two CLIs on PATH; ``bench_build_push.py --profile-cold``), about 6 % of a cold
    build there; at once, 0.04-0.1 s, still the largest own item of a cached ``invoke build``. The
    answer is cached for the process and in ``$XDG_CACHE_HOME/paddlecd/builders.json``, keyed on
    what it depends on (each candidate CLI's file, size and mtime; the buildx plugin files), so a
    new process does not probe again until a CLI or plugin changes.

    Args:
        preference: ``auto`` or the path of a docker CLI to use.

    Raises:
        EngineError: no usable builder; the hint says what to install.
    """
    candidates = [preference] if preference != "auto" else _docker_clis()
    key = _probe_key(candidates)
    cached = _read_probe_cache().get(key)
    if cached:
        return Builder(tuple(cached["argv"]), tuple(tuple(e) for e in cached["env"]),
                       cached["description"])
    builder = _probe(candidates)
    _write_probe_cache(key, builder)
    return builder


# Where the docker CLI looks for plugins besides $DOCKER_CONFIG/cli-plugins (docker/cli,
# cli-plugins/manager/manager_unix.go, defaultSystemPluginDirs): installing or removing buildx
# there changes the probe's answer, so their state is part of the cache key.
_PLUGIN_DIRS = ("/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins",
                "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins")


def _probe_key(candidates: Sequence[str]) -> str:
    """What the probe's answer depends on: each candidate CLI (path, the file it resolves to, its
    size and mtime) and each plugin folder's ``docker-buildx`` (size and mtime, or absent)."""
    def stat(path: str) -> list[Any]:
        try:
            st = os.stat(path)
        except OSError:
            return [path, None]
        return [path, os.path.realpath(path), st.st_size, st.st_mtime_ns]

    config = os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker")
    plugins = [os.path.join(d, "docker-buildx")
               for d in (os.path.join(config, "cli-plugins"), *_PLUGIN_DIRS)]
    doc = {"clis": [stat(c) for c in candidates], "plugins": [stat(p) for p in plugins]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _probe_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "paddlecd" / "builders.json"


def _read_probe_cache() -> dict[str, Any]:
    try:
        data = json.loads(_probe_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_probe_cache(key: str, builder: Builder) -> None:
    """Remember the probe's answer for ``key`` (a few builders at most; a write that fails only
    means the next process probes again)."""
    data = _read_probe_cache()
    data[key] = {"argv": list(builder.argv), "env": [list(e) for e in builder.env],
                 "description": builder.description}
    with contextlib.suppress(OSError):
        files.write_json(_probe_cache_path(), dict(list(data.items())[-8:]))


def _probe(candidates: Sequence[str]) -> Builder:
    """Run the probes (see :func:`pick_builder`) and return the first usable builder."""
    with ThreadPoolExecutor(max_workers=max(1, 2 * len(candidates))) as pool:
        probes = [
            (cli, pool.submit(_ok, [cli, "buildx", "version"]), pool.submit(_cli_version, cli))
            for cli in candidates
        ]
        for cli, buildx, version_probe in probes:
            if buildx.result():
                return Builder((cli, "buildx", "build", "--load"), (), f"{cli} buildx (BuildKit)")
            version = version_probe.result()
            if version and version < (23, 0):
                return Builder((cli, "build"), (("DOCKER_BUILDKIT", "1"),),
                               f"{cli} {'.'.join(map(str, version))} with DOCKER_BUILDKIT=1")
    raise EngineError(
        "no BuildKit-capable docker CLI found (tried: " + ", ".join(candidates or ["docker"]) + ")",
        "apt-get install docker.io (CLI 20.10 builds with DOCKER_BUILDKIT=1) or install the buildx "
        "plugin",
    )


def _docker_clis() -> list[str]:
    found: list[str] = []
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin", "/usr/local/bin"]:
        p = os.path.join(d, "docker")
        if os.access(p, os.X_OK) and os.path.realpath(p) not in map(os.path.realpath, found):
            found.append(p)
    return found


def _ok(argv: Sequence[str]) -> bool:
    try:
        return proc.run(argv, stdout_only=True, check=False, timeout=30).returncode == 0
    except EngineError:  # missing, or stuck: not a usable builder
        return False


def _cli_version(cli: str) -> tuple[int, int] | None:
    """The client version of ``cli`` from ``docker --version`` ("Docker version 20.10.24+dfsg1,
    build 297e128"), which asks no daemon; None when it does not run or says something else."""
    try:
        out = proc.run([cli, "--version"], stdout_only=True, check=False, timeout=30).stdout
    except EngineError:
        return None
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def api_build(*, context: Path, dockerfile: Path, tag: str, build_args: Mapping[str, str],
              labels: Mapping[str, str], secrets: Mapping[str, Path], no_cache: bool = False,
              on_line: Echo | None = None) -> str:
    """Build through the engine API's ``/build``: how podman builds (buildah behind its
    Docker-compatible API), with ``RUN --mount=type=secret`` and ``type=cache``.

    The context is ``context`` minus its ``.dockerignore``; each secret travels inside the
    context tar under a name of its own, which podman moves out of the context before the build
    starts, as for ``podman --remote build --secret`` (podman
    pkg/api/handlers/compat/images_build.go). The stream (``STEP 1/7: …``, the RUN output,
    ``COMMIT``) is decoded chunk by chunk and each line handed to ``on_line``; an error chunk
    inside the 200 answer fails the build.

    Args:
        dockerfile: inside ``context``. secrets: ``{id: file}`` (``/run/secrets/<id>``).

    Returns:
        the built image's ID (``sha256:…``).

    Raises:
        RegistryError: the registry refused the base image (an error chunk naming it).
        EngineError: the build failed (its error chunk's text) or the engine refused it.
    """
    from docker.utils import build as docker_build

    ignore = context / ".dockerignore"
    patterns = [x.strip() for x in (ignore.read_text().splitlines() if ignore.is_file() else [])
                if x.strip() and not x.strip().startswith("#")]
    name = str(dockerfile.relative_to(context))
    extra = [(f".paddlecd-secret-{i}", Path(f).read_text()) for i, f in secrets.items()]
    params = {"t": tag, "dockerfile": name, "rm": True, "forcerm": True, "nocache": no_cache,
              "buildargs": json.dumps(dict(build_args)), "labels": json.dumps(dict(labels)),
              "secrets": json.dumps([f"id={i},src=.paddlecd-secret-{i}" for i in secrets])}
    built = None
    with _translated(f"building {tag}", hint="check the Dockerfile and the engine's log"), \
            docker_build.create_archive(
                str(context), files=sorted(docker_build.exclude_paths(str(context), patterns,
                                                                      dockerfile=name)),
                extra_files=extra) as tar:
        api = client().api
        answer = api._post(api._url("/build"), data=tar, params=params, stream=True,
                           headers={"Content-Type": "application/x-tar"}, timeout=None)
        api._raise_for_status(answer)
        for msg in api._stream_helper(answer, decode=True):
            if "error" in msg or "errorDetail" in msg:
                text = str(msg.get("error") or msg["errorDetail"].get("message", "unknown"))
                raise _build_error(text.strip(), tag)
            built = (msg.get("aux") or {}).get("ID") or built
            for line in str(msg.get("stream") or "").splitlines():
                if on_line and line.strip():
                    on_line(line)
    return str(built or image_id(tag))


def _build_error(text: str, tag: str) -> PaddlecdError:
    from paddlecd.registry import answers  # the reading of answers; no client, no I/O

    if answers.from_engine_text(text) or "HTTP response to HTTPS client" in text:
        return stream_error(text, what=f"building {tag}")
    return EngineError(f"building {tag}: {_first_line(text)}", "check the Dockerfile")


def have_cli(name: str) -> bool:
    """True when executable ``name`` is on PATH."""
    return shutil.which(name) is not None


# --------------------------------------------------------------------------- containers and
# networks


@dataclass(frozen=True)
class Mount:
    """A bind mount (``source`` an absolute host path) or a named volume (``source`` its name)."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    """What to run, as callers describe it; only :func:`_run_kwargs` makes docker-py options of it.

    Attributes:
        image: reference to run (``host/repo@sha256:…`` after push).
        command: argv; empty runs the image's ``CMD``.
        env: environment variables.
        mounts: bind mounts and volumes.
        name, hostname, user (``uid:gid`` or a name), workdir: as ``docker run``.
        labels: container labels (``paddlecd.io/job`` lets tests and cleanup find it).
        network: a user-defined network to join; ``aliases`` are extra DNS names on it
            (``docker run --network-alias``).
        shm_size: ``/dev/shm`` size, bytes or Docker's syntax (``"2g"``).
        memory: memory limit in bytes. cpus: CPU limit in cores (``0.5``).
        gpus: GPU-only. ``"all"`` (``--gpus all``) or device indexes (``("0", "1")``); None: no GPU.
        ipc: GPU-only in practice. ``"host"`` shares the host's IPC namespace (NCCL's shared-memory
            transport); None: private.
    """

    image: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    name: str | None = None
    hostname: str | None = None
    user: str | None = None
    workdir: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    network: str | None = None
    aliases: tuple[str, ...] = ()
    shm_size: int | str | None = None
    memory: int | None = None
    cpus: float | None = None
    gpus: Literal["all"] | tuple[str, ...] | None = None
    keep: bool = False  # keep it after the run, for debugging (``runtime.keep``)
    ipc: str | None = None


def _run_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """docker-py ``containers.run`` keyword arguments for ``spec`` (built nowhere else)."""
    kwargs: dict[str, Any] = {
        "environment": dict(spec.env),
        "volumes": {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
                    for m in spec.mounts},
        "labels": dict(spec.labels),
    }
    optional = {"name": spec.name, "hostname": spec.hostname, "user": spec.user,
                "working_dir": spec.workdir, "network": spec.network, "shm_size": spec.shm_size,
                "mem_limit": spec.memory, "ipc_mode": spec.ipc}
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if not spec.network:  # named, never left to the engine: podman's compat API reads only an
        kwargs["network_mode"] = "bridge"  # explicit mode (it ignores NetworkDisabled, say)
    if spec.cpus is not None:
        kwargs["nano_cpus"] = round(spec.cpus * 10**9)  # the engine API counts 1e-9 CPUs
    if spec.aliases:
        if not spec.network:
            raise EngineError(f"container {spec.name or spec.image}: aliases without a network",
                              "set ContainerSpec.network")
        endpoint = docker.types.EndpointConfig(docker.constants.DEFAULT_DOCKER_API_VERSION,
                                               aliases=list(spec.aliases))
        kwargs["networking_config"] = {spec.network: endpoint}
    if spec.gpus is not None:  # GPU-only: the NVIDIA Container Toolkit's device request
        which = {"count": -1} if spec.gpus == "all" else {"device_ids": list(spec.gpus)}
        kwargs["device_requests"] = [docker.types.DeviceRequest(**which, capabilities=[["gpu"]])]
    return kwargs


@dataclass
class Finished:
    """A finished container: ``exit_code`` and its combined ``logs`` (text)."""

    name: str
    exit_code: int
    logs: str


class Container:
    """A container started by :func:`container` (the docker-py object stays inside this module)."""

    def __init__(self, raw: Any):
        self._raw = raw

    @property
    def name(self) -> str:
        """The container's name (given in the spec, or the engine's)."""
        return str(self._raw.name)

    def kill(self) -> None:
        """Stop it now (SIGKILL); a container that already exited or is gone is left as it is."""
        with contextlib.suppress(docker.errors.APIError, requests.RequestException):
            self._raw.kill()

    def logs(self) -> str:
        """Its combined stdout/stderr so far (text); empty when the engine cannot give them."""
        with contextlib.suppress(docker.errors.APIError, requests.RequestException):
            return self._raw.logs().decode("utf-8", "replace")
        return ""

    def copy_out(self, path: str, dest: Path) -> list[Path]:
        """Copy folder ``path`` of the (running or exited) container into host folder ``dest``
        (``docker cp``: the engine's archive API; a path that does not exist copies nothing).

        Returns:
            the regular files written under ``dest``, sorted. Members that would land outside
            ``dest`` (absolute, ``..``, links) are refused by tarfile's ``data`` filter.
        """
        try:
            chunks, _ = self._raw.get_archive(path.rstrip("/") + "/.")
        except (docker.errors.APIError, requests.RequestException):
            return []
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as buf:
            for chunk in chunks:
                buf.write(chunk)
            buf.seek(0)
            with tarfile.open(fileobj=buf) as tar:
                tar.extractall(dest, filter="data")
        return sorted(p for p in dest.rglob("*") if p.is_file())


@contextlib.contextmanager
def container(spec: ContainerSpec) -> Iterator[Container]:
    """Create and start a container from ``spec``; remove it on exit unless ``spec.keep``.

    Raises:
        EngineError: the image is missing or the engine refused to start the container; GPUs
            asked of podman (its compat API drops device requests: podman 4.3.1, measured).
    """
    kwargs = _run_kwargs(spec)
    if spec.gpus is not None and kind() == "podman":  # else the GPU checks run without a GPU
        raise EngineError(f"container of {spec.image}: podman's Docker-compatible API drops GPU "
                          "device requests (--gpus), so GPU variants cannot run on it",
                          "run GPU variants on Docker with the NVIDIA Container Toolkit "
                          "(engine.kind: docker); CPU variants run on podman")
    with _translated(f"starting a container of {spec.image}", hint="check the run options"):
        # create, then start: docker-py's run() leaves the created container behind when the
        # start fails (an image without the command's executable), and pulls a missing image
        # without our credentials (callers pull first: ensure_local)
        raw = client().containers.create(spec.image, list(spec.command) or None, detach=True,
                                         **kwargs)
        try:
            raw.start()
        except BaseException:
            with contextlib.suppress(docker.errors.APIError, requests.RequestException):
                raw.remove(force=True)
            raise
    try:
        yield Container(raw)
    finally:
        if not spec.keep:
            with contextlib.suppress(docker.errors.APIError, requests.RequestException):
                raw.remove(force=True)


def live_owners(labels: Mapping[str, str], *,
                gone: Callable[[str], bool] = proc.owner_gone) -> list[str]:
    """The :data:`OWNER` of each container carrying all of ``labels`` whose owner still runs
    (another process's live run: never removed as a killed run's leftover).

    Raises:
        EngineError: the engine could not be asked.
    """
    wanted = [f"{k}={v}" for k, v in labels.items()]
    with _translated("listing containers"):
        found = client().containers.list(all=True, filters={"label": wanted})
    owners = [(raw.attrs.get("Config", {}).get("Labels") or {}).get(OWNER, "") for raw in found]
    return sorted(o for o in owners if o and not gone(o))


def remove_containers(labels: Mapping[str, str]) -> list[str]:
    """Force-remove every container (running or exited) that carries all of ``labels``: what a
    run killed with SIGKILL left behind, found again by the labels it gave its container.

    Returns:
        the names removed, sorted (empty when none matched).

    Raises:
        EngineError: the engine could not be asked.
    """
    wanted = [f"{k}={v}" for k, v in labels.items()]
    with _translated("listing containers left by an interrupted run"):
        found = client().containers.list(all=True, filters={"label": wanted})
    names = []
    for raw in found:
        with contextlib.suppress(docker.errors.APIError, requests.RequestException):
            raw.remove(force=True)
            names.append(str(raw.name))
    return sorted(names)


OWNER = "paddlecd.io/owner"  # proc.owner() of the run that created a container or network


def remove_orphans(selector: Mapping[str, str], *,
                   gone: Callable[[str], bool] = proc.owner_gone) -> list[str]:
    """Force-remove the containers, then the networks, that carry all of ``selector`` and an
    :data:`OWNER` label for which ``gone`` is true: what a run killed with SIGKILL left behind,
    found by the next run of any command that creates the same kind of objects.

    Returns:
        the names removed (containers first), sorted within each kind.

    Raises:
        EngineError: the engine could not be asked.
    """
    wanted = [f"{k}={v}" for k, v in selector.items()] + [OWNER]
    with _translated("listing what interrupted runs left"):
        containers = client().containers.list(all=True, filters={"label": wanted})
        networks = client().networks.list(filters={"label": wanted})
    removed: list[str] = []
    for kind, found in (("container", containers), ("network", networks)):
        names = []
        for raw in found:
            if not gone((raw.attrs.get("Config", {}).get("Labels") if kind == "container"
                         else raw.attrs.get("Labels") or {}).get(OWNER, "")):
                continue
            with contextlib.suppress(docker.errors.APIError, requests.RequestException):
                if kind == "container":
                    raw.remove(force=True)
                else:
                    raw.remove()
                names.append(f"{kind} {raw.name}")
        removed += sorted(names)
    return removed


def remove_owned(owner: str | None = None) -> list[str]:
    """Force-remove the containers that ``owner`` (default: this process, proc.owner) created:
    a Ctrl-C reaches the thread that waits in the foreground, not the threads whose containers
    run a pipeline's stage, so the runner stops those containers this way. Never raises: an
    engine it cannot ask has nothing of ours to stop (nothing was started without a client).

    Returns:
        the names removed, sorted.
    """
    if not client.cache_info().currsize:  # no client was made: no container was started
        return []
    try:
        return remove_containers({OWNER: owner or proc.owner()})
    except EngineError:
        return []


def wait(c: Container, *, timeout: float, on_line: Echo | None = None) -> Finished:
    """Stream ``c``'s logs to ``on_line`` until it exits; return its exit code and logs.

    Args:
        timeout: seconds to wait for the exit.

    Raises:
        ContainerTimeout: it did not exit within ``timeout`` seconds (it is killed; the error
            carries its logs so far).
        EngineError: the engine failed.
    """
    lines: list[str] = []
    raw = c._raw

    def pump() -> None:
        buf = b""
        with contextlib.suppress(docker.errors.APIError, requests.RequestException):
            for chunk in raw.logs(stream=True, follow=True):
                buf += chunk
                *complete, buf = buf.split(b"\n")
                for line in (r.decode("utf-8", "replace") for r in complete):
                    lines.append(line)
                    if on_line:
                        on_line(line)
        if buf:
            lines.append(buf.decode("utf-8", "replace"))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    with _translated(f"waiting for container {c.name}"):
        try:
            status = raw.wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as e:
            # docker-py 7.1 raises a wait timeout as ConnectionError("… Read timed out")
            c.kill()
            t.join(timeout=10)
            raise ContainerTimeout(f"container {c.name} did not finish within {timeout:.0f}s",
                                   "raise the timeout (verify.timeout / PADDLECD_VERIFY_TIMEOUT "
                                   "for verify) or check the logs",
                                   logs="\n".join(lines)) from e
    t.join(timeout=10)
    return Finished(c.name, int(status.get("StatusCode", -1)), "\n".join(lines))


@contextlib.contextmanager
def network(name: str, *, labels: Mapping[str, str] | None = None,
            keep: bool = False) -> Iterator[str]:
    """A user-defined bridge network ``name`` (yielded), removed on exit unless ``keep``
    (``runtime.keep``).

    Raises:
        EngineError: the engine refused to create it (a stale network of that name, say).
    """
    with _translated(f"creating network {name}",
                     hint=f"remove the stale network: docker network rm {name}"):
        net = client().networks.create(name, driver="bridge", labels=dict(labels or {}),
                                       check_duplicate=True)
    try:
        yield name
    finally:
        if not keep:
            with contextlib.suppress(docker.errors.APIError, requests.RequestException):
                net.reload()
                for c in net.containers:
                    net.disconnect(c, force=True)
                net.remove()


def refuse_image_id(ref: Reference) -> Reference:
    """Return ``ref`` unless its digest is a local image's ID rather than a manifest digest.

    No registry request: the local engine alone decides (an ID listed among the image's own
    ``RepoDigests`` is a manifest digest too, as with the containerd image store). Without an
    engine the check passes; :meth:`paddlecd.registry.client.RegistryClient.resolve` still
    recognises a blob in the registry.

    Raises:
        ConfigError: the digest is a local image ID; the hint is its pushed digest.
    """
    from paddlecd.registry.client import image_id_error

    pushed = local_repo_digests(ref.digest) if ref.digest else None
    if pushed is not None and not any(p.endswith(f"@{ref.digest}") for p in pushed):
        raise image_id_error(ref.name, str(ref.digest), pushed)
    return ref


def local_repo_digests(digest: str) -> list[str] | None:
    """``RepoDigests`` (``host/repo@sha256:…`` strings) of the local image whose ID is
    ``digest``; None when there is none here (or no engine: the check is best-effort, the
    registry lookup still applies)."""
    try:
        if not image_exists(digest) or image_id(digest) != digest:
            return None
        return repo_digests(digest)
    except PaddlecdError:
        return None
