"""build: a BuildKit build of one variant FROM its locked base digest, with OCI labels.

The builder is picked explicitly (:func:`paddlecd.engine.pick_builder`) and named in the output.
The host CA bundle and any index URL enter as BuildKit secrets (``--secret``), never as build args
or layers. The full build log is kept under ``<state>/logs/``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from paddlecd import engine, files, git, proc
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, EngineError, LockError, PaddlecdError, quoted
from paddlecd.files import now_iso, regular_file, write_json
from paddlecd.image import lock, variants
from paddlecd.registry import answers
from paddlecd.registry import auth as registry_auth
from paddlecd.registry.reference import parse_reference
from paddlecd.types import Echo

LABEL = "io.paddlecd"
DEFAULT_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


@dataclass(frozen=True)
class Built:
    """A finished build: local ``tag``, ``image_id``, the ``builder`` used, the kept ``log``
    path."""

    variant: str
    tag: str
    image_id: str
    builder: str
    log: Path
    seconds: float


def ca_bundle(settings: Settings) -> str | None:
    """The CA bundle to hand to builds as a secret: settings.build.ca_bundle, $SSL_CERT_FILE,
    $REQUESTS_CA_BUNDLE, or the distribution's default bundle; None if none exists.

    Raises:
        ConfigError: ``build.ca_bundle`` is set but missing, no regular file, or holds no PEM
            certificate (a trial: each was silently replaced by the next candidate).
    """
    given = settings.build.ca_bundle
    if given:
        hint = "point build.ca_bundle (PADDLECD_BUILD_CA_BUNDLE) at a PEM CA bundle, or unset it"
        if not regular_file(Path(given), "CA bundle (build.ca_bundle)"):
            raise ConfigError(f"CA bundle (build.ca_bundle) {given} does not exist", hint)
        with open(given, "rb") as f:
            if b"-----BEGIN CERTIFICATE-----" not in f.read(1 << 22):
                raise ConfigError(f"CA bundle (build.ca_bundle) {given} holds no PEM "
                                  "certificate (-----BEGIN CERTIFICATE-----)", hint)
        return given
    for cand in (os.environ.get("SSL_CERT_FILE"),
                 os.environ.get("REQUESTS_CA_BUNDLE"), *DEFAULT_CA_BUNDLES):
        if cand and Path(cand).is_file():
            return cand
    return None


@contextlib.contextmanager
def secret_files(settings: Settings) -> Iterator[dict[str, Path]]:
    """The build secrets as ``{id: file}``: the CA bundle and the pip index URL (written to a
    0600 temp file that is removed afterwards). The index URL comes from
    settings.build.pip_index_url or $PIP_INDEX_URL."""
    found: dict[str, Path] = {}
    bundle = ca_bundle(settings)
    if bundle:
        found["ca_bundle"] = Path(bundle)
    index = settings.build.pip_index_url or os.environ.get("PIP_INDEX_URL")
    with tempfile.TemporaryDirectory(prefix="paddlecd-secrets-") as d:
        if index:
            path = Path(d) / "pip_index_url"
            path.touch(mode=0o600)
            path.write_text(index)
            found["pip_index_url"] = path
        yield found


@contextlib.contextmanager
def secret_args(settings: Settings) -> Iterator[list[str]]:
    """``--secret`` flags for :func:`secret_files`."""
    with secret_files(settings) as found:
        yield [x for i, f in found.items() for x in ("--secret", f"id={i},src={f}")]


def dockerfile_of(settings: Settings, v: variants.Variant) -> Path:
    """The Dockerfile of variant ``v``: ``images/<dockerfile>``, a regular file inside
    ``images/`` (the build context) even after symlinks are followed; or the absolute path the
    variants file names (a Dockerfile kept elsewhere on purpose). The schema refuses ``..``, an
    empty name and control characters; this names what it cannot see (a trial:
    ``../../etc/passwd`` reached the engine, exit 4, with its own words; ``/etc/passwd`` was
    read as a Dockerfile: an absolute path must name a Dockerfile, a regular file).

    Raises:
        ConfigError: missing, not a regular file, or a relative one that leaves ``images/``.
    """
    images = settings.root / "images"
    path = images / v.dockerfile
    where = f"{settings.variants_file}: variant '{v.name}' dockerfile {v.dockerfile[:80]!r}"
    resolved = path.resolve()
    if not Path(v.dockerfile).is_absolute() and not resolved.is_relative_to(images.resolve()):
        raise ConfigError(f"{where} leads out of images/ (to {str(resolved)[:200]})",
                          "keep the Dockerfile inside images/ (the build context)")
    if not resolved.is_file():
        raise ConfigError(f"{where}: " + ("not a regular file" if resolved.exists()
                                          else f"no such file ({path})"),
                          "name a Dockerfile under images/, e.g. dockerfile: Dockerfile")
    return path


def buildkit_build(settings: Settings, *, context: Path, dockerfile: Path, tag: str,
                   build_args: Mapping[str, str], labels: Mapping[str, str], log_name: str,
                   on_line: Echo | None = None, no_cache: bool = False) -> tuple[str, Path]:
    """Run one BuildKit build; returns ``(builder description, log path)``.

    On podman the build goes through its engine API instead (:func:`podman_build`).

    Raises:
        EngineError: no BuildKit builder, or the build failed (cause: last log line; the log path in
            the hint).
    """
    log_path = settings.state / "logs" / f"{log_name}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if engine.kind() == "podman":
        return podman_build(settings, context=context, dockerfile=dockerfile, tag=tag,
                            build_args=build_args, labels=labels, log_path=log_path,
                            on_line=on_line, no_cache=no_cache), log_path
    builder = engine.pick_builder(settings.build.docker_cli)
    with secret_args(settings) as secrets, _build_log(log_path) as write:
        argv = [*builder.argv, "--progress", "plain", "-f", str(dockerfile), "-t", tag, *secrets]
        argv += [x for k, v in build_args.items() for x in ("--build-arg", f"{k}={v}")]
        argv += [x for k, v in sorted(labels.items()) for x in ("--label", f"{k}={v}")]
        argv += ["--no-cache"] if no_cache else []
        if on_line:
            on_line(f"builder: {builder.description}")

        def line(text: str) -> None:
            write(text)
            if on_line:
                on_line(text)

        try:
            proc.run(
                [*argv, str(context)], env=dict(builder.env), on_line=line, what=f"building {tag}"
            )
        except EngineError as e:
            if answers.from_engine_text(e.cause):  # the registry refused (the base's pull, say)
                registry_error = engine.stream_error(e.cause, what=f"building {tag}")
                raise type(registry_error)(registry_error.cause,
                                           f"{registry_error.hint}; full build log: {log_path}"
                                           ) from e
            raise EngineError(e.cause, f"full build log: {log_path}") from e
    return builder.description, log_path


def podman_build(settings: Settings, *, context: Path, dockerfile: Path, tag: str,
                 build_args: Mapping[str, str], labels: Mapping[str, str], log_path: Path,
                 on_line: Echo | None = None, no_cache: bool = False) -> str:
    """One build on podman (buildah through its engine API, :func:`paddlecd.engine.api_build`),
    the same secrets, build args and labels as the BuildKit build, its output in ``log_path``;
    returns the builder's description.

    Raises:
        EngineError, RegistryError: as :func:`paddlecd.engine.api_build`; the hint names the log.
    """
    version = engine.info().get("ServerVersion", "")
    description = f"podman {version} (buildah, engine API)".replace("  ", " ")
    with secret_files(settings) as secrets, _build_log(log_path) as write:
        def line(text: str) -> None:
            write(text)
            if on_line:
                on_line(text)

        line(f"builder: {description}")
        try:
            engine.api_build(context=context, dockerfile=dockerfile, tag=tag,
                             build_args=build_args, labels=labels, secrets=secrets,
                             no_cache=no_cache, on_line=line)
        except PaddlecdError as e:
            write(f"error: {e.cause}")
            raise type(e)(e.cause, f"{e.hint}; full build log: {log_path}") from e
    return description


@contextlib.contextmanager
def _build_log(path: Path) -> Iterator[Echo]:
    """The build's own log at ``path``, as a function writing one line; a write, open or close
    that fails names ``path`` (a trial: a full state folder ended in "no space left on the
    device" naming no file: a file object's write error carries none)."""
    def named(e: OSError) -> OSError:
        return OSError(e.errno, e.strerror, str(path))

    try:
        fh = open(path, "w")  # noqa: SIM115 - closed below, its error named
    except OSError as e:
        raise named(e) from e

    def write(text: str) -> None:
        try:
            fh.write(text + "\n")
        except OSError as e:
            raise named(e) from e

    try:
        yield write
    except BaseException:
        with contextlib.suppress(OSError):
            fh.close()
        raise
    try:
        fh.close()
    except OSError as e:
        raise named(e) from e


def build_args(settings: Settings, v: variants.Variant, entry: lock.LockEntry) -> dict[str, str]:
    """``--build-arg`` values: the pinned base, the variant's packages and, when set, the cache
    scope (settings ``build.cache_scope``: a value no other build uses keeps this one's RUN layers
    apart from theirs; images/Dockerfile declares it before its first RUN)."""
    args = {"BASE": entry.pinned, "PACKAGES": " ".join(v.packages)}
    if settings.build.cache_scope:
        args["CACHE_SCOPE"] = settings.build.cache_scope
    return args


def labels_for(settings: Settings, v: variants.Variant, entry: lock.LockEntry) -> dict[str, str]:
    """OCI annotations (image-spec annotations.md) plus paddle/cuda/cudnn/variant labels.

    Raises:
        ConfigError: ``$PADDLECD_SOURCE_URL`` is set but empty, or carries a user or password
            (a trial: a GitHub token went into the label, which a push publishes; the origin
            remote's is stripped by :func:`git.network_url`).
    """
    short, full, when = git.revision(settings.root)
    given = files.environ_value("PADDLECD_SOURCE_URL")
    if given and files.hide_userinfo(given) != given:
        raise ConfigError(f"PADDLECD_SOURCE_URL {files.hide_userinfo(given)[:200]} carries a user "
                          "or password: it would be published in the image's "
                          "org.opencontainers.image.source label",
                          "drop them: the label names the repository, e.g. "
                          "https://github.com/OWNER/REPO")
    if given and not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\x00-\x1f\x7f]+", given):
        # a trial: 'not a url' and a URL with a newline went into the label
        raise ConfigError(f"PADDLECD_SOURCE_URL {given[:200]!r} is not a URL",
                          "give the repository's URL, e.g. https://github.com/OWNER/REPO (the "
                          "org.opencontainers.image.source label: OCI image-spec annotations)")
    source = given or git.origin_url(settings.root) or "unknown"
    oci = "org.opencontainers.image"
    out = {
        f"{oci}.source": source,
        f"{oci}.revision": full,
        f"{oci}.created": when,  # commit time, not wall time: a no-op rebuild gives the same image
        f"{oci}.version": f"{v.name}-{short}",
        f"{oci}.base.name": v.base,
        f"{oci}.base.digest": entry.digest,
        f"{LABEL}.variant": v.name,
        f"{LABEL}.device": v.device,
        f"{LABEL}.paddle.version": v.paddle,
    }
    for key in ("cuda", "cudnn", "tensorrt"):
        if getattr(v, key):
            out[f"{LABEL}.{key}.version"] = getattr(v, key)
    return out


def parse_labels(items: Iterable[str], own: Mapping[str, str]) -> dict[str, str]:
    """``--label KEY=VALUE`` items as ``{key: value}``; ``own`` are the labels paddlecd sets
    itself (:func:`labels_for`), which an extra label may not replace (verify and deploy read
    ``io.paddlecd.variant``; the OCI ones say where the image came from).

    Raises:
        ConfigError: an item without ``=`` or with an empty key, a key with white space in it
            (the builder refuses it: docker/cli opts.ValidateLabel; a trial reached the builder,
            exit 4, with its logs written), a NUL byte, a key of ``own``, or one key given
            twice with two values.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or key != key.strip():
            raise ConfigError(f"invalid --label {item[:200]!r}: not KEY=VALUE",
                              "e.g. --label org.example.ticket=REL-42")
        if any(c.isspace() or not c.isprintable() for c in key) or "\0" in item:  # ESC too
            raise ConfigError(f"invalid --label {item[:200]!r}: the key holds white space or a "
                              "control character, or the label a NUL byte",
                              "e.g. --label org.example.ticket=REL-42")
        if key in own:
            raise ConfigError(f"invalid --label {quoted(item)}: paddlecd sets {key} itself",
                              "use a key of your own namespace, e.g. org.example.<name>")
        if key in out and out[key] != value:  # a trial: the first value dropped unsaid
            raise ConfigError(f"--label {key} is given twice ({out[key][:80]!r} and "
                              f"{value[:80]!r})", "give each key once")
        out[key] = value
    return out


def candidate_tag(settings: Settings, variant: str) -> str:
    """``<registry>/<repository>:<variant>-<git short sha>`` (never ``latest``)."""
    return f"{settings.candidate_repo}:{variant}-{git.revision(settings.root).short}"


def pull_base(settings: Settings, entry: lock.LockEntry, *, on_line: Echo | None = None) -> bool:
    """Pull the locked base into the engine with the credentials push uses, unless it is there.

    BuildKit pulls ``FROM`` with the Docker CLI's config.json only, so with
    ``PADDLECD_REGISTRY_USERNAME``/``PASSWORD`` (and no ``docker login``) a base in the configured
    registry failed with 401 while push worked. The engine API pulls it first with those
    credentials; the daemon's BuildKit then resolves ``FROM repo@digest`` in the local image store.
    The pair goes to the configured registries only, as everywhere (registry.client.client_for).

    Returns:
        True when it pulled the base; False when nothing was needed (no env pair, another
        registry, or the base is already local).

    Raises:
        RegistryAuthError, RegistryError: the pull failed.
    """
    creds = registry_auth.engine_credentials(settings, entry.pinned)
    if not creds and engine.kind() == "podman":  # buildah's FROM is sent no credentials:
        # the base is pulled first, with config.json's (the env pair stays with its registries)
        creds = registry_auth.find_credentials(parse_reference(entry.pinned).registry,
                                                 environ={})
    if not creds or engine.image_exists(entry.pinned):
        return False
    if on_line:
        on_line(f"pulling base {entry.pinned} with {creds.source}")
    return engine.ensure_local(entry.pinned, credentials=creds)


def build(
    settings: Settings, variant_name: str, *, on_line: Echo | None = None, no_cache: bool = False,
    extra_labels: Iterable[str] = (),
) -> Built:
    """Build ``variant_name`` FROM its locked base digest and record the build under
    ``<state>/builds``; ``extra_labels`` (``KEY=VALUE``, :func:`parse_labels`) are added to the
    image config: a new digest on the same cached layers.

    Raises:
        ConfigError: unknown variant, a bad extra label. LockError: base unlocked or drifted.
            EngineError: the build failed.
        RegistryError: the base could not be pulled (:func:`pull_base`).
    """
    with ThreadPoolExecutor(max_workers=4) as pool:
        # The builder probe (CLI subprocesses, ~0.1 s on the 2-core VM) and the engine client's
        # connect + ping (0.02-0.1 s) run while the variant, the lock and git are read; the later
        # calls then find them cached, or raise their errors themselves (lru_cache keeps no
        # exceptions); git's calls likewise. Profiled with bench_build_push.py --profile-cold.
        pool.submit(engine.pick_builder, settings.build.docker_cli)
        pool.submit(engine.client)
        pool.submit(git.revision, settings.root)  # the tag and labels wait for these two
        pool.submit(git.origin_url, settings.root)
        v = variants.get(settings, variant_name)
        dockerfile = dockerfile_of(settings, v)
        entry = lock.check(settings, v)
        tag = candidate_tag(settings, v.name)
        labels = labels_for(settings, v, entry)
        labels |= parse_labels(extra_labels, labels)
    pull_base(settings, entry, on_line=on_line)  # after: it may use the client made above
    started, started_on = time.monotonic(), now_iso()
    images = settings.root / "images"
    args = build_args(settings, v, entry)
    try:
        builder, log = buildkit_build(
            settings,
            context=images,
            dockerfile=dockerfile,
            tag=tag,
            build_args=args,
            labels=labels,
            log_name=f"builder-{v.name}",  # the stage log of `invoke build` is build-<variant>-…
            on_line=on_line,
            no_cache=no_cache,
        )
    except EngineError as e:
        missing = _missing_base(settings, v.name, entry, e)
        if missing is None:
            raise
        raise missing from e
    built = Built(variant=v.name, tag=tag, image_id=engine.image_id(tag), builder=builder, log=log,
                  seconds=time.monotonic() - started)
    revision = git.revision(settings.root)
    # what push's provenance (paddlecd.image.provenance) says of this build: never a secret
    # (credentials enter as --secret only; their ids are named, their values never read here)
    write_json(settings.state / "builds" / f"{v.name}.json",
               {"variant": v.name, "tag": tag, "image_id": built.image_id, "builder": builder,
                "log": str(log), "built": now_iso(), "base": entry.pinned,
                "started": started_on, "build_args": args,
                "secrets": [i for i in ("ca_bundle", "pip_index_url") if _has_secret(settings, i)],
                "dockerfile": {"path": f"images/{v.dockerfile}",
                               "sha256": file_sha256(images / v.dockerfile)},
                "revision": revision.full, "dirty": revision.short.endswith("-dirty"),
                "source": labels.get("org.opencontainers.image.source")})
    return built


def _missing_base(settings: Settings, variant: str, entry: lock.LockEntry,
                  e: EngineError) -> LockError | None:
    """A build that failed because the locked base digest is not in its registry, as the lock
    problem it is (exit 3, naming the lock file that pins it), else None. A trial: a pin to a
    digest the registry lacks was BuildKit's "…@sha256:…: not found", exit 4, "full build log",
    while the pipeline's lock-check had said it succeeded."""
    if entry.pinned not in e.cause or "not found" not in e.cause.lower():
        return None
    shared, local = lock.paths(settings)
    where = local if variant in lock.read_file(local) else shared
    return LockError(
        f"the locked base of '{variant}', {entry.pinned} (in {where}), is not in its registry",
        f"lock it again: invoke lock --variant {variant} (a bootstrapped base: invoke "
        f"image.bootstrap --variant {variant}); the build log: {e.hint}")


def _has_secret(settings: Settings, secret_id: str) -> bool:
    """True when builds get the BuildKit secret ``secret_id`` (:func:`secret_args`)."""
    if secret_id == "ca_bundle":
        return ca_bundle(settings) is not None
    return bool(settings.build.pip_index_url or os.environ.get("PIP_INDEX_URL"))


def file_sha256(path: Path) -> str:
    """hex sha256 of the file ``path``."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
