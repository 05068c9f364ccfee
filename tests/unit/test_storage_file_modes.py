"""Objects of the file:// store get the mode any other file would (0666 less the umask), not the
0600 of the temp file they are written through: a shared store (file:///srv/models) is read by
other users, as a bucket is (found in the trial: every object was 0600)."""

from __future__ import annotations

import os
import subprocess
import sys

from paddlecd.artifacts.storage import FileStore


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_objects_get_the_umask_mode_not_the_temp_files(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    store = FileStore(tmp_path / "store")
    (tmp_path / "params").write_bytes(b"\0" * 10)
    store.put_file(tmp_path / "params", "m/1.0.0/model.pdiparams")
    store.put_bytes(b"{}", "m/1.0.0/manifest.json", exclusive=True)
    for key in ("model.pdiparams", "manifest.json"):
        assert _mode(store.root / "m" / "1.0.0" / key) == 0o666 & ~umask, key


def test_a_restrictive_umask_is_kept(tmp_path):
    """The umask is read when the module is imported: a new process with umask 077 writes 0600."""
    code = (
        "import sys; from pathlib import Path; from paddlecd.artifacts.storage import FileStore;"
        "FileStore(Path(sys.argv[1])).put_bytes(b'x', 'm/1.0.0/manifest.json')"
    )
    subprocess.run(
        ["sh", "-c", 'umask 077 && exec "$0" -c "$1" "$2"', sys.executable, code, str(tmp_path)],
        check=True,
    )
    assert _mode(tmp_path / "m" / "1.0.0" / "manifest.json") == 0o600
