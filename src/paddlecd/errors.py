"""One error root for paddlecd, typed subclasses, stable exit codes.

Every failure a user can meet is raised as a :class:`PaddlecdError` subclass carrying a one-line
``cause`` (what failed, naming the input) and a ``hint`` (what to do). The CLI layer's
``paddlecd.cli.common.guarded`` is the single catch site: it prints ``error: <cause>`` /
``hint: <hint>`` and exits with ``exit_code``.
The pattern follows cibuildwheel's ``errors.py``. Exit codes are part of the public interface
and never change meaning:

====  =====================================
code  meaning
====  =====================================
2     configuration / bad input (YAML, flags, variant, version, job file)
3     base lock missing or drifted
4     container engine failure (daemon down, build failed)
5     registry failure (down, auth, manifest, push)
6     verification failed (a smoke check failed, or evidence missing)
7     promotion refused (evidence, clobber, precedence)
8     object storage failure
9     cluster / job failure
10    pipeline failure (a stage failed, resume impossible)
11    doctor found a blocking problem
====  =====================================
"""

from __future__ import annotations

import re
from typing import Any


def quoted(value: Any, cap: int = 80) -> str:
    """``value`` as a message quotes it: its repr whole up to ``cap`` characters, else the repr
    of its first ``cap`` characters, ``…`` and its length. A trial: a 200,000-character
    ``registry.repository`` was quoted for 936 of them, and a 1 MB setting was echoed whole."""
    shown = repr(value)
    if len(shown) <= cap:
        return shown
    text = value if isinstance(value, str) else str(value)
    return f"{text[:cap]!r}… ({len(text)} characters)"


class PaddlecdError(Exception):
    """Root of all paddlecd errors.

    Args:
        cause: one line saying what failed and naming the input (file, reference, variant…).
        hint: one line saying what to do about it; optional.
    """

    exit_code = 1

    def __init__(self, cause: str, hint: str | None = None):
        super().__init__(cause)
        self.cause = cause
        self.hint = hint

    def __str__(self) -> str:  # one line, as the CLI prints it
        return self.cause


class ConfigError(PaddlecdError):
    """Bad configuration or input: YAML, unknown keys, unknown variant, bad flag values."""

    exit_code = 2


class LockError(PaddlecdError):
    """A base image is not locked, or the lock no longer matches images/variants.yaml."""

    exit_code = 3


class EngineError(PaddlecdError):
    """The container engine failed: daemon unreachable, build error, run error."""

    exit_code = 4


class ContainerTimeout(EngineError):
    """A container did not exit in its time and was killed; ``logs`` holds what it printed until
    then (a caller that owns the run names it as its own failure)."""

    def __init__(self, cause: str, hint: str | None = None, *, logs: str = ""):
        super().__init__(cause, hint)
        self.logs = logs


class RegistryError(PaddlecdError):
    """The registry failed or refused: unreachable, auth, missing manifest, push error."""

    exit_code = 5


class RegistryAuthError(RegistryError):
    """The registry rejected the credentials (401/403), or none were found."""


class RegistryRateLimitError(RegistryError):
    """The registry kept answering HTTP 429 (or asked to wait longer than the configured bound)."""


class NotFoundError(RegistryError):
    """A repository, tag, manifest or blob does not exist in the registry."""


class VerifyError(PaddlecdError):
    """A smoke check failed inside the image, or verification could not run."""

    exit_code = 6


class PromotionError(PaddlecdError):
    """A promotion or rollback was refused or failed part-way."""

    exit_code = 7


class StorageError(PaddlecdError):
    """Object storage failed or refused (bucket, credentials, integrity)."""

    exit_code = 8


class ClusterError(PaddlecdError):
    """A training job could not be rendered, submitted, or it failed."""

    exit_code = 9


class PipelineError(PaddlecdError):
    """A pipeline definition is invalid, a stage failed, or a resume is impossible."""

    exit_code = 10


class SigningKeyError(ConfigError):
    """A signing key or trusted public key is missing, unreadable or not the right kind of key."""


class AttestationError(PromotionError):
    """No attestation of a digest allows its promotion; the subclasses say why."""


class NoAttestationError(AttestationError):
    """The registry holds no attestation for the digest."""


class SignatureError(AttestationError):
    """An attestation's signature does not verify (a changed byte) or is by an untrusted key."""


class UntrustedKeyError(SignatureError):
    """An attestation is signed by a key that is not among the trusted ones: anyone who may push
    to the repository can attach one, so beside one that verifies it is shown, not fatal."""


class SubjectError(AttestationError):
    """An attestation names another digest or another predicate type than the one checked."""


class VariantMismatchError(SubjectError):
    """The digest was verified as another variant than the one it is promoted as: never
    overridden by ``--force`` (meant for missing evidence), or a CPU image becomes a CUDA
    release (a trial)."""


class AttestedFailureError(AttestationError):
    """The attested run failed, lacks smoke modules, is too old, or a newer run failed."""


class DoctorError(PaddlecdError):
    """``doctor`` found a problem that would stop the pipeline."""

    exit_code = 11


class ModelCheckError(VerifyError):
    """An exported model failed its check in the runtime image, or could not be checked
    there (an image without Paddle); exit code 6, as every verification failure."""


class ModelSignatureError(VerifyError):
    """A stored model's ``model.sig`` is missing, empty, by an untrusted key, or does not match its
    files (OpenSSF Model Signing); exit code 6, as every verification failure."""


class Interrupted(PaddlecdError):
    """The user interrupted the run (Ctrl-C, SIGINT); exit code 130, the shell's 128 + SIGINT.
    (Not the builtin ``InterruptedError``, which is an ``OSError`` for EINTR.)"""

    exit_code = 130


def network_reason(e: BaseException) -> str:
    """The useful part of a network error's text: ``connection refused (errno 111)`` from
    ``[Errno 111] Connection refused`` (requests, urllib3 and the Kubernetes client nest reprs
    several levels deep), a TLS failure, a time-out; else the first 160 characters."""
    text = str(e)
    errno = (re.search(r"\[Errno (-?\d+)\] ([^'\"\])]+)", text)  # also a repr: docker-py's
             or re.search(r"[A-Za-z]+Error\((-?\d+), '([^']+)'\)", text))  # (trial 21)
    if errno:
        return f"{errno.group(2).strip().lower()} (errno {errno.group(1)})"
    for pattern in (r"certificate verify failed: [^'\"()\]]+", r"\[SSL: [A-Z_]+\][^'\"()]*",
                    r"(?:Read|Connect) timed out", r"[Tt]imed out",
                    r"Remote end closed connection without response"):
        found = re.search(pattern, text)
        if found:
            return found.group(0).strip()
    return text[:160]
