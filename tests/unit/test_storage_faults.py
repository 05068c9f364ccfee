"""File store faults without a real device: a write or a flush that fails with ENOSPC is
a StorageError (exit 8) naming the path, and leaves no temporary file. The real full tmpfs is in
tests/integration/test_storage_file.py."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from paddlecd.artifacts.storage import FileStore
from paddlecd.artifacts.storage import file as file_store
from paddlecd.errors import StorageError


class _FullDisk:
    """A file object whose write (or only its final flush) fails as a full disk does."""

    def __init__(self, real, *, on: str):
        self.real, self.on = real, on

    def write(self, data):
        if self.on == "write":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real.write(data)

    def close(self):
        self.real.close()
        if self.on == "close":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("on", ["write", "close"])
def test_full_disk_is_exit_8_with_the_path_and_no_temp_file(tmp_path, monkeypatch, on):
    real_fdopen = os.fdopen
    monkeypatch.setattr(file_store.os, "fdopen",
                        lambda fd, mode: _FullDisk(real_fdopen(fd, mode), on=on))
    store = FileStore(tmp_path / "store")
    with pytest.raises(StorageError) as e:
        store.put_bytes(b"{}", "m/1.0.0/manifest.json")
    assert e.value.exit_code == 8
    path = tmp_path / "store" / "m" / "1.0.0" / "manifest.json"
    assert e.value.cause == f"writing {path}: no space left on the device"
    assert e.value.hint == f"free space there (df -h {tmp_path}/store/m/1.0.0), then re-run"
    assert list((tmp_path / "store" / "m" / "1.0.0").iterdir()) == []


def test_an_error_of_the_caller_passes_through_and_removes_the_temp_file(tmp_path):
    store = FileStore(tmp_path / "store")
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 10)

    def stop(_n):
        raise ConnectionAbortedError("injected")

    with pytest.raises(ConnectionAbortedError):
        store.put_file(src, "m/1.0.0/a.bin", progress=stop)
    assert list((tmp_path / "store" / "m" / "1.0.0").iterdir()) == []


def test_a_held_claim_refuses_a_second_and_is_released(tmp_path):
    store = FileStore(tmp_path / "store")
    with store.claim("m/1.0.0/"):
        with pytest.raises(file_store.ConflictError, match=r"m/1\.0\.0/ is being uploaded by"):
            with store.claim("m/1.0.0/"):
                pass
        with store.claim("m/1.1.0/"):  # another version: independent
            pass
    with store.claim("m/1.0.0/"):  # released on exit
        pass
    assert list((tmp_path / "store" / file_store.CLAIMS / "m").iterdir()) == []


def test_listing_while_another_upload_renames_its_temp_files(tmp_path, monkeypatch):
    """A temp file renamed into place between the listing and its stat (a concurrent upload) is
    left out instead of failing the listing with FileNotFoundError (exit 1)."""
    store = FileStore(tmp_path / "store")
    store.put_bytes(b"kept", "m/1.0.0/kept")
    store.put_bytes(b"tmp", "m/1.0.0/.gone.x.tmp")
    real_is_file = Path.is_file

    def is_file_then_renamed(self):
        found = real_is_file(self)
        if found and self.name == ".gone.x.tmp":
            self.unlink()  # what the other upload's os.replace does to the temp name
        return found

    monkeypatch.setattr(Path, "is_file", is_file_then_renamed)
    assert [o.key for o in store.list("m/")] == ["m/1.0.0/kept"]


def test_a_claims_folder_linked_out_of_the_store_is_refused(tmp_path):
    """Trial 13: a file store whose ``.claims`` linked to a folder outside it had the upload's
    claim made there (rc 0); a model folder that links out is refused already."""
    from paddlecd.errors import ConfigError

    (tmp_path / "store").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "store" / file_store.CLAIMS).symlink_to(tmp_path / "outside")
    store = FileStore(tmp_path / "store")
    with pytest.raises(ConfigError, match="outside the store"):
        with store.claim("m/1.0.0/"):
            pass
    assert list((tmp_path / "outside").iterdir()) == []
