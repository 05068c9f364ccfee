"""A copy of the checkout for tests that run the project as a user does, from its own folder.

README command 1 (scripts/demo.sh) writes its state under ``.paddlecd/`` of the folder it runs in;
a test runs it in a copy so the suite never writes into the checkout (support/guard.py). The copy
holds the work tree as it is now (committed or not, untracked files too, what git ignores left
out), committed once so that git reads a clean tree, and shares the checkout's ``.venv``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support.project import ROOT


def copy_checkout(dest: Path) -> Path:
    """Copy the work tree of :data:`ROOT` to ``dest`` (created) and return ``dest``.

    Raises:
        subprocess.CalledProcessError: git failed (listing files, or the copy's commit).
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():  # deleted in the work tree, not yet in git
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    git = ["git", "-c", "user.name=paddlecd-tests", "-c", "user.email=tests@paddlecd.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the checkout under test"], cwd=dest, check=True)
    return dest
