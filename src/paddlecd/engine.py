"""The container engine, behind one module (STYLE.md §1): nothing else imports ``docker``.

docker-py drives the engine API (inspect, push, run, logs, networks). docker-py has no BuildKit, so
secret-using builds go through a Docker CLI chosen explicitly by :func:`pick_builder`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests

from paddlecd.errors import EngineError, RegistryAuthError, RegistryError

Progress = Callable[[str], None]

def client() -> docker.DockerClient:
    """A docker-py client from the environment (``DOCKER_HOST`` or the default socket).

    Raises:
        EngineError: the daemon does not answer.
    """
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except (docker.errors.DockerException, requests.RequestException) as e:
        raise EngineError(
            f"Docker engine not reachable ({os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock')}): "
            f"{str(e).splitlines()[0][:200]}",
            "start it: scripts/stack.sh up (or: dockerd &), and check you may use the socket",
        ) from e


def info() -> dict[str, Any]:
    """The engine's ``/info`` (``docker info``): ``ServerVersion``, ``Runtimes``, ``DockerRootDir``…

    Raises:
        EngineError: the daemon does not answer.
    """
    try:
        return dict(client().info())
    except docker.errors.APIError as e:
        raise EngineError(f"Docker engine /info failed: {e.explanation}", "check the daemon log") from e


# --------------------------------------------------------------------------- images

def image_labels(ref: str) -> dict[str, str]:
    """Labels of local image ``ref``. Raises EngineError if the image is not present locally."""
    return dict(_image(ref).labels or {})


def image_id(ref: str) -> str:
    """Local image ID (``sha256:…`` of the config) of ``ref``."""
    return _image(ref).id


def image_exists(ref: str) -> bool:
    """True when ``ref`` is present in the local engine."""
    try:
        client().images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def repo_digests(ref: str) -> list[str]:
    """``repo@sha256:…`` names the engine recorded for ``ref`` after pushes/pulls."""
    return list(_image(ref).attrs.get("RepoDigests") or [])


def image_user(ref: str) -> str:
    """The default user of image ``ref`` (``Config.User``; empty means root)."""
    return str(_image(ref).attrs.get("Config", {}).get("User") or "")


def _image(ref: str) -> Any:
    try:
        return client().images.get(ref)
    except docker.errors.ImageNotFound as e:
        raise EngineError(f"image not found in the local engine: {ref}", "build or pull it first") from e


def tag(ref: str, new_ref: str) -> None:
    """Tag local image ``ref`` as ``new_ref`` (``repo:tag``)."""
    repo, _, t = new_ref.rpartition(":") if ":" in new_ref.rsplit("/", 1)[-1] else (new_ref, "", "latest")
    if not _image(ref).tag(repo, t):
        raise EngineError(f"tagging {ref} as {new_ref} failed", "check the reference")


def remove_image(ref: str) -> None:
    """Remove local image tag ``ref``; a missing image is not an error."""
    with contextlib.suppress(docker.errors.ImageNotFound):
        client().images.remove(ref, noprune=False)


def import_rootfs(tar_path: str, ref: str, *, changes: Sequence[str] = ()) -> str:
    """Import a root filesystem tarball as image ``ref`` (``docker import``); returns the image ID.

    ``changes`` are Dockerfile instructions applied on import (``ENV``, ``CMD``…).
    """
    repo, _, t = ref.rpartition(":")
    try:
        with open(tar_path, "rb") as fh:
            out = client().api.import_image_from_data(fh, repository=repo, tag=t, changes=list(changes))
    except docker.errors.APIError as e:
        raise EngineError(f"importing rootfs {tar_path} as {ref} failed: {e.explanation}", "check the tarball") from e
    status = json.loads(out.splitlines()[-1]) if isinstance(out, str) else out
    if "error" in status:
        raise EngineError(f"importing rootfs as {ref} failed: {status['error']}", "check the tarball")
    return image_id(ref)


# --------------------------------------------------------------------------- push / pull

def decode_stream(chunks: Iterator[Any], *, what: str, on_progress: Progress | None = None) -> list[dict]:
    """Decode every chunk of a push/pull/build JSON stream and raise on an error chunk.

    docker-py's ``push`` returns in-band errors inside an HTTP 200 stream (docker/docker-py#3161), so
    a 200 proves nothing: each decoded message is checked for ``error``/``errorDetail``.

    Args:
        chunks: items of ``APIClient.push(..., stream=True, decode=True)`` (dicts) or raw bytes lines.
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
                text = msg.get("error") or msg.get("errorDetail", {}).get("message", "unknown error")
                if re.search(r"unauthorized|authentication required|denied|no basic auth", text, re.I):
                    raise RegistryAuthError(f"{what}: {text}", _login_hint(what))
                raise RegistryError(f"{what}: {text}", "check the registry is up and has space; re-run to retry")
            if on_progress and msg.get("status"):
                on_progress(" ".join(str(msg[k]) for k in ("id", "status", "progress") if msg.get(k)))
    return messages


def _login_hint(what: str) -> str:
    host = what.split()[-1].split("/", 1)[0] if "/" in what else "<registry>"
    if os.environ.get("PADDLECD_REGISTRY_USERNAME") and os.environ.get("PADDLECD_REGISTRY_PASSWORD"):
        return f"{host} rejected PADDLECD_REGISTRY_USERNAME/PASSWORD: check them (or unset them to use docker login)"
    return f"run: docker login {host} (or set PADDLECD_REGISTRY_USERNAME/PASSWORD)"


def _messages(chunk: Any) -> Iterator[dict]:
    if isinstance(chunk, dict):
        yield chunk
        return
    for line in (chunk.decode() if isinstance(chunk, bytes) else str(chunk)).splitlines():
        if line.strip():
            yield json.loads(line)


def push(ref: str, *, auth_config: Mapping[str, str] | None = None, on_progress: Progress | None = None) -> str:
    """Push local ``ref`` (``registry/repo:tag``) and return the manifest digest the engine reports.

    Credentials: ``auth_config`` when given, else docker-py reads Docker's config.json.

    Raises:
        RegistryAuthError, RegistryError: see :func:`decode_stream`; also when no digest was reported.
        EngineError: the engine refused the request.
    """
    repo, _, t = ref.rpartition(":")
    try:
        stream = client().api.push(repo, tag=t, stream=True, decode=True,
                                   auth_config=dict(auth_config) if auth_config else None)
        messages = decode_stream(stream, what=f"pushing {ref}", on_progress=on_progress)
    except docker.errors.APIError as e:
        raise RegistryError(f"pushing {ref}: {e.explanation}", "check the registry address and that it is up") from e
    except requests.ConnectionError as e:
        raise RegistryError(f"pushing {ref}: connection to the engine lost", "re-run to retry") from e
    for msg in reversed(messages):
        digest = (msg.get("aux") or {}).get("Digest")
        if digest:
            return str(digest)
    raise RegistryError(f"pushing {ref}: the engine reported no digest", "re-run; check the registry logs")


def pull(ref: str, *, auth_config: Mapping[str, str] | None = None, on_progress: Progress | None = None) -> None:
    """Pull ``ref`` into the local engine, decoding every chunk (see :func:`decode_stream`)."""
    repo, sep, rest = ref.partition("@")
    if not sep:
        repo, _, rest = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    try:
        stream = client().api.pull(repo, tag=rest, stream=True, decode=True,
                                   auth_config=dict(auth_config) if auth_config else None)
        decode_stream(stream, what=f"pulling {ref}", on_progress=on_progress)
    except docker.errors.APIError as e:
        raise RegistryError(f"pulling {ref}: {e.explanation}", "check the reference and registry") from e
    except requests.ConnectionError as e:
        raise RegistryError(f"pulling {ref}: connection to the engine lost", "re-run to retry") from e


# --------------------------------------------------------------------------- builds (BuildKit via CLI)

@dataclass(frozen=True)
class Builder:
    """A BuildKit-capable build command: ``argv`` prefix, extra ``env``, and a human ``description``."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    description: str


@functools.lru_cache(maxsize=8)
def pick_builder(preference: str = "auto") -> Builder:
    """Choose the BuildKit builder explicitly.

    Order: the ``buildx`` plugin of any ``docker`` CLI (``docker buildx build --load``); else a classic
    CLI older than 23.0 with ``DOCKER_BUILDKIT=1`` (Debian's docker.io 20.10). A newer CLI without
    buildx refuses BuildKit ("BuildKit is enabled but the buildx component is missing"), so it is
    skipped even when first on PATH (DESIGN.md, machine facts).

    Args:
        preference: ``auto`` or the path of a docker CLI to use.

    Raises:
        EngineError: no usable builder; the hint says what to install.
    """
    candidates = [preference] if preference != "auto" else _docker_clis()
    for cli in candidates:
        if _ok([cli, "buildx", "version"]):
            return Builder((cli, "buildx", "build", "--load"), (), f"{cli} buildx (BuildKit)")
        version = _cli_version(cli)
        if version and version < (23, 0):
            return Builder((cli, "build"), (("DOCKER_BUILDKIT", "1"),),
                           f"{cli} {'.'.join(map(str, version))} with DOCKER_BUILDKIT=1")
    raise EngineError(
        "no BuildKit-capable docker CLI found (tried: " + ", ".join(candidates or ["docker"]) + ")",
        "apt-get install docker.io (CLI 20.10 builds with DOCKER_BUILDKIT=1) or install the buildx plugin",
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
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _cli_version(cli: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([cli, "version", "--format", "{{.Client.Version}}"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"(\d+)\.(\d+)", out.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def have_cli(name: str) -> bool:
    """True when executable ``name`` is on PATH."""
    return shutil.which(name) is not None


# --------------------------------------------------------------------------- containers and networks

@dataclass
class Finished:
    """A finished container: ``exit_code`` and its combined ``logs`` (text)."""

    name: str
    exit_code: int
    logs: str


@contextlib.contextmanager
def container(image: str, command: Sequence[str] | None = None, *, keep: bool = False,
              **kwargs: Any) -> Iterator[Any]:
    """Create and start a container; remove it on exit unless ``keep`` (``runtime.keep``).

    ``kwargs`` go to docker-py ``containers.run`` (detach is forced): ``name``, ``environment``,
    ``volumes``, ``network``, ``shm_size``, ``user``, ``device_requests``, ``ipc_mode``…

    Raises:
        EngineError: the image is missing or the engine refused to start the container.
    """
    try:
        c = client().containers.run(image, command, detach=True, **kwargs)
    except docker.errors.ImageNotFound as e:
        raise EngineError(f"image not found: {image}", "push/pull it first") from e
    except docker.errors.APIError as e:
        raise EngineError(f"starting a container of {image}: {e.explanation}", "check the run options") from e
    try:
        yield c
    finally:
        if not keep:
            with contextlib.suppress(docker.errors.APIError):
                c.remove(force=True)


def wait(c: Any, *, timeout: float, on_line: Progress | None = None) -> Finished:
    """Stream ``c``'s logs to ``on_line`` until it exits; return its exit code and logs.

    Raises:
        EngineError: it did not exit within ``timeout`` seconds (it is killed).
    """
    lines: list[str] = []
    import threading

    def pump() -> None:
        buf = b""
        for chunk in c.logs(stream=True, follow=True):
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                if on_line:
                    on_line(line)
        if buf:
            lines.append(buf.decode("utf-8", "replace"))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        status = c.wait(timeout=timeout)
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as e:
        # docker-py 7.1 surfaces a wait timeout as ConnectionError("... Read timed out"), not ReadTimeout
        with contextlib.suppress(docker.errors.APIError):
            c.kill()
        raise EngineError(f"container {c.name} did not finish within {timeout:.0f}s", "raise the timeout (verify.timeout / PADDLECD_VERIFY_TIMEOUT for verify) or check the logs") from e
    t.join(timeout=10)
    return Finished(c.name, int(status.get("StatusCode", -1)), "\n".join(lines))


@contextlib.contextmanager
def network(name: str, *, labels: Mapping[str, str] | None = None,
            keep: bool = False) -> Iterator[Any]:
    """A user-defined bridge network ``name``, removed on exit unless ``keep``
    (``runtime.keep``)."""
    try:
        net = client().networks.create(name, driver="bridge", labels=dict(labels or {}), check_duplicate=True)
    except docker.errors.APIError as e:
        raise EngineError(f"creating network {name}: {e.explanation}", "remove the stale network: docker network rm " + name) from e
    try:
        yield net
    finally:
        if not keep:
            with contextlib.suppress(docker.errors.APIError):
                net.reload()
                for c in net.containers:
                    net.disconnect(c, force=True)
                net.remove()


def network_aliases(network_name: str, aliases: Sequence[str]) -> dict[str, Any]:
    """``networking_config`` for ``container(..., network=network_name)`` giving the container extra
    DNS names on that network (``docker run --network-alias``); used by the local cluster executor."""
    return {network_name: client().api.create_endpoint_config(aliases=list(aliases))}


def gpu_request(count: int | None = None) -> list[Any]:
    """``device_requests`` for NVIDIA GPUs (``--gpus all`` when ``count`` is None). GPU-only path."""
    return [docker.types.DeviceRequest(count=-1 if count is None else count, capabilities=[["gpu"]])]


def gpu_request_ids(device_ids: Sequence[str]) -> list[Any]:
    """``device_requests`` for the given NVIDIA GPU indexes (``--gpus '"device=0,1"'``). GPU-only path."""
    return [docker.types.DeviceRequest(device_ids=list(device_ids), capabilities=[["gpu"]])]


def copy_from(c: Any, path: str) -> bytes:
    """Return a tar stream (bytes) of ``path`` inside container ``c`` (``docker cp``)."""
    try:
        bits, _ = c.get_archive(path)
    except docker.errors.NotFound as e:
        raise EngineError(f"{path} not found in container {c.name}", "the run did not produce it") from e
    return b"".join(bits)
