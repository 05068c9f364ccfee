"""paddlecd tasks: thin wrappers over the paddlecd package (STYLE.md §3).

Each task parses flags, calls one package function, and turns PaddlecdError into invoke.Exit with a
stable exit code. Run `invoke --list` for the tasks, `invoke <task> --help` for one.
Set PADDLECD_DEBUG=1 to see tracebacks.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from invoke import Collection, Exit, task

sys.path.insert(0, str(Path(__file__).parent / "src"))  # works from a plain checkout, too

from rich.console import Console  # noqa: E402

from paddlecd import config  # noqa: E402
from paddlecd.errors import PaddlecdError  # noqa: E402

console = Console(stderr=False, highlight=False)
err = Console(stderr=True, highlight=False)


def guarded(fn):
    """The one catch site: PaddlecdError → 'error: cause' + 'hint: …' on stderr, exit code kept."""

    @functools.wraps(fn)
    def wrapper(c, *args, **kwargs):
        try:
            return fn(c, *args, **kwargs)
        except PaddlecdError as e:
            if os.environ.get("PADDLECD_DEBUG"):
                raise
            err.print(f"[bold red]error:[/] {e.cause}", markup=True, soft_wrap=True)
            if e.hint:
                err.print(f"[yellow]hint:[/] {e.hint}", markup=True, soft_wrap=True)
            raise Exit(code=e.exit_code) from None

    return wrapper


def settings(**flags):
    """Resolve configuration with task flags on top (``None`` flags are ignored)."""
    return config.load(flags)


def say(msg: str) -> None:
    """Progress line for the user."""
    console.print(msg, soft_wrap=True, markup=False)


# ============================================================== image: lock, bootstrap, build, push, verify
# (section owned by the main-job work)

image = Collection("image")
smoke = Collection("smoke")

# ============================================================== release (promotion)
release = Collection("release")

# ============================================================== artifacts (object storage)
artifacts = Collection("artifacts")

# ============================================================== cluster (training jobs)
cluster = Collection("cluster")

# ============================================================== pipeline, doctor
pipeline = Collection("pipeline")

# ============================================================== namespace
ns = Collection()
for _sub in (image, smoke, release, artifacts, cluster, pipeline):
    ns.add_collection(_sub)
