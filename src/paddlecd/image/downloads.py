"""Byte progress of the base bootstrap's downloads, read from the tools' own output.

Two readers, each an ``Echo`` that takes the tool's output line by line, passes what a person
reads on to ``on_line`` and turns the progress lines into ``Transfer`` events:

* :class:`DebootstrapOutput`: ``debootstrap --debian-installer`` with its fd 3 merged into
  stdout. Only that protocol carries the bytes: ``P: <done> <total> DOWNDEBS`` where the total is
  the sum of the ``Size:`` fields of the Packages index over the packages debootstrap resolved
  (debootstrap 1.0.128, ``functions``: ``download_release``, ``progress``, ``wgetprogress``).
* :class:`PipOutput`: pip's ``--progress-bar raw`` (pip ≥ 24.1), ``Progress <done> of <total>``
  per file, inside BuildKit's plain output (``#5 3.21 Progress …``).
"""

from __future__ import annotations

import re

from paddlecd.types import Echo, Transfer

PACKAGES = "packages"  # the Transfer name of debootstrap's .deb retrievals
WHEELS = "wheels"  # the Transfer name of pip's downloads

# debootstrap's debian-installer protocol (functions: info, warning, error, progress): a message
# is "I: NAME", zero or more "IA: arg", then "IF: printf format" (W and E alike); progress is
# "P: now end [NAME]", then "PA:"/"PF:" lines that only name the phase.
_PROTOCOL = re.compile(r"^(P|PA|PF|I|IA|IF|W|WA|WF|E|EA|EF): ?(.*)$")
_FORMAT = re.compile(r"%%|%s|\\n")
_PIP = re.compile(r"^(?:#\d+ (?P<at>[\d.]+) )?Progress (?P<done>\d+) of (?P<total>\d+)\s*$")


class DebootstrapOutput:
    """``on_line`` gets every line a person would read (``I: Retrieving adduser 3.134``, the
    lines debootstrap's normal mode prints, and the full log it writes on stdout);
    ``on_transfer`` gets ``(PACKAGES, bytes retrieved, bytes to retrieve)``.

    Attributes:
        last_message: the last ``E:``/``W:``/``I:`` line, for the error when debootstrap fails.
    """

    def __init__(self, on_line: Echo | None = None, on_transfer: Transfer | None = None):
        self.on_line, self.on_transfer = on_line, on_transfer
        self.last_message = ""
        self._args: list[str] = []
        self._phase = ""
        self._done = 0

    def __call__(self, line: str) -> None:
        m = _PROTOCOL.match(line)
        if not m:
            self._say(line)
            return
        kind, rest = m.groups()
        if kind in ("I", "W", "E"):
            self._args = []
        elif kind in ("IA", "WA", "EA"):
            self._args.append(rest)
        elif kind in ("IF", "WF", "EF"):
            for text in _render(rest, self._args).split("\n"):
                self.last_message = f"{kind[0]}: {text}".rstrip()
                self._say(self.last_message)
        elif kind == "P":
            self._progress(rest.split())

    def _progress(self, fields: list[str]) -> None:
        if len(fields) > 2 and fields[2] != self._phase:
            self._phase, self._done = fields[2], 0
        if self._phase != "DOWNDEBS" or len(fields) < 2 or not self.on_transfer:
            return
        # The per-file lines (no NAME) interpolate from the phase's start, not from the bytes
        # already retrieved (download_debs runs in a pipeline's subshell, so PROGRESS_NOW stays
        # 0), and the closing line repeats 0: each is exact at a file's end and never more than
        # what is done, so their running maximum is the bytes retrieved.
        now, end = int(fields[0]), int(fields[1])
        self._done = max(self._done, min(now, end))
        self.on_transfer(PACKAGES, self._done, end, None)

    def _say(self, text: str) -> None:
        if self.on_line:
            self.on_line(text)


def _render(fmt: str, args: list[str]) -> str:
    """A debootstrap message: its printf format (only ``%s``, ``%%`` and ``\\n`` occur) with
    ``args``."""
    queue = iter(args)
    return _FORMAT.sub(lambda m: {"%%": "%", "\\n": "\n"}.get(m[0]) or next(queue, ""), fmt)


class PipOutput:
    """``on_line`` gets every line but pip's raw progress lines; ``on_transfer`` gets
    ``(WHEELS, bytes downloaded, bytes of the files begun, at)``: pip announces each file when it
    gets to it, so the total grows file by file (None while a file's size is unknown); ``at`` is
    the BuildKit step's clock (``#5 42.84 Progress …``) when the line has it. Files under 512 kB
    and files from pip's cache print no progress (pip ``network/download.py``)."""

    def __init__(self, on_line: Echo | None = None, on_transfer: Transfer | None = None):
        self.on_line, self.on_transfer = on_line, on_transfer
        self._finished = 0  # bytes of the files done before the current one
        self._current = (0, 0)  # (done, total) of the file being downloaded

    def __call__(self, line: str) -> None:
        m = _PIP.match(line)
        if not m:
            if self.on_line:
                self.on_line(line)
            return
        done, total = int(m["done"]), int(m["total"])
        if done == 0:  # pip's first line of a file: the one before it is complete
            self._finished += max(self._current)
        self._current = (done, total)
        if self.on_transfer:
            self.on_transfer(WHEELS, self._finished + done,
                             self._finished + total if total else None,
                             float(m["at"]) if m["at"] else None)
