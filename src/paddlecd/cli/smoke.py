"""Smoke-suite tasks: what the suite checks (``invoke smoke.checks``); ``invoke verify`` runs it."""

from __future__ import annotations

from paddlecd.cli import common
from paddlecd.cli.common import guarded, result, settings, task


@task(help={"variant": "show the checks as they apply to this variant "
                       "(GPU-only checks are skipped on CPU)"})
@guarded
def checks(c, variant=None):
    """List the smoke checks verify runs inside every image (module/test), GPU-only ones marked.

    The suite lives in smoke/ and depends only on paddle + pytest + the stdlib; see smoke/README.md.
    """
    from paddlecd.verify import suite

    # no default of its own: a --variant (or -v) given to another task on the line counts (a
    # trial: `smoke.checks release.list -v cu126` showed the cpu view); else cpu
    for check in suite.checks(settings(), common.variant(variant)):
        mark = " (GPU-only)" if check.runs else " (GPU-only: skipped on this variant)"
        result(check.name + (mark if check.gpu_only else ""))
