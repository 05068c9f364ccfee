"""Two places where Invoke reads a command line differently from what users type, handled here.

1. Invoke binds a flag to the task it follows, so in ``invoke build push verify --variant cu126``
   only ``verify`` gets ``--variant``. :func:`shared_variant` finds it for the other tasks.
2. ``invoke <task> --help`` for a task with positional arguments: Invoke hands ``--help`` to the
   first positional instead of showing the help. :func:`help_after_positional` (called by
   ``tasks.py``, which Invoke imports after reading its own options and before the tasks') runs
   ``invoke --help <task>`` instead.

And one place where it words a refusal differently: an unknown flag or task is Invoke's
``No idea what '--verison' is!``, exit 1, no hint. :func:`parse_problem` names the task and
token and suggests the nearest; ``tasks.py`` prints it and exits 2 as other bad input does
(:func:`paddlecd.cli.common.refuse_unparseable`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any


def shared_variant(argv: Sequence[str], collection: Any = None) -> str | None:
    """The variant the first task that was given ``--variant`` (or its short form) got on the
    command line, or None.

    With ``collection``, the line is read with Invoke's own parser, so ``-v cpu`` counts where
    ``-v`` is that task's ``--variant`` (a trial: ``invoke doctor release.list -v cpu`` judged
    every variant) and not where it is another flag. Without, or when the line does not parse
    (the catch site names that), only the long form ``--variant X`` / ``--variant=X``.
    """
    parsed = _parsed_tasks(tuple(argv), collection) if collection is not None else None
    if parsed is not None:
        for context in parsed:
            given = context.args.get("variant")  # got_value: given, not a default
            value = given.value if given is not None and given.got_value else None
            if isinstance(value, list):
                value = value[0] if value else None
            if value:
                return str(value)
        return None
    for i, arg in enumerate(argv):
        if arg == "--variant" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--variant="):
            return arg.split("=", 1)[1]
    return None


_PARSED: dict[tuple[str, ...], Any] = {}


def _parsed_tasks(argv: tuple[str, ...], collection: Any) -> Any:
    """The task contexts Invoke's parser makes of ``argv`` (core flags first, as
    ``Program.parse_core_args``), or None when it refuses the line; each task's help texts are
    put back (Invoke pops them while it builds the contexts). Kept per line."""
    if argv in _PARSED:
        return _PARSED[argv]
    from invoke import Program
    from invoke.exceptions import ParseError
    from invoke.parser import Parser

    tasks = [collection[name] for name in collection.task_names]
    kept = [(t, dict(t.help)) for t in tasks]
    initial = Program().initial_context
    try:
        core = Parser(initial=initial, ignore_unknown=True).parse_argv(list(argv[1:]))
        result = Parser(initial=initial, contexts=collection.to_contexts()).parse_argv(
            core.unparsed)
    except ParseError:
        result = None
    finally:
        for t, helps in kept:
            t.help = helps
    _PARSED[argv] = result
    return result


def json_twice(argv: Sequence[str], collection: Any) -> tuple[str, str] | None:
    """``(cause, hint)`` when a task given ``--json`` shares the line with another task: stdout
    would hold more than one document, which no JSON reader takes (README: ``--json`` makes
    stdout exactly one; a trial: ``push --dry-run --json promote … --json``). None otherwise."""
    parsed = [c for c in _parsed_tasks(tuple(argv), collection) or () if c.name]  # tasks only
    given = [c.name for c in parsed if (a := c.args.get("json")) is not None and a.value]
    if not given or len(parsed) < 2:
        return None
    # another task's lines on stdout break the one document too (trial 10: `release.list
    # --json release.list` printed JSON, then text)
    return (f"--json is given to {', '.join(given)} on a command line of {len(parsed)} tasks "
            f"({', '.join(c.name for c in parsed)}): stdout would not be one JSON document",
            "run the task that prints JSON as its own invoke command")


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


def parse_problem(argv: Sequence[str], collection: Any) -> tuple[str, str] | None:
    """``(cause, hint)`` when Invoke's parser would refuse ``argv`` for ``collection``, else None.

    Invoke prints a refused command line as ``No idea what '--verison' is!`` and exits 1, with no
    hint; this reads the same line with Invoke's own parser (core flags first, as
    ``Program.parse_core_args`` does, then the tasks, as ``Program.parse_tasks`` does) and words
    it as every other bad input: the task and the token named, the nearest flag or task
    (``difflib``) as the hint. ``--complete`` (shell completion) is left to Invoke.
    """
    from invoke import Program
    from invoke.exceptions import ParseError
    from invoke.parser import Parser

    initial = Program().initial_context
    try:
        core = Parser(initial=initial, ignore_unknown=True).parse_argv(list(argv[1:]))
    except ParseError as e:  # a core flag without its value: Invoke's own words are plain
        return str(e), "see: invoke --help"
    if core[0].args.complete.value:
        return None
    asked = core[0].args.help.value  # invoke --help <task>: Invoke says "No idea" after tasks.py
    if isinstance(asked, str) and asked not in collection.task_names and not core.unparsed:
        near = _nearest(asked, collection.task_names)
        return f"no task named {asked!r}", f"{near}see: invoke --list"
    # Invoke pops each flag's help from task.help while it builds the contexts (Task.arg_opts):
    # without the copies put back, ``invoke <task> --help`` then listed the flags with no words
    # (a trial; cli/reference.py keeps copies for the same reason)
    tasks = [collection[name] for name in collection.task_names]
    kept = [(t, dict(t.help)) for t in tasks]
    try:
        Parser(initial=initial, contexts=collection.to_contexts()).parse_argv(core.unparsed)
    except ParseError as e:
        message, context = str(e), e.context
    else:
        return None
    finally:
        for t, helps in kept:
            t.help = helps
    task = context.name if context is not None else None
    helps = f"invoke --help {task}" if task else "invoke --list"
    unknown = re.fullmatch(r"No idea what '(.*)' is!", message, re.S)
    needs = re.fullmatch(r"Flag <Argument: ([\w-]+).*needed value.*", message, re.S)
    missing = re.fullmatch(r"'.*' did not receive required positional arguments: (.*)", message,
                           re.S)
    if missing:
        names = missing.group(1).replace("'", "")
        return (f"{task}: missing its argument {names}",
                f"e.g. invoke {task} <{names.split(', ')[0]}>; see: {helps}")
    if needs:
        flag = "--" + needs.group(1).replace("_", "-")
        return f"{task}: {flag} needs a value", f"e.g. {flag}=VALUE; see: {helps}"
    if not unknown:
        return f"{task or 'invoke'}: {message}", f"see: {helps}"
    token = unknown.group(1)
    if task is None and token.startswith("-"):
        near = _nearest(token, initial.flags)
        return f"unknown option {token.split('=', 1)[0]!r}", f"{near}see: invoke --help"
    if task is None:
        near = _nearest(token, collection.task_names)
        return f"no task named {token!r}", f"{near}see: invoke --list"
    if token.startswith("-"):
        name = token.split("=", 1)[0]
        return f"{task}: unknown flag {name!r}", f"{_nearest(name, context.flags)}see: {helps}"
    stray = _unknown_flag(argv, task, context, collection)
    if stray:  # a trial: `download X --out D` took --out for the positional dest and named D
        return (f"{task}: unknown flag {stray!r}",
                f"{_nearest(stray, context.flags)}see: {helps}")
    bare = [a for a in argv if a.endswith(f"={token}") and a.startswith("--")]
    if bare:  # --dry-run=3: Invoke splits it and the value is left over
        flag = bare[0].split("=", 1)[0]
        arg = context.flags.get(flag)
        times = sum(a == flag or a.startswith(flag + "=") for a in argv)
        if times > 1 and (arg is None or arg.takes_value):  # a trial: --variant=a --variant=b
            return f"{task}: {flag} is given twice", f"give it once; see: {helps}"  # was "takes
        return (f"{task}: {flag} takes no value (given {token!r})",  # no value (given 'b')"
                f"write {flag} alone; see: {helps}")
    line = list(argv)
    before = line[line.index(token) - 1] if token in line[1:] else ""
    if before.startswith("-") and line.count(before) > 1:  # --variant a --variant b: b is left
        return f"{task}: {before} is given twice", f"give it once; see: {helps}"
    takes = [a.name for a in context.positional_args]
    what = ("it takes flags only" if not takes else f"it takes one argument: {takes[0]}"
            if len(takes) == 1 else f"its arguments: {', '.join(takes)}")
    return f"{task}: unexpected argument {token!r} ({what})", f"name it with its flag; see: {helps}"


def _unknown_flag(argv: list[str], task: str, context: Any, collection: Any) -> str | None:
    """The first ``--flag`` (or ``--flag=value``) among ``task``'s own tokens that the task does
    not have: Invoke takes such a token for a positional argument's value when one is free."""
    line = list(argv)
    if task not in line:
        return None
    names = set(collection.task_names)
    for token in line[line.index(task) + 1:]:
        if token in names:
            break
        name = token.split("=", 1)[0]
        if token.startswith("--") and len(token) > 2 and name not in context.flags:
            return name
    return None


def _nearest(token: str, names: Iterable[str]) -> str:
    """``"did you mean X? "`` for the name nearest ``token`` (ratio ≥ 0.7, dashes left out so
    that ``--bogus`` is not "near" ``--out``), else ``""``."""
    import difflib

    bare = {name.lstrip("-"): name for name in names}
    near = difflib.get_close_matches(token.lstrip("-"), sorted(bare), n=1, cutoff=0.7)
    return f"did you mean {bare[near[0]]}? " if near else ""

