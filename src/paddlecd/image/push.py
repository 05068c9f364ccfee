"""push: send a built image to the private registry and read its digest back.

Credentials come from Docker's config.json (docker-py reads it) or, when both are set, from
``PADDLECD_REGISTRY_USERNAME``/``PADDLECD_REGISTRY_PASSWORD``; they are never printed. Transient
failures (5xx, resets) are retried with exponential backoff; auth and client errors are not. Every
chunk of the push stream is decoded (engine.decode_stream), then the digest is read back from the
registry and compared with the one the engine reported. With a signing key configured, the
build's SLSA provenance is attached to the pushed digest (:mod:`paddlecd.image.provenance`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tenacity

from paddlecd import engine
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, PaddlecdError, RegistryAuthError, RegistryError
from paddlecd.image import variants
from paddlecd.image.candidate import save_candidate
from paddlecd.registry import auth as registry_auth
from paddlecd.registry import client as registry
from paddlecd.types import Echo


@dataclass(frozen=True)
class Pushed:
    """A pushed image: ``tag`` (``host/repo:tag``), ``digest`` and ``reference``
    (``host/repo@sha256:…``); ``provenance``: ``host/repo@sha256:…`` of its signed SLSA
    provenance referrer (None: no signing key configured)."""

    variant: str | None
    tag: str
    digest: str
    reference: str
    provenance: str | None = None


def _transient(e: BaseException) -> bool:
    return (
        isinstance(e, RegistryError)
        and not isinstance(e, RegistryAuthError)
        and not _client_error(e)
    )


def _client_error(e: PaddlecdError) -> bool:
    # 4xx-style answers repeat identically on retry (distribution error codes, spec "Error Codes")
    text = e.cause.lower()
    return any(
        k in text for k in ("invalid", "unknown", "denied", "unsupported", "too large", "not found")
    )


def push_reference(settings: Settings, tag: str, *, on_progress: Echo | None = None) -> str:
    """Push local ``tag`` with retries, verify the registry serves the same digest, return it.

    Raises:
        RegistryAuthError: credentials missing/wrong (not retried).
        RegistryError: the push failed after ``settings.registry.push_retries`` attempts, or the
            digest read back differs from the one the engine reported.
    """
    attempts = max(1, settings.registry.push_retries)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_progress:
            on_progress(
                f"push attempt {state.attempt_number} failed: {state.outcome.exception()}; retrying"
            )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=1, max=20),
        retry=tenacity.retry_if_exception(_transient),
        before_sleep=before_sleep,
        reraise=True,
    )
    ref = registry.parse_reference(tag)
    # The engine is handed the credentials paddlecd itself resolved (env pair, else config.json in
    # the Docker CLI's order): docker-py would otherwise use the auth its cached client read once,
    # at creation, and push as someone else than the registry reads below.
    creds = registry_auth.find_credentials(ref.registry)
    digest = retrying(engine.push, tag, credentials=creds, on_progress=on_progress)
    served = registry.client_for(settings, ref.registry).resolve(ref.repository, ref.tag).digest
    if served != digest:
        raise RegistryError(
            f"pushed {tag}: engine reported {digest} but the registry serves {served}",
            "another push raced this one; re-run push",
        )
    return digest


def last_build(settings: Settings, variant_name: str) -> dict[str, Any]:
    """The record of the variant's last build (:func:`paddlecd.image.provenance.read_build`), its
    tag checked against the configured candidate repository. Push reads it once: what it pushes
    and the provenance it signs come from the same record, even if a build rewrites it meanwhile.

    Raises:
        ConfigError: unknown variant, a broken record, or the build was tagged for another
            registry/repository than ``registry.url``/``registry.repository`` say now (pushing it
            would go elsewhere).
        RegistryError: no build recorded for the variant.
    """
    variants.get(settings, variant_name)
    record = settings.state / "builds" / f"{variant_name}.json"
    if not record.exists():
        raise RegistryError(f"no build of variant '{variant_name}' to push (no {record})",
                            f"run: invoke build --variant {variant_name}")
    from paddlecd.image import provenance  # its signing imports only when a push is asked

    build = provenance.read_build(settings, variant_name)
    tag = build["tag"]
    if tag.rsplit(":", 1)[0] != settings.candidate_repo:
        raise ConfigError(
            f"the last build of '{variant_name}' is tagged {tag}, not for "
            f"{settings.candidate_repo}",
            f"rebuild for the configured registry: invoke build push --variant {variant_name}",
        )
    return build


def check_writable(folder: Path) -> None:
    """Make sure a file can be created in ``folder`` (created if missing), by creating one.

    Raises:
        ConfigError: naming the folder and the OS's reason.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".paddlecd-write-check-"):
            pass
    except OSError as e:
        raise ConfigError(f"cannot write to the state folder {folder}: {e.strerror or e}",
                          "fix its permissions or free space, or set state_dir "
                          "(PADDLECD_STATE_DIR) to a writable folder") from e


def preflight(settings: Settings, variant_name: str) -> tuple[dict[str, Any], bool]:
    """What :func:`push` checks before it writes anything, and ``push --dry-run`` checks too (a
    trial: a dry run approved a half credential pair and a garbage key the push then refused):
    the last build, its image in the engine, the registry's credentials, the signing key.

    Returns:
        (the last build's record, :func:`last_build`, whose ``tag`` is pushed; whether a signed
        provenance will be attached).

    Raises:
        ConfigError, RegistryError, RegistryAuthError, SigningKeyError: as :func:`push`.
    """
    from paddlecd.signing import keys

    build = last_build(settings, variant_name)
    tag = build["tag"]
    if not engine.image_exists(tag):
        raise RegistryError(f"image {tag} from the last build is gone from the engine",
                            f"run: invoke build --variant {variant_name}")
    built, now = build.get("image_id"), engine.image_id(tag)
    if built and built != now:  # a trial: the tag re-pointed at the base was pushed, signed
        raise ConfigError(
            f"{tag} now names image {str(now)[:19]}…, not the last build of '{variant_name}' "
            f"({str(built)[:19]}…): the tag was moved since the build",
            f"build again (invoke build --variant {variant_name}); paddlecd pushes and signs only "
            "the image it built")
    registry_auth.find_credentials(registry.parse_reference(tag).registry)
    signing = keys.configured(settings)
    if signing:
        keys.signer(settings)  # a broken key is named before anything is pushed
    return build, signing


def push(settings: Settings, variant_name: str, *, on_progress: Echo | None = None) -> Pushed:
    """Push the last build of ``variant_name`` (recorded by build) and record it as the candidate.

    The candidates folder is checked writable before anything is pushed, so a successful push is
    never left without its record. With a signing key configured
    (:func:`paddlecd.signing.keys.configured`), the build's signed SLSA provenance is pushed as a
    referrer of the digest; the key is loaded before the image is pushed.

    Raises:
        ConfigError: the state folder is not writable. SigningKeyError: the configured key is
            unusable (nothing pushed).
        RegistryError: no build recorded for the variant, or the push failed (see
            :func:`push_reference`).
    """
    from paddlecd.image import provenance  # its signing imports only when a push is asked

    build, signing = preflight(settings, variant_name)
    tag = build["tag"]
    check_writable(settings.state / "candidates")
    digest = push_reference(settings, tag, on_progress=on_progress)
    repo = tag.rsplit(":", 1)[0]
    reference = f"{repo}@{digest}"
    attached = provenance.attach(settings, build, reference=reference,
                                 digest=digest) if signing else None
    pushed = Pushed(variant=variant_name, tag=tag, digest=digest, reference=reference,
                    provenance=attached)
    save_candidate(
        settings, variant_name, reference=pushed.reference, digest=digest, tag=tag.rsplit(":", 1)[1]
    )
    return pushed
