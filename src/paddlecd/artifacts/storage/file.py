"""The file store: a local folder with the layout of a bucket (the embedded default).

Each write is a temp file renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from paddlecd.artifacts.storage.base import MIB, ObjectInfo, Progress
from paddlecd.errors import StorageError


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

