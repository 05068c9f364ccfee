"""The file store: a local folder with the layout of a bucket (the embedded default).

Each write is a temp file renamed into place, so a reader never sees half a file; a failed write
(a full disk included) removes its temp file and raises StorageError naming the path.
A version is claimed by an exclusive ``flock`` on ``<root>/.claims/<name>/<version>.lock``: the
kernel drops it when its process dies, so a killed upload never blocks the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from paddlecd.artifacts.storage.base import (
    MIB,
    ConflictError,
    ObjectInfo,
    Progress,
    Quirk,
    released_if_free,
)
from paddlecd.errors import ConfigError, StorageError
from paddlecd.files import NO_SPACE, disk_full, free_space, kind_of

CLAIMS = ".claims"  # under the root; never a model name (those are DNS labels)


class FileStore:
    """A folder with the same layout as a bucket; each write is a temp file renamed into place."""

    def __init__(self, root: Path):
        self.root = root
        self.url = f"file://{root}"

    def _path(self, key: str) -> Path:
        """The file of ``key`` under the root.

        Raises:
            ConfigError: it resolves outside the root (a symlinked model or version folder, or
                file: a trial listed /etc through ``<store>/etc -> /etc``).
        """
        path = self.root.joinpath(*key.split("/"))
        real, root = path.resolve(), self.root.resolve()
        if not real.is_relative_to(root):
            raise ConfigError(
                f"{self.url}/{key} resolves to {real}, outside the store {self.root}",
                "paddlecd never follows a link out of a store: remove the link, or copy the "
                "files into the store",
            )
        return path

    def check(self) -> None:
        """Fail early when the root exists but is not a folder (it is created on first write)."""
        if self.root.exists() and not self.root.is_dir():
            raise StorageError(f"store {self.url} is not a folder",
                               "point --to (or storage.url) at a folder")
        # nor can it be made below a file (a trial: the dry run approved, the upload failed)
        blocker = next((p for p in self.root.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise StorageError(f"store {self.url} cannot be made: {blocker} is a file, not a "
                               "folder", "point --to (or storage.url) at a folder")

    def quirks(self) -> list[Quirk]:
        """None: a folder is not an S3 implementation."""
        return []

    def put_file(self, path: Path, key: str, *, progress: Progress | None = None) -> None:
        """Copy ``path`` to ``key`` atomically (temp file in the same folder, then rename)."""
        with self._writing(key) as out, open(path, "rb") as src:
            while chunk := src.read(MIB):
                out.write(chunk)
                if progress:
                    progress(len(chunk))

    def put_bytes(self, data: bytes, key: str, *, exclusive: bool = False) -> None:
        """Write ``data`` to ``key`` atomically.

        Raises:
            ConflictError: ``exclusive`` and ``key`` exists (checked by the atomic ``link``).
            StorageError: the write failed (full disk, permissions); no temp file is left.
        """
        with self._writing(key, exclusive=exclusive) as out:
            out.write(data)

    def _readable(self, key: str) -> Path:
        """:meth:`_path` of ``key`` to read: never a named pipe, socket or device, which an
        open waits on for good (a trial: a FIFO manifest.json hung list, show and download).

        Raises:
            StorageError: something other than a file is at ``key`` (a key names a file: a
                folder there was "no manifest.json", an upload still running, trial 19).
        """
        path = self._path(key)
        if path.exists() and not path.is_file():
            raise StorageError(f"{self.url}/{key} is {kind_of(path)}, not a stored file",
                               "the store is damaged there: remove it, then upload the version "
                               "again (--overwrite)")
        return path

    def _writing(self, key: str, *, exclusive: bool = False) -> _AtomicWriter:
        return _AtomicWriter(self._path(key), self.url, exclusive=exclusive)

    def get_file(self, key: str, dest: Path, *, progress: Progress | None = None) -> None:
        """Copy ``key`` to ``dest``. Raises StorageError when it is missing or unreadable."""
        try:
            src = open(self._readable(key), "rb")  # noqa: SIM115 -- closed below; errors told apart
        except OSError as e:
            raise StorageError(
                f"reading {self.url}/{key}: {e.strerror}", "check the store folder"
            ) from e
        with src:
            try:
                with open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
            except OSError as e:  # the destination's disk, not the store (a full --dest)
                full = disk_full(e)
                raise StorageError(
                    f"writing {dest}: {NO_SPACE if full else e.strerror}",
                    free_space(dest.parent) if full else f"check {dest.parent} is writable",
                ) from e
        if progress:
            progress(dest.stat().st_size)

    def get_bytes(self, key: str) -> bytes | None:
        """The content of ``key``, or None when it does not exist (or was removed meanwhile)."""
        try:
            return self._readable(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def sha256(self, key: str) -> str | None:
        """hex sha256 of the bytes stored under ``key``, or None when it does not exist.

        Raises:
            StorageError: it exists and cannot be read.
        """
        digest = hashlib.sha256()
        try:
            with self._readable(key).open("rb") as f:
                for chunk in iter(lambda: f.read(MIB), b""):
                    digest.update(chunk)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as e:
            raise StorageError(
                f"reading {self.url}/{key}: {e.strerror}", "check the store folder"
            ) from e
        return digest.hexdigest()

    def head(self, key: str) -> ObjectInfo | None:
        """Size of ``key``, or None when it does not exist."""
        p = self._path(key)
        size = _size(p)
        return ObjectInfo(key, size) if size is not None and p.is_file() else None

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Objects whose key starts with ``prefix`` (a folder prefix ending in ``/``), sorted.
        A file renamed or removed by a concurrent upload while listing is left out.

        Raises:
            ConfigError: an entry under ``prefix`` links out of the store (:meth:`_path`; a
                trial: a version folder linked to /tmp was left out, and the model called
                missing).
        """
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        entries = list(base.rglob("*"))  # a folder link is not followed: checked here instead
        for link in [p for p in entries if p.is_symlink()]:
            self._path(link.relative_to(self.root).as_posix())
            if link.is_dir():  # inside the store: its files listed under the link's own keys, so
                entries += link.rglob("*")  # the version they form is judged, never left out
                # (trial 20: 9.0.5 -> 9.0.0 was missing from artifacts.list, exit 0)
        found = [(p, _size(p)) for p in entries if p.is_file()]
        return sorted(
            (
                ObjectInfo(p.relative_to(self.root).as_posix(), size)
                for p, size in found
                if size is not None
            ),
            key=lambda o: o.key,
        )

    def delete(self, keys: Iterable[str]) -> None:
        """Remove ``keys`` (missing ones are ignored)."""
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def abort_uploads(self, prefix: str) -> list[str]:
        """Nothing to abort: an interrupted write leaves a temp file, which :meth:`list` shows."""
        return []

    def _claim_path(self, prefix: str) -> Path:
        """``<root>/.claims/<prefix>.lock``, inside the store even after links are followed (a
        trial: ``.claims`` linked out of the store had the claims made there).

        Raises:
            ConfigError: it resolves outside the root (:meth:`_path`).
        """
        return self._path(f"{CLAIMS}/{prefix.rstrip('/')}.lock")

    def release_abandoned(self, prefix: str) -> bool:
        """Remove the claim file of ``prefix`` a killed upload left (its lock died with it);
        True when there was one. A live holder's is kept."""
        path = self._claim_path(prefix)
        if not path.is_file():
            return False
        return released_if_free(self, prefix)

    @contextlib.contextmanager
    def claim(self, prefix: str, *, take_over: bool = False) -> Iterator[None]:
        """Hold the exclusive right to write under ``prefix`` (``<name>/<version>/``).

        ``take_over`` changes nothing here: a claim lives exactly as long as its process.

        Raises:
            ConflictError: another process holds it (its host, pid and start time are named).
            StorageError: the claim file cannot be created.
        """
        path = self._claim_path(prefix)
        fd = _lock(path, self.url, prefix)
        try:
            try:
                os.write(fd, f"{socket.gethostname()} pid {os.getpid()} since {_now()}".encode())
            except OSError as e:  # a full store: os.write's error names no file
                full = disk_full(e)
                raise StorageError(
                    f"claiming {self.url}/{prefix}: {NO_SPACE if full else e.strerror} ({path})",
                    free_space(self.root) if full else f"check {self.url} is writable") from e
            yield
        finally:
            path.unlink(missing_ok=True)  # before unlocking: a waiter sees a new inode, retries
            os.close(fd)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # a temp file renamed into place, or a leftover swept, meanwhile
        return None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _lock(path: Path, url: str, prefix: str) -> int:
    """An fd of ``path`` holding its flock; the file at ``path`` is the one locked (a holder unlinks
    it before unlocking, so a lock won on an unlinked inode is retried)."""
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(
                f"claiming {url}/{prefix}: {e.strerror} ({path})", f"check {url} is writable"
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_quietly(path)
            os.close(fd)
            raise ConflictError(
                f"{url}/{prefix} is being uploaded by another process ({holder})",
                "wait for it to finish, then re-run (the same model moves nothing)",
            )
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _read_quietly(path: Path) -> str:
    try:
        return path.read_text().strip() or "holder unknown"
    except OSError:
        return "holder unknown"


# The process umask, read once at import (os.umask can only be read by setting it, which is not
# thread-safe once uploads run with max_concurrency threads). mkstemp creates 0600 files; an
# object in a shared store (file:///srv/models) gets the mode open() would give it instead.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
OBJECT_MODE = 0o666 & ~_UMASK


class _AtomicWriter:
    """Context manager: a temp file next to ``target``, renamed over it on success (linked, when
    ``exclusive``, so an existing target is never replaced), removed on any error. OSErrors of the
    file system become StorageError naming ``target``; other exceptions pass through unchanged."""

    def __init__(self, target: Path, store_url: str, *, exclusive: bool = False):
        self.target, self.store_url, self.exclusive = target, store_url, exclusive

    def _fail(self, e: OSError) -> StorageError:
        if disk_full(e):
            return StorageError(f"writing {self.target}: {NO_SPACE}",
                                free_space(self.target.parent))
        return StorageError(f"writing {self.target}: {e.strerror or e}",
                            f"check {self.store_url} is writable")

    def __enter__(self) -> _Output:
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = tempfile.mkstemp(
                prefix=f".{self.target.name}.", suffix=".tmp", dir=self.target.parent
            )
            os.fchmod(fd, OBJECT_MODE)  # other users of the store read it, as with a bucket
        except OSError as e:
            raise self._fail(e) from e
        self.file = _Output(os.fdopen(fd, "wb"), self._fail)
        return self.file

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None:  # the block's own error is the one to report
                with contextlib.suppress(OSError):
                    self.file.close()
                return False
            try:
                self.file.close()  # close() flushes: a full disk may show only here
                self._commit()
            except OSError as e:
                raise self._fail(e) from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
        return False

    def _commit(self) -> None:
        if not self.exclusive:
            os.replace(self.tmp, self.target)
            return
        try:
            os.link(self.tmp, self.target)  # atomic, and fails if the target exists
        except FileExistsError as e:
            raise ConflictError(
                f"{self.target} was written by another upload meanwhile",
                "see which model it holds: invoke artifacts.list",
            ) from e


class _Output:
    """The temp file's write side: OSErrors of ``write`` become StorageError (a full disk)."""

    def __init__(self, file, fail):
        self._file, self._fail = file, fail

    def write(self, data: bytes) -> int:
        try:
            return self._file.write(data)
        except OSError as e:
            raise self._fail(e) from e

    def close(self) -> None:
        self._file.close()
