"""git: the work tree's revision and origin, files as they were at a ref, what changed since one.

Every call goes through :func:`paddlecd.proc.run` in its stdout-only mode: stdout is parsed, and
git's stderr (``fatal: …``) is kept apart for the error message.
"""

from __future__ import annotations

import functools
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from paddlecd import files, proc
from paddlecd.errors import ConfigError, PaddlecdError

TIMEOUT_S = 120  # a local git command that takes longer is stuck (a lock, a credential prompt)


class Revision(NamedTuple):
    """The revision of a work tree (a tuple, so ``short, full, committed = revision(root)`` reads).

    Attributes:
        short: the first 7 hex digits of HEAD, ``-dirty`` appended when tracked files differ;
            ``nogit`` outside a git checkout.
        full: the 40-hex commit id of HEAD; ``unknown`` outside a git checkout.
        committed: HEAD's commit time, ISO-8601 with offset (``%cI``); now (UTC) outside git.
    """

    short: str
    full: str
    committed: str

    @property
    def known(self) -> bool:
        """False outside a git checkout (or without git)."""
        return self.full != "unknown"


def output(root: Path, *args: str, what: str | None = None, hint: str | None = None,
           error: type[PaddlecdError] = ConfigError) -> str:
    """stdout of ``git -C root ARGS…`` (final newline removed).

    Raises:
        error: git is missing, ran past :data:`TIMEOUT_S`, or exited non-zero (the cause carries
            git's last stderr line; ``hint`` says what to do).
    """
    return proc.run(["git", "-C", str(root), *args], stdout_only=True, timeout=TIMEOUT_S,
                    what=what or f"git {args[0]}", hint=hint, error=error).stdout


@functools.lru_cache(maxsize=4)
def revision(root: Path) -> Revision:
    """The :class:`Revision` of ``root``'s HEAD. The lock file does not make the tree dirty (it is
    rewritten by ``lock`` itself, and the image built from the tree does not depend on it).
    Outside a checkout (or one git cannot read) the revision is ``nogit``/``unknown``.

    Raises:
        ConfigError: git is not on PATH while ``root`` is in a git checkout.
    """
    try:
        # hash and time in one git call (not rev-parse + show), and the dirty check beside it
        # rather than after it: each git call is 5-60 ms on the 2-core VM
        with ThreadPoolExecutor(max_workers=1) as pool:
            status = pool.submit(output, root, "status", "--porcelain", "--untracked-files=no",
                                 "--", ".", ":!images/lock.yaml")
            head = output(root, "show", "-s", "--format=%H %cI", "HEAD")
            dirty = status.result().strip()
        full, _, when = head.strip().partition(" ")
    except ConfigError:
        if shutil.which("git") is None and any((p / ".git").exists()
                                               for p in (root, *root.parents)):
            # a trial: git off PATH in a checkout built `cpu-nogit`, labelled "unknown", and
            # uploads recorded no revision, all without a word
            raise ConfigError(f"git is not on PATH, and {root} is a git checkout: its revision "
                              "cannot be read (images and models would be recorded as built "
                              "outside any checkout)",
                              "install git (apt-get install git) or put it on PATH") from None
        return Revision("nogit", "unknown", files.now_iso())
    return Revision(full[:7] + ("-dirty" if dirty else ""), full, when)


@functools.lru_cache(maxsize=4)
def origin_url(root: Path) -> str | None:
    """Where others fetch this work tree from: the URL of remote ``origin`` with any credentials
    (``https://user:token@host/…``) removed, an scp-like ``git@host:owner/repo`` as
    ``https://host/owner/repo``; None when there is no such remote, or it is a local path or a
    ``file://`` URL (a folder on this machine is no source anyone else can read: the OCI
    ``org.opencontainers.image.source`` label wants a URL, image-spec annotations.md)."""
    try:
        url = output(root, "remote", "get-url", "origin").strip()
    except ConfigError:
        return None
    return network_url(url)


def network_url(url: str) -> str | None:
    """``url`` (a git remote) as a network URL without credentials, or None (see
    :func:`origin_url`)."""
    if "://" in url:
        scheme, _, rest = url.partition("://")
        host, slash, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1]
        return None if scheme == "file" or not host else f"{scheme}://{host}{slash}{path}"
    scp = re.match(r"^(?:[^@/:]+@)?([^/:]+):(?!/)(.+)$", url)  # git@host:owner/repo.git
    return f"https://{scp[1]}/{scp[2]}" if scp else None


def show(root: Path, ref: str, path: str) -> str | None:
    """The text of ``path`` (relative to the repository root) at ``ref``; None if absent there."""
    try:
        return output(root, "show", f"{ref}:{path}")
    except ConfigError:
        return None
