"""Two places where Invoke reads a command line differently from what users type, handled here.

1. Invoke binds a flag to the task it follows, so in ``invoke build push verify --variant cu126``
   only ``verify`` gets ``--variant``. :func:`shared_variant` finds it for the other tasks.
2. ``invoke <task> --help`` for a task with positional arguments: Invoke hands ``--help`` to the
   first positional instead of showing the help. :func:`help_after_positional` (called by
   ``tasks.py``, which Invoke imports after reading its own options and before the tasks') runs
   ``invoke --help <task>`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence


def shared_variant(argv: Sequence[str]) -> str | None:
    """The value of the first ``--variant X`` / ``--variant=X`` on the command line, or None.

    Only the long form: other tasks use ``-v`` for other flags.
    """
    for i, arg in enumerate(argv):
        if arg == "--variant" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--variant="):
            return arg.split("=", 1)[1]
    return None


def help_argv(argv: Sequence[str], task_names: Iterable[str]) -> list[str] | None:
    """``[argv[0], "--help", task]`` when ``argv`` asks ``<task> --help`` (or ``-h``) for a known
    task, else None (nothing to rewrite)."""
    names = set(task_names)
    for i, arg in enumerate(argv[1:-1], start=1):
        if arg in names and argv[i + 1] in ("--help", "-h"):
            return [argv[0], "--help", arg]
    return None


def help_after_positional(argv: Sequence[str], task_names: Iterable[str], *,
                          execvp: Callable[[str, list[str]], object] = os.execvp) -> None:
    """Re-run as ``invoke --help <task>`` when :func:`help_argv` says so (does not return then).

    Invoke has already parsed its own options when it imports ``tasks.py``, so the rewritten
    command line needs a new process; ``argv[0]`` is the ``invoke`` (or ``inv``) being run.
    """
    rewritten = help_argv(argv, task_names)
    if rewritten:
        execvp(rewritten[0], rewritten)
