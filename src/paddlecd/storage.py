"""Object storage: one small interface, two stores (S3-compatible buckets, local folders). Issue 4.

Keys are relative to the store's root (``s3://bucket/prefix`` or ``file:///path``) and use ``/``
separators. The S3 store lives in :mod:`paddlecd.s3store`, the only module importing boto3; the
file store (the embedded default, ``file://<state>/artifacts``) lives here, with the same layout and
atomic writes (temp file + rename), so a reader never sees half a file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from .config import Settings, StorageSettings
from .errors import ConfigError, StorageError

Progress = Callable[[int], None]  # receives a byte count each time more bytes moved
MIB = 1024 * 1024


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: ``key`` relative to the store root, ``size`` in bytes."""

    key: str
    size: int


class Store(Protocol):
    """What artifacts need from an object store. ``url`` is the root, e.g. ``s3://models/paddle``."""

    url: str

    def check(self) -> None: ...
    def put_file(self, path: Path, key: str, *, progress: Progress | None = None) -> None: ...
    def put_bytes(self, data: bytes, key: str) -> None: ...
    def get_file(self, key: str, dest: Path, *, progress: Progress | None = None) -> None: ...
    def get_bytes(self, key: str) -> bytes | None: ...
    def head(self, key: str) -> ObjectInfo | None: ...
    def list(self, prefix: str) -> list[ObjectInfo]: ...
    def delete(self, keys: Iterable[str]) -> None: ...
    def abort_uploads(self, prefix: str) -> list[str]: ...


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


def parse_url(url: str) -> Location:
    """Parse ``s3://bucket[/prefix]`` or ``file:///abs/path``.

    Raises:
        ConfigError: another scheme, no bucket, an invalid bucket name, or a relative file path.
    """
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc or not parsed.path.startswith("/"):
            raise ConfigError(f"store URL '{url}': file URLs need an absolute path",
                              "write file:///abs/path (three slashes)")
        return Location("file", "", os.path.normpath(parsed.path))
    if parsed.scheme != "s3":
        raise ConfigError(f"store URL '{url}': scheme must be s3:// or file://",
                          "e.g. s3://models/paddle or file:///srv/models")
    if not parsed.netloc:
        raise ConfigError(f"store URL '{url}' has no bucket", "write s3://BUCKET or s3://BUCKET/PREFIX")
    _check_bucket(parsed.netloc, url)
    return Location("s3", parsed.netloc, parsed.path.strip("/"))


def _check_bucket(bucket: str, url: str) -> None:
    # Bucket naming rules: 3-63 chars of a-z 0-9 . -, starting and ending with a letter or digit
    # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
    ok = 3 <= len(bucket) <= 63 and bucket[0].isalnum() and bucket[-1].isalnum()
    if not ok or any(not (c.islower() or c.isdigit() or c in ".-") for c in bucket):
        raise ConfigError(f"store URL '{url}': '{bucket}' is not a valid bucket name",
                          "3-63 characters: lowercase letters, digits, '.' and '-'")


def open_store(url: str, settings: StorageSettings) -> Store:
    """Open the store at ``url`` with the endpoint and transfer knobs of ``settings``.

    Raises:
        ConfigError: a bad URL or bad settings (addressing style, checksum mode, part size).
    """
    loc = parse_url(url)
    if loc.scheme == "file":
        return FileStore(Path(loc.prefix))
    from .s3store import S3Store  # boto3 is imported only when an s3:// store is used

    return S3Store(loc.bucket, loc.prefix, settings)


def default_store_url(settings: Settings) -> str:
    """``storage.url``, or the embedded default ``file://<state>/artifacts``."""
    return settings.storage.url or f"file://{settings.state / 'artifacts'}"


def store_for(settings: Settings, url: str | None = None) -> Store:
    """Open ``url`` (default :func:`default_store_url`) with the storage settings. Raises ConfigError."""
    return open_store(url or default_store_url(settings), settings.storage)


def split_model_url(arg: str, settings: Settings, *, parts: int) -> tuple[str, list[str]]:
    """Split ``<store-url>/<name>[/<version>]`` (or a bare ``<name>[/<version>]`` on the configured
    store) into the store URL and its last ``parts`` segments.

    Raises:
        ConfigError: too few segments, or a bad store URL.
    """
    base, rest = (default_store_url(settings), arg) if "://" not in arg else _split_full(arg, parts)
    segments = [s for s in rest.strip("/").split("/") if s]
    if len(segments) != parts:
        want = "<name>/<version>" if parts == 2 else "<name>"
        raise ConfigError(f"'{arg}' does not end in {want}", f"e.g. s3://models/paddle/{want} or {want}")
    parse_url(base)
    return base, segments


def _split_full(arg: str, parts: int) -> tuple[str, str]:
    scheme, _, path = arg.partition("://")
    segments = path.rstrip("/").split("/")
    keep = len(segments) - parts
    if keep < 1 or (scheme == "file" and keep < 2):
        raise ConfigError(f"'{arg}' has no store part before the model", "e.g. s3://models/ocr-det/1.4.0")
    return f"{scheme}://{'/'.join(segments[:keep])}", "/".join(segments[keep:])


class FileStore:
    """A folder with the same layout as a bucket; each write is a temp file renamed into place."""

    def __init__(self, root: Path):
        self.root = root
        self.url = f"file://{root}"

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/"))

    def check(self) -> None:
        """Fail early when the root exists but is not a folder (it is created on first write)."""
        if self.root.exists() and not self.root.is_dir():
            raise StorageError(f"store {self.url} is not a folder", "point storage.url at a folder")

    def put_file(self, path: Path, key: str, *, progress: Progress | None = None) -> None:
        """Copy ``path`` to ``key`` atomically (temp file in the same folder, then rename)."""
        with self._writing(key) as out, open(path, "rb") as src:
            while chunk := src.read(MIB):
                out.write(chunk)
                if progress:
                    progress(len(chunk))

    def put_bytes(self, data: bytes, key: str) -> None:
        """Write ``data`` to ``key`` atomically."""
        with self._writing(key) as out:
            out.write(data)

    def _writing(self, key: str):
        return _AtomicWriter(self._path(key), self.url)

    def get_file(self, key: str, dest: Path, *, progress: Progress | None = None) -> None:
        """Copy ``key`` to ``dest``. Raises StorageError when it is missing or unreadable."""
        try:
            shutil.copyfile(self._path(key), dest)
        except OSError as e:
            raise StorageError(f"reading {self.url}/{key}: {e.strerror}", "check the store folder") from e
        if progress:
            progress(dest.stat().st_size)

    def get_bytes(self, key: str) -> bytes | None:
        """The content of ``key``, or None when it does not exist."""
        p = self._path(key)
        return p.read_bytes() if p.is_file() else None

    def head(self, key: str) -> ObjectInfo | None:
        """Size of ``key``, or None when it does not exist."""
        p = self._path(key)
        return ObjectInfo(key, p.stat().st_size) if p.is_file() else None

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Objects whose key starts with ``prefix`` (a folder prefix ending in ``/``), sorted."""
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        found = [p for p in base.rglob("*") if p.is_file()]
        return sorted((ObjectInfo(p.relative_to(self.root).as_posix(), p.stat().st_size) for p in found),
                      key=lambda o: o.key)

    def delete(self, keys: Iterable[str]) -> None:
        """Remove ``keys`` (missing ones are ignored)."""
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def abort_uploads(self, prefix: str) -> list[str]:
        """Nothing to abort: an interrupted write leaves a temp file, which :meth:`list` shows."""
        return []


class _AtomicWriter:
    """Context manager: a temp file next to ``target``, renamed over it on success, removed on error."""

    def __init__(self, target: Path, store_url: str):
        self.target, self.store_url = target, store_url

    def __enter__(self):
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = tempfile.mkstemp(prefix=f".{self.target.name}.", suffix=".tmp", dir=self.target.parent)
        except OSError as e:
            raise StorageError(f"writing {self.target}: {e.strerror}", f"check {self.store_url} is writable") from e
        self.file = os.fdopen(fd, "wb")
        return self.file

    def __exit__(self, exc_type, exc, tb):
        self.file.close()
        if exc_type is None:
            os.replace(self.tmp, self.target)
        else:
            os.unlink(self.tmp)
        return False

