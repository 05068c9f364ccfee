"""Which Paddle an image carries: its ``io.paddlecd.paddle.version`` label, read where it is.

A manifest's ``paddle_version`` is the producing image's, never the uploading host's.
The label is set at build time (``paddlecd.image.build.labels_for``); a local image is asked
through the engine, any other through the registry (the config blob of ``repo@sha256:…``).
"""

from __future__ import annotations

from typing import Any

from paddlecd.errors import ConfigError, NotFoundError, PaddlecdError, RegistryAuthError

PADDLE_LABEL = "io.paddlecd.paddle.version"


def image_labels(settings: Any, reference: str) -> dict[str, str]:
    """Labels of ``reference`` (``repo@sha256:…`` or a local tag): from the local engine when it
    holds the image, else from the registry's config blob.

    Raises:
        ConfigError: a malformed reference. RegistryError (NotFoundError, RegistryAuthError): the
            registry lacks the image or refuses us. EngineError: the engine failed.
    """
    from paddlecd import engine
    from paddlecd.registry import client as registry

    if _local(reference):
        return engine.image_labels(reference)
    client, ref = registry.open_reference(settings, reference)
    client.retries = 1  # a label lookup, not a transfer: one try, then say why it is unknown
    digest = ref.digest or client.resolve(ref.repository, ref.identifier).digest
    return client.image_labels(ref.repository, digest)


def _local(reference: str) -> bool:
    from paddlecd import engine

    try:
        return engine.image_exists(reference)
    except PaddlecdError:  # no engine here: the registry still answers
        return False


def paddle_version(settings: Any, reference: str) -> str | None:
    """The Paddle version image ``reference`` declares (its label), or None when it has none.

    Raises:
        as :func:`image_labels`.
    """
    return image_labels(settings, reference).get(PADDLE_LABEL) or None


def declared_paddle(settings: Any, reference: str | None) -> tuple[str | None, str | None]:
    """``(version, None)`` from the image's label, or ``(None, why)`` when ``reference`` is None,
    carries no label, or cannot be read (the registry down): the upload then records
    ``paddle_version: null`` and its plan says why, rather than guessing from this host.

    Raises:
        RegistryAuthError, NotFoundError: the registry refused the credentials, or holds no such
            image: the ``--image`` given is wrong or unreachable with these credentials, as
            every other task says (a trial: upload went on, exit 0, and recorded null).
        ConfigError: the credentials' own configuration is broken (a Docker config.json entry,
            half of PADDLECD_REGISTRY_USERNAME/PASSWORD, DOCKER_CONFIG a file), which every
            other task refuses (trial 11: upload went on, exit 0, and recorded null).
    """
    if not reference:
        return None, "no --image given"
    try:
        version = paddle_version(settings, reference)
    except (RegistryAuthError, NotFoundError, ConfigError):
        raise
    except PaddlecdError as e:
        return None, f"{reference} not readable: {e.cause}"
    return (version, None) if version else (None, f"{reference} has no {PADDLE_LABEL} label")
