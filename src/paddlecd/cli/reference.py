"""The CLI reference of the docs, generated from the tasks' own help (never written twice).

Each task's section is exactly what ``invoke --help <task>`` prints (Invoke renders it from the
task's docstring and its ``help=`` flags), grouped by namespace; the short verbs at the top level
are listed with the namespaced task they are. The MkDocs hook ``docs/_hooks/cli_reference.py``
puts :func:`markdown` into ``docs/reference/cli.md`` at build time.
"""

from __future__ import annotations

import contextlib
import io

from invoke import Collection, Program

from paddlecd.cli import NAMESPACES, SHORT_VERBS, doctor


def namespaced() -> Collection:
    """The tasks once each, under their namespaces (plus ``doctor``): in :data:`ns` a short verb
    is the same task object twice, and Invoke gives its flags' help to only the first."""
    root = Collection()
    for module in NAMESPACES:
        root.add_collection(Collection.from_module(module))
    root.add_task(doctor.doctor)
    return root


def task_help(name: str, collection: Collection | None = None) -> str:
    """What ``invoke --help <name>`` prints for task ``name`` (``image.build``, ``doctor``)."""
    # Invoke pops each flag's help from task.help when it builds the parser (invoke/tasks.py,
    # Task.arg_opts), so a second Program in one process would print none: restore them first.
    collection = collection or namespaced()
    for task in _tasks(collection):
        task.help = dict(_HELP.setdefault(id(task), dict(task.help)))
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        Program(namespace=collection, name="invoke", binary="invoke").run(
            ["invoke", "--help", name], exit=False)
    return buffer.getvalue().rstrip()


def markdown() -> str:
    """The reference as Markdown: a section per namespace, a subsection per task with its help in
    a code block, and the table of short verbs."""
    collection = namespaced()
    short = {verb.name: _full_name(collection, verb) for verb in SHORT_VERBS}
    parts = ["## Short verbs\n", "| verb | is |", "|---|---|"]
    parts += [f"| `invoke {v}` | [`{full}`](#{_anchor(full)}) |" for v, full in short.items()]
    for space, sub in collection.collections.items():
        parts.append(f"\n## {space}\n")
        first = (sub.__doc__ or "").strip().splitlines()
        if first:
            parts.append(first[0] + "\n")
        for task in sub.task_names:
            full = f"{space}.{task}"
            parts += [f"### {full}\n", "```text", task_help(full, collection), "```\n"]
    parts += ["\n## doctor\n", "```text", task_help("doctor", collection), "```\n"]
    return "\n".join(parts) + "\n"


_HELP: dict[int, dict[str, str]] = {}


def _tasks(collection: Collection):
    yield from collection.tasks.values()
    for sub in collection.collections.values():
        yield from _tasks(sub)


def _full_name(collection: Collection, verb) -> str:
    for space, sub in collection.collections.items():
        if any(sub[name] is verb for name in sub.task_names):
            return f"{space}.{verb.name}"
    return verb.name


def _anchor(name: str) -> str:
    """The id MkDocs (Python-Markdown's toc) gives the heading ``name``: dots dropped."""
    return name.replace(".", "").replace("_", "_").lower()
