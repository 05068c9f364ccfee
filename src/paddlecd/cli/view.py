"""What a person reads while a task runs: one line per stage, live on a terminal, plain in CI.

A task wraps its package call in :func:`stage` and hands the stage's callbacks to the package
(``on_line`` = :meth:`Stage.line`, ``on_progress`` = :meth:`Stage.progress`). The mode is chosen
once per process (:func:`mode`):

* ``live``: stderr is a terminal and neither ``CI`` nor verbose is set. A rich live view: the
  stage with a spinner and its elapsed time, a byte bar for pushes, uploads and the downloads a
  tool reports (:meth:`Stage.transfer`: the base bootstrap's packages and wheels), the running
  tool's last lines under it; when the stage ends, all of that collapses into one result line.
* ``plain``: not a terminal, or ``CI=true``: one line per event, tool output as it comes, no
  control codes; on GitHub Actions (``GITHUB_ACTIONS=true``) a stage's tool output sits inside
  ``::group::``/``::endgroup::`` so the log folds ("Workflow commands for GitHub Actions ›
  Grouping log lines", GitHub docs).
* ``verbose`` (``--verbose`` on any task of the command line, or ``PADDLECD_VERBOSE=1``): tool
  output streamed as it comes, on a terminal too.

In every mode the stage's tool output goes in full to ``<state>/logs/<stage>-<variant>-<time>.log``;
when the stage fails, that path and its last :data:`TAIL_ON_FAILURE` lines are printed before the
error. When a process ran more than one stage (``invoke build push verify``), a summary table
(stage, result, key figure, time) ends its output.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rich import filesize
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TransferSpeedColumn
from rich.spinner import Spinner
from rich.text import Text

from paddlecd import config, files
from paddlecd.cli import common

TAIL_LIVE = 4  # tool lines shown under a running stage
TAIL_ON_FAILURE = 20  # lines of the log printed when a stage fails
THROTTLE = 5.0  # seconds between byte-progress lines of one layer in plain mode
ICON = {"ok": "✔", "failed": "✘", "interrupted": "■"}

# a docker push/pull progress message (engine.decode_stream): "<id> <status> [==>  ] 1.2MB/3.4MB"
_LAYER = re.compile(r"^(?P<id>\S+) (?P<status>[^\[]*?)(?:\s+\[[=> ]*\]\s+"
                    r"(?P<cur>[\d.]+\s*[kKMGT]?B)/(?P<tot>[\d.]+\s*[kKMGT]?B))?\s*$")
_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def mode(environ: dict[str, str] | None = None, argv: list[str] | None = None,
         terminal: bool | None = None, *, verbose: bool = False) -> str:
    """``live``, ``plain`` or ``verbose`` for this process (see the module docstring).

    ``verbose``: the task's own flag (``-e`` binds only to it); ``--verbose`` anywhere on the
    command line counts too. ``terminal`` defaults to whether stderr is one (rich's test, so
    ``TERM=dumb`` is not)."""
    env = os.environ if environ is None else environ
    args = sys.argv if argv is None else argv
    if verbose or "--verbose" in args or config.switch_requested("verbose", env):
        return "verbose"
    tty = (common.err.is_terminal and not common.err.is_dumb_terminal) if terminal is None \
        else terminal
    ci = env.get("CI", "").strip().lower() in ("1", "true", "yes")
    return "live" if tty and not ci else "plain"


def layer_bytes(msg: str) -> tuple[str, str, int | None, int | None] | None:
    """``(layer id, status, bytes done, bytes total)`` of one push/pull progress message (the
    sizes are docker's decimal units, go-units ``HumanSize``), or None when it is not one."""
    m = _LAYER.match(msg)
    if not m:
        return None
    cur, tot = (_size(m[k]) if m[k] else None for k in ("cur", "tot"))
    return m["id"], m["status"].strip(), cur, tot


def _size(text: str) -> int:
    number, unit = re.match(r"([\d.]+)\s*(\S+)", text).groups()
    return int(float(number) * _UNITS.get(unit, 1))


@dataclass
class Row:
    """One finished stage, for the summary table."""

    name: str
    variant: str
    result: str
    figure: str
    seconds: float


@dataclass
class _Process:
    """What this process has shown: finished stages, the running live view, the summary."""

    rows: list[Row] = field(default_factory=list)
    live: Live | None = None
    hooked: bool = False
    printed: bool = False


_proc = _Process()


class LogFile:
    """A stage's (or a pipeline unit's) full log, opened by its first line: bad input leaves no
    file. A log that cannot be written (a full disk, a read-only state folder) is said once, and
    the work goes on without it: it never becomes the command's error (a trial: an upload to a
    read-only store said "No such file or directory: <state>/logs/upload-….log", "check the path",
    for the log it could not make, hiding the store's own error).

    Attributes:
        path: where the log goes. lost: it could not be written.
    """

    def __init__(self, path: Path):
        self.path, self.lost = path, False
        self._fh: IO[str] | None = None

    @property
    def opened(self) -> bool:
        """Whether any line came (written or not)."""
        return self._fh is not None or self.lost

    def write(self, text: str) -> None:
        """Append one line (``text`` without its newline)."""
        if self.lost:
            return
        try:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - see close()
            self._fh.write(text + "\n")
            self._fh.flush()
        except OSError as e:
            self._lose(e)

    def tail(self, n: int) -> list[str]:
        """The last ``n`` lines that are not blank ([] for a lost log)."""
        self.close()
        if self.lost or not self.path.is_file():
            return []
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        return [x for x in lines if x.strip()][-n:]

    def close(self) -> None:
        """Close the file (writing its last buffered lines may still fail: said as lost)."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.close()
            except OSError as e:
                self._lose(e)

    def _lose(self, e: OSError) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None
        if not self.lost:
            self.lost = True
            cause, hint = files.os_error_text(e)  # a trial: "free space" for a read-only one
            if files.disk_full(e):
                hint = f"free space there (df -h {self.path.parent})"
            common.warn(f"the stage log {self.path} cannot be written: {cause}",
                        f"{hint}; the stage goes on without its log")


class Stage:
    """One running stage: callbacks for the package, and its result for the summary.

    Attributes:
        log: the stage's full log file. figure: the key figure shown when it ends.
    """

    def __init__(self, name: str, variant: str, log: Path, how: str, *, gha: bool = False):
        self.name, self.variant, self.log, self.how, self.gha = name, variant, log, how, gha
        self.figure = ""
        self.started = time.monotonic()
        self.tail: deque[str] = deque(maxlen=TAIL_LIVE)
        self._log = LogFile(log)
        self._layers: dict[str, tuple[str, int, int]] = {}
        self._shown: dict[str, tuple[str, float]] = {}  # layer -> (status, when printed)
        self._told: dict[str, tuple[int, float]] = {}  # Transfer -> (bytes, when printed)
        self._bar: Progress | None = None  # one row per byte count: layers, bytes, a Transfer
        self._rows: dict[str, TaskID] = {}
        self._at: float | None = None  # when the event being drawn happened (a tool's clock)
        self._offsets: dict[str, float] = {}  # a Transfer's tool clock -> the console's
        self.moved: dict[str, int] = {}  # bytes of each Transfer so far, for the result line
        self._spinner = Spinner("dots")
        self.failed = False

    @property
    def title(self) -> str:
        """``build cpu``: what the stage's lines start with."""
        return f"{self.name} {self.variant}".strip()

    def line(self, text: str) -> None:
        """A line of tool output (an ``Echo``): to the log; under the spinner, or printed."""
        text = text.rstrip("\n")
        self._write(text)
        if self.how == "live":
            if text.strip():
                self.tail.append(text)
        else:
            common.say(text)

    def detail(self, text: str) -> None:
        """A line for ``--verbose`` only (a phase's timing): in the log, printed when verbose."""
        self._write(text)
        if self.how == "verbose":
            common.say(text)

    def note(self, text: str) -> None:
        """A line for the person in every mode (a plan step, a lifecycle event); logged too."""
        self._write(text)
        (_live_print if self.how == "live" else common.say)(f"  {text}")

    def progress(self, msg: str) -> None:
        """A push/pull progress message (an ``Echo``): the byte bar on a terminal; elsewhere a
        layer's status changes and its byte count at most every :data:`THROTTLE` seconds."""
        self._write(msg)
        parsed = layer_bytes(msg)
        if parsed:
            layer, status, cur, tot = parsed
            _, done, total = self._layers.get(layer, ("", 0, 0))
            if tot:
                done, total = cur or 0, tot
            if status in ("Pushed", "Pull complete", "Download complete") and total:
                done = total
            self._layers[layer] = (status, done, total)
        if self.how == "live":
            self._update_bar()
        elif self._changed(msg, parsed):
            common.say(f"  {msg}")

    def _write(self, text: str) -> None:
        if not self._log.opened and self.how != "live":  # the stage's first output: its header
            common.say(f"::group::{self.title}" if self.gha else f"▸ {self.title}")
        self._log.write(text)

    @property
    def said_anything(self) -> bool:
        """Whether any tool output came (else a failure is only its error line: bad input)."""
        return self._log.opened

    def close(self) -> None:
        """Close the log file (``stage`` does). A trial: a finished upload failed at the log's
        close with "no space left", its hint pointing at the working folder: a log that cannot
        be written is said once (:class:`LogFile`) and the stage goes on."""
        self._log.close()

    def _changed(self, msg: str, parsed) -> bool:
        layer, status = (parsed[0], parsed[1]) if parsed else (msg, msg)
        last, at = self._shown.get(layer, ("", 0.0))
        now = time.monotonic()
        if last != status or now - at >= THROTTLE:
            self._shown[layer] = (status, now)
            return True
        return False

    def _update_bar(self) -> None:
        total = sum(t for _, _, t in self._layers.values())
        if total:
            row, done = self._row("layers", total), sum(d for _, d, _ in self._layers.values())
            self._bar.update(row, total=total, completed=done)

    def _row(self, name: str, total: int | None) -> TaskID:
        """The byte bar's row ``name`` (the bar and the row are made when first needed)."""
        if self._bar is None:
            self._bar = Progress("  {task.description}", BarColumn(bar_width=30), DownloadColumn(),
                                 TransferSpeedColumn(), console=common.err, auto_refresh=False,
                                 get_time=self._time)
        if name not in self._rows:
            self._rows[name] = self._bar.add_task(name, total=total)
        return self._rows[name]

    def _time(self) -> float:
        """The byte bar's clock: the console's, or the time of the event being drawn."""
        return common.err.get_time() if self._at is None else self._at

    def bytes_total(self, total: int | None) -> None:
        """Start a byte bar of ``total`` bytes (uploads, downloads)."""
        if self.how == "live":
            self._row("bytes", total)

    def advance(self, n: int) -> None:
        """``n`` more bytes moved (``paddlecd.artifacts.storage.Progress``)."""
        if "bytes" in self._rows:
            self._bar.advance(self._rows["bytes"], n)

    def transfer(self, name: str, done: int, total: int | None, at: float | None = None) -> None:
        """Where download ``name`` stands (a ``Transfer``): its row of the byte bar on a
        terminal, its rate timed by ``at`` when given; elsewhere, and in the log, a line when it
        starts, when it completes and at most every :data:`THROTTLE` seconds between."""
        self.moved[name] = done
        if self.how == "live":
            row = self._row(name, total)
            if at is not None:
                self._at = self._offsets.setdefault(name, common.err.get_time() - at) + at
            try:
                self._bar.update(row, total=total, completed=done)
            finally:
                self._at = None
        last, when = self._told.get(name, (None, 0.0))
        now = time.monotonic()
        if last is None or (done == total and last != done) or now - when >= THROTTLE:
            self._told[name] = (done, now)
            of = f" of {human_bytes(total)}" if total else ""
            text = f"{name}: {human_bytes(done)}{of}"
            self._write(text)
            if self.how != "live":
                common.say(f"  {text}")

    @property
    def bytes_pushed(self) -> int:
        """Bytes of the layers this push uploaded (``Pushed``; not those that existed)."""
        return sum(t for s, _, t in self._layers.values() if s == "Pushed")

    def done(self, figure: str, *, failed: bool = False) -> None:
        """The key figure of the stage (a digest, a tally, bytes moved) for its result line;
        ``failed``: the stage ends as failed without an exception (verify records its evidence
        first, then raises)."""
        self.figure, self.failed = figure, failed

    def __rich__(self) -> Group:
        elapsed = time.monotonic() - self.started
        self._spinner.update(text=Text.assemble((self.title, "bold"), f"  {elapsed:.0f}s"))
        parts = [self._spinner]
        if self._bar is not None:
            parts.append(self._bar.get_renderable())
        parts += [Text(f"  {t}", style="dim", no_wrap=True, overflow="ellipsis") for t in self.tail]
        return Group(*parts)


def _live_print(text: str) -> None:
    common.err.print(text, soft_wrap=True, markup=False, highlight=False)


@contextmanager
def stage(name: str, variant: str | None, *, state: Path, verbose: bool = False
          ) -> Iterator[Stage]:
    """Run one stage under the view: yields its :class:`Stage`; its log goes under
    ``state/logs``; ``verbose`` is the task's ``--verbose``. A failure (any exception) prints the
    log's path and last lines, then propagates; the catch site prints the error."""
    how = mode(verbose=verbose)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{name}-{variant or 'all'}")
    log = state / "logs" / f"{safe}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    st = Stage(name, variant or "", log, how,
               gha=how == "plain" and os.environ.get("GITHUB_ACTIONS") == "true")
    if how == "live":
        _proc.live = Live(st, console=common.err, transient=True, refresh_per_second=8,
                          redirect_stdout=False, redirect_stderr=False)
        _proc.live.start()
    _register()
    try:
        yield st
    except BaseException as e:
        _end(st, "interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise
    else:
        _end(st, "failed" if st.failed else "ok")
    finally:
        st.close()


def _end(st: Stage, result: str) -> None:
    seconds = time.monotonic() - st.started
    if _proc.live is not None:
        _proc.live.stop()
        _proc.live = None
    if result != "ok" and not st.said_anything:  # refused before any tool ran: the error says it
        return
    if st.gha and st.said_anything:
        common.say("::endgroup::")
    figure = st.figure or result
    common.say(f"{ICON[result]} {st.title:<14} {seconds:6.1f}s  {figure}".rstrip())
    _proc.rows.append(Row(st.name, st.variant, result, st.figure, seconds))
    if result != "ok":
        _failure(st)


def _failure(st: Stage) -> None:
    last = st._log.tail(TAIL_ON_FAILURE)
    if not last:  # a lost log was said when it was lost; the error follows
        return
    common.say(f"  last {len(last)} lines of {st.log}:")
    for x in last:
        common.say(f"  │ {x}")


def summary() -> list[str]:
    """The table of the stages this process ran, as aligned text lines (none with fewer than
    two stages: the one result line says it all). Plain text: a CI log and a terminal of any
    width show it alike."""
    if len(_proc.rows) < 2:
        return []
    cells = [("stage", "variant", "result", "key figure", "time")]
    cells += [(r.name, r.variant, f"{ICON[r.result]} {r.result}", r.figure, f"{r.seconds:.1f}s")
              for r in _proc.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(4)]
    return [("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4].rjust(6))
            for row in cells]


def finish() -> None:
    """Print the summary table once (the catch site calls it before an error; atexit after a
    run that succeeded)."""
    if _proc.printed:
        return
    _proc.printed = True
    for line in summary():
        common.say(line)


def _register() -> None:
    if not _proc.hooked:
        _proc.hooked = True
        atexit.register(finish)
        common.BEFORE_ERROR.append(finish)


def human_bytes(n: int) -> str:
    """``123.4 MB`` (decimal units, as docker prints them)."""
    return filesize.decimal(n)


class UnitLogs:
    """Tool output of a pipeline run's stage × variant units, for ``pipeline.run``: each unit's
    lines go in full to ``<state>/logs/<stage>-<variant>-<time>.log``; printed as they come
    (``  cpu| …``) except on a live terminal, where each running unit is a :class:`Stage` row of
    the live view (spinner, elapsed time, its tool's last lines) that gives way to the runner's
    result line when the unit ends, and a failed unit shows its log's path and last
    :data:`TAIL_ON_FAILURE` lines.

    Units of one stage may run in parallel threads; each has its own file (one writer each), and
    the live view is changed under one lock.
    """

    def __init__(self, state: Path):
        self.state, self.how = state, mode()
        self._files: dict[tuple[str, str], LogFile] = {}
        self._running: dict[str, Stage] = {}  # variant -> its row while the unit runs
        self._live: Live | None = None
        self._lock = threading.RLock()

    def started(self, stage: str, variants: Iterable[str]) -> None:
        """A stage starts its units (live terminal: one spinner row each)."""
        if self.how != "live":
            return
        with self._lock:
            self._running = {v: Stage(stage, v, Path(os.devnull), "live") for v in variants}
            self._show()

    def ended(self, variant: str) -> None:
        """A unit ended: its row leaves the live view (its result line is printed instead)."""
        with self._lock:
            self._running.pop(variant, None)

    def ended_all(self) -> None:
        """The stage (or the run) ended: no unit row is left."""
        with self._lock:
            self._running = {}

    @contextmanager
    def printing(self) -> Iterator[None]:
        """Print lines (the runner's result lines) with the live view out of the way, then show
        the units still running again."""
        with self._lock:
            self._hide()
            try:
                yield
            finally:
                self._show()

    def _show(self) -> None:
        if self._running and self._live is None:
            rows = _Rows(self._running)
            self._live = Live(rows, console=common.err, transient=True, refresh_per_second=8,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()

    def _hide(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def line(self, stage: str, variant: str, text: str) -> None:
        """One line of a unit's tool output (the runner's ``on_line``)."""
        key = (stage, variant)
        if key not in self._files:
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{stage}-{variant}")
            self._files[key] = LogFile(
                self.state / "logs" / f"{safe}-{time.strftime('%Y%m%dT%H%M%S')}.log")
        self._files[key].write(text)
        if self.how != "live":
            common.say(f"  {variant}| {text}")
        elif text.strip() and variant in self._running:
            self._running[variant].tail.append(text)

    def failed(self, stage: str, variant: str) -> None:
        """After a unit failed: its log's path and last lines (on a live terminal; elsewhere
        they were printed as they came)."""
        log = self._files.get((stage, variant))
        if log is None or log.lost:
            return
        if self.how == "live":
            lines = log.tail(TAIL_ON_FAILURE)
            common.say(f"  last {len(lines)} lines of {log.path}:")
            for x in lines:
                common.say(f"  │ {x}")
        else:
            common.say(f"  full log: {log.path}")

    def close(self) -> None:
        """Stop the live view; close every unit's log file."""
        with self._lock:
            self._running = {}
            self._hide()
        for log in self._files.values():
            log.close()


class _Rows:
    """The running units' :class:`Stage` rows, drawn as one group."""

    def __init__(self, running: dict[str, Stage]):
        self.running = running

    def __rich__(self) -> Group:
        return Group(*(st.__rich__() for st in list(self.running.values())))
