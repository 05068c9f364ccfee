"""Pipeline tasks: run, list (``invoke pipeline.*``).

Streams: the plan and the stages' own output (build logs, smoke lines) go to stderr; the run's
report (one line per stage and variant, the end line, GitHub annotations) to stdout. With
``--log-format json`` every event, the plan included, is one JSON line on stdout.
"""

from __future__ import annotations

import os

from paddlecd.cli import common, view
from paddlecd.cli.common import LOG_FORMAT_HELP, guarded, out, result, say, settings, task
from paddlecd.cli.common import log_format as pick_log_format
from paddlecd.errors import ConfigError


def _reporters(fmt: str, logs: view.UnitLogs):
    """(on_plan, on_event, on_line) for the runner, printing text or JSON lines; in text, each
    unit's tool output also goes to its log file (``logs``)."""
    from paddlecd.pipeline import report

    if fmt == "json":
        def emit(event):
            out.out(report.json_line(event), highlight=False)

        return (lambda lines: emit({"event": "plan", "lines": lines}), emit,
                lambda stage, variant, line: emit({"event": "log", "stage": stage,
                                                   "variant": variant, "line": line}))

    def on_event(event):
        if event.event == "variant.end":
            logs.ended(event.variant)
        with logs.printing():  # on a terminal: the running units' rows make way
            line = report.text(event)
            if line:
                result(line)
            if event.event == "variant.end" and event.status == "failed":
                logs.failed(event.stage, event.variant)
            if event.event in ("stage.end", "pipeline.end"):
                logs.ended_all()
        if event.event == "stage.start":  # a spinner row per unit, as build/push/verify show
            logs.started(event.stage, event.variants or ())

    return lambda lines: say("\n".join(lines)), on_event, logs.line


@task(name="run", iterable=["variant"], help={
    "name": "pipeline name: a file pipelines/<name>.yaml "
            "(pr, nightly, release; see invoke pipeline.list)",
    "variant": "run for this variant (repeatable); wins over the pipeline's own choice "
               "(pr: the variants the change touches, else cpu; nightly: all)",
    "base_ref": "git ref to diff against to find the variants a change touches (pr); under GitHub "
                "Actions default origin/$GITHUB_BASE_REF",
    "resume": "continue the last run of this pipeline from the first stage that did not succeed, "
              "reusing the recorded outputs (digests, evidence) of the stages before it",
    "log_format": LOG_FORMAT_HELP,
    "dry_run": "print the plan (stages, variants, what each changes) and run nothing",
    "version": "release pipeline: the version to promote to (X.Y.Z); default: the pipeline's bump",
    "bump": "release pipeline: major, minor or patch instead of --version",
    "digest": "release pipeline: promote this sha256:... instead of the variant's last candidate",
})
@guarded
def run(c, name, variant=None, base_ref=None, resume=False, log_format=None, dry_run=False,
        version=None, bump=None, digest=None):
    """Run a pipeline from pipelines/<name>.yaml: its stages in order, for every selected variant.

    Prints the plan first, then one line per stage and variant (status, seconds, key outputs such as
    digests). Builds run in parallel (bounded, see the file's `parallel`). Writes
    <state>/pipelines/<name>/<run-id>/summary.json and summary.md; under GitHub Actions also appends
    the Markdown to $GITHUB_STEP_SUMMARY (capped at 1 MiB) and prints ::error:: annotations for
    failures.
    A failed stage stops the run (exit 10); `--resume` then continues from it.
    Examples: invoke pipeline.run pr                      (cpu, or --variant ...)
              invoke pipeline.run pr --base-ref origin/main
              invoke pipeline.run pr --resume
              invoke pipeline.run release --variant cpu --version 1.4.0 --dry-run
    """
    from paddlecd.pipeline import affected, report
    from paddlecd.pipeline import runner as pipeline
    from paddlecd.pipeline import spec as pipeline_spec

    fmt = pick_log_format(log_format)
    s = settings()
    pdef = pipeline_spec.load(s, name)
    if base_ref and pdef.variants != "changed":  # only the flag: CI's default applies anywhere
        raise ConfigError(f"--base-ref is for a pipeline that runs the variants a change touches, "
                          f"and pipeline '{name}' runs variants: {pdef.variants}",
                          "drop --base-ref (e.g. invoke pipeline.run pr --base-ref origin/main)")
    if base_ref and variant:  # trial 20: --variant won, the ref was neither read nor mentioned
        raise ConfigError("--base-ref finds the variants a change touches, and --variant names "
                          "them: give one", "e.g. invoke pipeline.run pr --variant cpu, or "
                          "invoke pipeline.run pr --base-ref origin/main")
    base_ref = affected.default_base_ref(base_ref, os.environ)
    logs = view.UnitLogs(s.state)
    on_plan, on_event, on_line = _reporters(fmt, logs)
    options = pipeline_spec.check_options({"version": version, "bump": bump, "digest": digest},
                                          pdef)
    given = tuple(common.variants_given(variant))
    if dry_run and resume:  # the run it would continue, refused as --resume refuses it
        _, summary, selection = pipeline.resume_of(s, pdef, given, options)
        on_plan(pipeline.resume_lines(summary, s)
                + pipeline.plan_lines(pdef, selection, s, summary.options))
        return say("dry run: nothing run, nothing written") if fmt == "text" else None
    if dry_run:
        on_plan(pipeline.plan_lines(pdef, pipeline.select(s, pdef, given, base_ref), s, options))
        return say("dry run: nothing run, nothing written") if fmt == "text" else None
    try:
        done = pipeline.run(s, name, given=given, base_ref=base_ref, resume=resume, options=options,
                      on_event=on_event, on_line=on_line, on_plan=on_plan)
    finally:
        logs.close()
    for line in report.github_annotations(done.summary, os.environ):
        result(line)
    error = done.error()
    if error:
        raise error


@task(name="list")
@guarded
def list_(c):
    """List the pipelines in pipelines/: their stages in run order and which variants they cover."""
    from paddlecd.pipeline import spec as pipeline_spec

    s = settings()
    for name in pipeline_spec.names(s):
        pdef = pipeline_spec.load(s, name)
        covers = ", ".join(pdef.variants) if isinstance(pdef.variants, tuple) else pdef.variants
        result(f"{name:<9} {' -> '.join(st.name for st in pdef.stages)}  [variants: {covers}]  "
               f"{pdef.description}")
