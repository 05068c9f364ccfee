"""What every task shares: the one catch site, the two output streams, progress callbacks and
flag helpers.

Streams: results go to stdout (:func:`result`: what a script would capture: a digest, a
list, a manifest); progress, plans and errors go to stderr (:func:`say`). Library code never prints;
it takes these as callbacks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import select
import sys
import threading
import time
import traceback
import unicodedata
from collections.abc import Callable
from typing import Any

import invoke
from invoke import Exit
from rich.console import Console
from rich.markup import escape

from paddlecd import config
from paddlecd.cli import argv
from paddlecd.errors import ConfigError, Interrupted, PaddlecdError
from paddlecd.files import os_error_text
from paddlecd.types import Echo

# emoji off: a ":name:" in a cause, a log line or an annotation is printed as it is
out = Console(highlight=False, emoji=False)  # results
err = Console(stderr=True, highlight=False, emoji=False)  # progress, plans, errors

VARIANT_HELP = ("image variant from images/variants.yaml (default: cpu). Given once on a command "
                "line it applies to every task there, so "
                "`invoke build push verify --variant cu126` works")
JSON_HELP = "print the result as one JSON document on stdout instead of text"
VERBOSE_HELP = ("stream every tool's output instead of the live view (also PADDLECD_VERBOSE=1); "
                "the full output is always in .paddlecd/logs/")
LOG_FORMAT_HELP = ("text (default) or json: one JSON object per line, one event per "
                   "stage/variant/check (also PADDLECD_LOG_FORMAT=json)")


class Task(invoke.Task):
    """Invoke's task, whose automatic short flags leave out Invoke's own ``-h`` (--help) and
    ``-V`` (--version): ``release.compare``'s help offered ``-h STRING, --history=STRING``, and
    ``-h cpu`` printed the help, exit 0, drawing nothing (a trial)."""

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        return super().arg_opts(name, default, set(taken_names) | {"h", "V"})


def task(*args: Any, **kwargs: Any) -> Any:
    """``invoke.task`` making a :class:`Task` (every paddlecd task is declared with this)."""
    return invoke.task(*args, klass=Task, **kwargs)


BEFORE_ERROR: list[Callable[[], None]] = []  # run by the catch site before it prints an error


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The one catch site: a paddlecd error (or an unusable path) becomes ``error: <cause>`` and
    ``hint: <hint>`` on stderr and ``Exit`` with the error's stable code. With ``PADDLECD_DEBUG=1``
    the traceback is printed first; the exit code stays the same."""

    @functools.wraps(fn)
    def wrapper(c, *args, **kwargs):
        try:
            _refuse_empty(kwargs)
            return fn(c, *args, **kwargs)
        except BrokenPipeError as e:
            if not _stdout_gone():
                _fail(e, *os_error_text(e), 2)
            # the reader of stdout left (`invoke release.show 1.0 | head -1`): no error line, as
            # a shell tool killed by SIGPIPE prints none; 128 + SIGPIPE (a trial: "error: Broken
            # pipe", hint "check the path", exit 2)
            raise Exit(code=141) from None
        except OSError as e:  # a path the user gave cannot be read or written: one line, exit 2
            _fail(e, *os_error_text(e), 2)
        except Interrupted as e:  # a stage runner's Ctrl-C, recorded (pipeline.run)
            _interrupted(e, e.cause, e.hint)
        except PaddlecdError as e:
            _fail(e, e.cause, e.hint, e.exit_code)
        except KeyboardInterrupt as e:  # Ctrl-C in a task that records nothing: 128 + SIGINT
            _interrupted(e, "interrupted", "re-run the same command: it removes or completes "
                         "what this run left")

    return wrapper


def _stdout_gone() -> bool:
    """Whether stdout's reader has gone (its pipe is broken); if so stdout is pointed at
    /dev/null, so that Python's flush at exit does not fail on it once more (the Python docs'
    recipe, "Note on SIGPIPE" in the signal module)."""
    try:
        sys.stdout.flush()
        fd = sys.stdout.fileno()
        # nothing buffered: a pipe whose reader closed polls as POLLERR on its write end
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        if not any(ev & select.POLLERR for _, ev in poll.poll(0)):
            return False
    except BrokenPipeError:
        pass
    except (OSError, ValueError):  # no stdout to ask
        return False
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return True


def quiet_broken_pipe() -> None:
    """Make a broken stdout outside any task (Invoke's own ``--help`` or ``--list`` piped into
    ``head``) end the process with 141 and no traceback, as :func:`guarded` does inside one
    (``sys.excepthook``; the process keeps ignoring SIGPIPE, so a closed socket stays an error
    a task can name). Called once by ``tasks.py``."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if issubclass(kind, BrokenPipeError) and _stdout_gone():
            os._exit(141)
        previous(kind, value, tb)

    sys.excepthook = hook


def _interrupted(e: BaseException, cause: str, hint: str | None) -> None:
    """A Ctrl-C printed as every error, exit 130, then the process ended if threads hang."""
    try:
        _fail(e, cause, hint, Interrupted.exit_code)
    finally:
        _end_if_threads_hang(Interrupted.exit_code)


def _end_if_threads_hang(code: int, grace: float = 2.0) -> None:
    """End the process now with ``code`` when worker threads outlive a Ctrl-C by ``grace``
    seconds: Python joins every ThreadPoolExecutor thread at exit, and one blocked in a network
    read (a held S3 part, a registry blob) would keep an interrupted command running until its
    read timed out (a trial: 239 s). What the threads were writing is left as a kill -9 leaves
    it, which the same command, re-run, completes."""
    deadline = time.monotonic() + grace
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon and t.is_alive():
            # a thread the interrupted pool was starting is listed before it runs, and join()
            # raises on it (a trial: "cannot join thread before it is started" after the one
            # line, 1 Ctrl-C in 9)
            with contextlib.suppress(RuntimeError):
                t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon and t is not threading.main_thread()
           for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


_FREE_TEXT = frozenset({"reason", "accept_regression"})  # recorded as written
# A free text is one line a person writes: the ledger record keeps it and release.show and
# release.list print it (a trial: a 130 KB --accept-regression with a newline was recorded, and
# release.show printed 133 KB, its comparison line broken in two).
FREE_TEXT_MAX = 500


def _refuse_empty(flags: dict[str, Any]) -> None:
    """An empty flag is never its default: ``verify --image ''`` must not verify the variant's
    candidate, nor ``evidence.keygen --out ''`` write keys into the project root.

    Raises:
        ConfigError: naming the first flag whose value is empty or only spaces, or has white
            space around it (but for the free texts ``--reason``, ``--accept-regression``).
    """
    for name, value in flags.items():
        flag = f"-{name}" if len(name) == 1 else f"--{name.replace('_', '-')}"  # Invoke's
        if isinstance(value, str) and not value.strip():
            raise ConfigError(
                f"{flag} is empty",
                # trial 19: "or leave the flag out for its default" to --out, which has none
                "give it a value (the task's --help says what leaving it out does)",
            )
        # a name, a path, a reference or a number never starts or ends with white space (a
        # trial: --image ' <ref>@sha256:…' was "has no digest"); the free texts may
        if isinstance(value, str) and value != value.strip() and name not in _FREE_TEXT:
            raise ConfigError(f"{flag} {capped(repr(value), 200)} has white space around it",
                              f"drop the spaces: {flag} {value.strip()[:200]!r}")
        if isinstance(value, str) and name in _FREE_TEXT:
            _check_free_text(flag, value)


def _check_free_text(flag: str, value: str) -> None:
    """One line of at most :data:`FREE_TEXT_MAX` characters, no control characters.

    Raises:
        ConfigError: naming ``flag`` and the character or the length.
    """
    control = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise ConfigError(f"{flag} holds the control character {control!r}",
                          "write it on one line, without tabs or escapes: it is recorded and "
                          "printed as one line")
    if len(value) > FREE_TEXT_MAX:
        raise ConfigError(f"{flag} is {len(value)} characters long (at most {FREE_TEXT_MAX})",
                          "shorten it: the ledger record keeps it, release.show prints it")


MESSAGE_CAP = 1000  # characters of a cause, or of one line of a hint; past it the middle is cut


def capped(text: str, cap: int = MESSAGE_CAP) -> str:
    """``text`` as the catch site prints it: whole up to ``cap`` characters, else its head and
    tail around ``… (N characters cut) …``, so a 100 kB flag value (``--version 111…1.0.0``) is
    named but never echoed whole."""
    if len(text) <= cap:
        return text
    head, tail = cap * 2 // 3, cap // 3
    return f"{text[:head]}… ({len(text) - head - tail} characters cut) …{text[-tail:]}"


def shown(text: str) -> str:
    """``text`` safe for a terminal: control and format characters (ESC, a bare CR, U+202E…) of
    an input a message quotes are written as escapes (``\x1b``), newlines kept. A trial:
    ``--variant $'c\x1b[2Jpu'`` cleared the screen of whoever read the error."""
    return "".join(c if c == "\n" or unicodedata.category(c) not in ("Cc", "Cf")
                   else c.encode("unicode_escape").decode("ascii") for c in text)


def _fail(e: BaseException, cause: str, hint: str | None, code: int) -> None:
    # a hint may carry a log's last lines (a failed rank's): each line is capped, not the whole
    cause = shown(capped(cause))
    hint = "\n".join(shown(capped(line)) for line in hint.split("\n")) if hint else hint
    for hook in BEFORE_ERROR:  # the view's summary table: the error and hint stay the last lines
        hook()
    if config.debug_requested():
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    err.print(f"[bold red]error:[/] {escape(cause)}", markup=True, soft_wrap=True)
    if hint:
        err.print(f"[yellow]hint:[/] {escape(hint)}", markup=True, soft_wrap=True)
    raise Exit(code=code) from None


def refuse_unparseable(line: list[str], collection: Any) -> None:
    """A command line Invoke cannot read (an unknown flag or task, a flag without its value:
    :func:`paddlecd.cli.argv.parse_problem`) printed as every other bad input, before Invoke
    prints its own words for it, and exited with ``ConfigError``'s code (2).

    Raises:
        invoke.Exit: when the line is refused.
    """
    problem = argv.parse_problem(line, collection) or argv.json_twice(line, collection)
    if problem:
        e = ConfigError(*problem)
        _fail(e, e.cause, e.hint, e.exit_code)


def say(msg: str) -> None:
    """A progress or plan line for the user, on stderr (blank lines of build output are dropped)."""
    if msg.strip():
        err.print(msg, soft_wrap=True, markup=False, highlight=False)


def warn(msg: str, hint: str | None = None) -> None:
    """A warning for the user, on stderr: ``warning: <msg>``, then ``hint: <hint>``."""
    err.print(f"[yellow]warning:[/] {escape(shown(msg))}", markup=True, soft_wrap=True)
    if hint:
        err.print(f"[yellow]hint:[/] {escape(shown(hint))}", markup=True, soft_wrap=True)


def result(msg: str) -> None:
    """A result line, on stdout: what a script running the task wants to capture. Not on a
    terminal it is written as it is: rich expands tabs to spaces, and the tab-separated listings
    for pipes (``artifacts.list``, ``release.list``) must stay tab-separated (a trial)."""
    if out.is_terminal:
        out.print(msg, soft_wrap=True, markup=False, highlight=False)
    else:
        out.file.write(msg + "\n")
        out.file.flush()


def json_result(value: Any) -> None:
    """``value`` as one JSON document on stdout (``--json``): a record with ``to_json``
    as that, another dataclass as its fields, lists and dicts of them likewise; keys sorted."""
    out.out(json.dumps(_plain(value), sort_keys=True, default=str), highlight=False)


def _plain(value: Any) -> Any:
    if hasattr(value, "to_json"):
        data = value.to_json()
        return json.loads(data) if isinstance(data, (str, bytes)) else data
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def settings(**flags: Any) -> config.Settings:
    """Resolve configuration with task flags on top (``None`` flags are ignored); print its
    warnings (ignored ``PADDLECD_*`` variables) once per process on stderr."""
    s = config.load(flags)
    if s.engine.kind != "auto" or "paddlecd.engine" in sys.modules:  # docker-py only if needed
        from paddlecd import engine

        engine.select(s.engine.kind)
    for w in sorted(set(s.warnings) - _warned):
        err.print(f"[yellow]warning:[/] {escape(w)}", markup=True, soft_wrap=True)
    _warned.update(s.warnings)
    return s


_warned: set[str] = set()


def variant(value: str | None, *, required_by: str | None = None) -> str:
    """The variant for this task: its own flag, else a ``--variant`` given to another task on the
    same command line (:func:`argv.shared_variant`), else ``cpu``, except for release operations
    (``required_by``), which never default: promoting or rolling back the wrong one is costly.

    Raises:
        ConfigError: ``required_by`` is set and no variant was given.
    """
    chosen = value or argv.shared_variant(sys.argv, _collection())
    if chosen:
        return chosen
    if required_by:
        raise ConfigError(f"{required_by} needs --variant",
                          f"e.g. invoke {required_by} --variant cpu …")
    return "cpu"


def variants_given(value: list[str] | str | None) -> list[str]:
    """The variants a task that defaults to "all" or "the pipeline's choice" runs for: its own
    ``--variant`` flags, else a ``--variant`` given to another task on the same command line
    (README: given once, it applies to every task there; a trial: ``invoke lock --dry-run
    release.list --variant cpu`` locked every variant), else none (the task's default)."""
    if value:
        given = [value] if isinstance(value, str) else list(value)
        twice = next((v for i, v in enumerate(given) if v in given[:i]), None)
        if twice is not None:  # a trial: a run of "cpu, cpu" wrote a summary its resume refused
            raise ConfigError(f"--variant {twice[:80]} is given twice",
                              "give each variant once")
        return given
    shared = argv.shared_variant(sys.argv, _collection())
    return [shared] if shared else []


COLLECTION: list[Any] = []  # the task collection Invoke runs, set by paddlecd.cli (which
# imports this module: never imported from here)


def _collection() -> Any:
    """The task collection Invoke runs (None before paddlecd.cli made it)."""
    return COLLECTION[0] if COLLECTION else None


def count(flag: str, value: Any, *, bound: str | None = None) -> int | None:
    """An optional whole-number flag (invoke passes strings when the default is None), within
    the bounds of the setting ``bound`` names (:data:`config.BOUNDS`) when the flag overrides
    one (a trial: ``--keep-days 99999999999`` passed where the setting refuses 36501).

    Raises:
        ConfigError: ``value`` is not a whole number, or outside the setting's bounds.
    """
    if value is None:
        return None
    try:
        number = int(config.parse_number(value, whole=True))
    except ValueError:
        _too_large(flag, value)
        raise ConfigError(f"--{flag} must be a whole number, got {str(value)[:80]!r}",
                          f"e.g. --{flag} 2") from None
    if bound is not None:
        low, high, why = config.BOUNDS[bound]
        if not low <= number <= high:
            raise ConfigError(f"--{flag} {number} is outside {low:g}..{high:g} ({why})",
                              f"give --{flag} within {low:g}..{high:g}, as the setting {bound}")
    return number


def _too_large(flag: str, value: Any) -> None:
    """A whole number past Python's 4300 digits of int() (a trial: 100,001 digits were called
    "not a whole number").

    Raises:
        ConfigError: ``value`` is such a number.
    """
    text = str(value)
    if text.isascii() and text.isdigit():
        raise ConfigError(f"--{flag} {text[:12]}… ({len(text)} digits) is too large",
                          f"e.g. --{flag} 2")


def number(flag: str, value: Any, default: float, *, whole: bool = False,
           least: float | None = None, most: float | None = None) -> float:
    """A numeric flag, read here rather than by invoke (whose own conversion of ``--batch abc``
    ends in a traceback): ``default`` when not given, else ``value`` as an int (``whole``) or a
    finite float within ``least``..``most``.

    Raises:
        ConfigError: naming the flag, the value and the range.
    """
    if value is None:
        return default
    kind = "a whole number" if whole else "a number"
    span = (f" from {least:g} to {most:g}" if least is not None and most is not None
            else f" >= {least:g}" if least is not None else f" <= {most:g}" if most is not None
            else "")
    try:
        n = config.parse_number(value, whole=whole)
    except ValueError:
        _too_large(flag, value)
        n = None
    if n is None or (least is not None and n < least) or (most is not None and n > most):
        raise ConfigError(f"--{flag} must be {kind}{span}, got {str(value)[:80]!r}",
                          f"e.g. --{flag} {default:g}")
    return n


def log_format(value: str | None) -> str:
    """``--log-format`` (else ``runtime.log_format``: ``PADDLECD_LOG_FORMAT``, else text), checked.

    Raises:
        ConfigError: neither ``text`` nor ``json``.
    """
    if value and value.lower() not in config.LOG_FORMATS:
        raise ConfigError(f"--log-format must be text or json, got {value[:80]!r}",
                          "e.g. --log-format json")
    return settings(**{"runtime.log_format": value.lower() if value else None}).runtime.log_format


def layer_progress(every: float = 5.0) -> Echo:
    """A callback for push/pull streams: each layer's status changes, and byte progress at most
    every ``every`` seconds, so a 1 GB push shows progress without thousands of lines."""
    last: dict[str, str] = {}
    clock = {"t": 0.0}

    def show(msg: str) -> None:
        layer, _, rest = msg.partition(" ")
        status = rest.split("[", 1)[0].strip()
        now = time.monotonic()
        if last.get(layer) != status or now - clock["t"] >= every:
            last[layer] = status
            clock["t"] = now
            say(f"  {msg}")

    return show


def bytes_bar(total: int | None = None) -> tuple[Any, Any]:
    """A rich progress bar counting bytes on stderr (gone when done): (progress, task id)."""
    from rich import progress

    cols = (progress.BarColumn(), progress.DownloadColumn(), progress.TransferSpeedColumn(),
            progress.TimeRemainingColumn())
    class Bar(progress.Progress):
        def stop(self) -> None:  # rich 13 prints an empty line at stop off a terminal, even
            if not self.disable:  # for a disabled bar (trial 19: before a download's error)
                super().stop()

    bar = Bar("[progress.description]{task.description}", *cols, console=err, transient=True,
              disable=not err.is_interactive)  # off a terminal there is nothing to redraw
    return bar, bar.add_task("bytes", total=total)
