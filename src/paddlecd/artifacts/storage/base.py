"""The storage interface: what artifacts need from an object store, and the types it speaks.

:mod:`.file` and :mod:`.s3` implement it; :mod:`paddlecd.artifacts.storage` opens one from a URL.
This module imports neither, so the stores and the opener depend on it and not on each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from paddlecd.errors import StorageError

Progress = Callable[[int], None]  # receives a byte count each time more bytes moved
MIB = 1024 * 1024


class ConflictError(StorageError):
    """Another upload owns the key or the version: it exists already, or is being written now
    (exit code 8, as every storage failure)."""


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: ``key`` relative to the store root, ``size`` in bytes."""

    key: str
    size: int


@dataclass(frozen=True)
class Quirk:
    """A way a store differs from AWS S3, found by :meth:`Store.quirks` or met during a call.

    ``name`` is stable (e.g. ``aws-chunked-refused``); ``detail`` is one line for a person;
    ``hint`` says what to set, or is None when paddlecd already works around it."""

    name: str
    detail: str
    hint: str | None = None


class Store(Protocol):
    """What artifacts need from an object store. ``url`` is the root, e.g. ``s3://models/paddle``.

    Two calls exist for concurrent writers (two uploads of one name and version at once).
    ``put_bytes(..., exclusive=True)`` creates ``key`` only if it does not exist, else raises
    :class:`ConflictError`. ``claim(prefix)`` is a context manager holding the right to write under
    ``prefix`` (one version) while it is open; a second claimant gets :class:`ConflictError` at
    once.
    A claim left by a killed process is released by the OS (file) or taken over with ``take_over``
    (S3, where nothing can tell a dead writer from a slow one).
    ``sha256(key)`` hashes the object's bytes as stored (hex; None when it does not exist).
    ``quirks()`` names how the store differs from AWS S3 (probed without writing, plus what calls
    so far met); a folder has none.
    """

    url: str

    def check(self) -> None: ...
    def put_file(self, path: Path, key: str, *, progress: Progress | None = None) -> None: ...
    def put_bytes(self, data: bytes, key: str, *, exclusive: bool = False) -> None: ...
    def get_file(self, key: str, dest: Path, *, progress: Progress | None = None) -> None: ...
    def get_bytes(self, key: str) -> bytes | None: ...
    def head(self, key: str) -> ObjectInfo | None: ...
    def sha256(self, key: str) -> str | None: ...
    def list(self, prefix: str) -> list[ObjectInfo]: ...
    def delete(self, keys: Iterable[str]) -> None: ...
    def abort_uploads(self, prefix: str) -> list[str]: ...
    def claim(self, prefix: str, *, take_over: bool = False) -> AbstractContextManager[None]: ...
    def release_abandoned(self, prefix: str) -> bool: ...
    def quirks(self) -> list[Quirk]: ...


@dataclass(frozen=True)
class Location:
    """A parsed store URL: ``scheme`` is ``s3`` or ``file``; ``bucket`` is empty for ``file``;
    ``prefix`` has no leading/trailing ``/`` for s3 and is an absolute path for ``file``."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        """The canonical URL string."""
        if self.scheme == "file":
            return f"file://{self.prefix}"
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def released_if_free(store: Store, prefix: str) -> bool:
    """Take ``prefix``'s claim and let it go at once: True when that was possible, False when a
    live holder keeps it (ConflictError). What ``release_abandoned`` does once a left-over claim
    is found."""
    try:
        with store.claim(prefix):
            return True
    except ConflictError:
        return False
