"""Release tasks: promote, rollback, repair, list, show (``invoke release.*``; ``promote`` is also a
short verb).

Writing tasks show their plan (stderr) and write only with ``--yes``: CI has no prompt.
"""

from __future__ import annotations

from pathlib import Path

from paddlecd.cli import view
from paddlecd.cli.common import (
    JSON_HELP,
    VERBOSE_HELP,
    count,
    guarded,
    json_result,
    result,
    say,
    settings,
    task,
    variants_given,
)
from paddlecd.cli.common import variant as pick_variant
from paddlecd.errors import ConfigError

CONFIRM_HINT = "nothing was written: re-run with --yes to write this plan (--dry-run only shows it)"


def _one_of(dry_run: bool, yes: bool) -> None:
    """``--dry-run`` writes nothing and ``--yes`` writes the plan: never both (a trial: the
    --yes was dropped unsaid in promote, rollback, repair and prune).

    Raises:
        ConfigError: both given.
    """
    if dry_run and yes:
        raise ConfigError("--dry-run and --yes contradict each other: --dry-run writes nothing, "
                          "--yes writes the plan", "drop one of them")


def _confirmed(outcome, dry_run: bool, yes: bool, what: str) -> None:
    """After a plan-only run: return for --dry-run or a no-op, else refuse without --yes."""
    if dry_run or outcome.plan.noop:
        return say("dry run: nothing written" if dry_run else "nothing to do")
    if not yes:
        raise ConfigError(f"{what} not confirmed", CONFIRM_HINT)


def _seconds(outcome) -> str:
    return f"{sum(seconds for _, seconds in outcome.phases):.2f} s"


def _timing(line: str) -> bool:
    """A phase's timing (``phase plan: 0.06 s``): for ``--verbose`` and the log, not a person."""
    return line.startswith("phase ")


def _plan_lines(verbose: bool = False):
    """An ``Echo`` printing a plan-only run's lines, its phase timings only when verbose."""
    def echo(line: str) -> None:
        if not _timing(line) or view.mode(verbose=verbose) == "verbose":
            say(line)

    return echo


@task(
    help={
        "variant": "variant to promote (its last pushed candidate, unless --digest)",
        "version": "release version X.Y.Z, or a semver 2.0 pre-release such as X.Y.Z-rc.1 "
                   "(no 'v', no leading zeros, no +build)",
        "bump": "instead of --version: major, minor or patch, " "from the highest existing release",
        "digest": "promote this sha256:… from the candidate repository "
        "instead of the last candidate",
        "dry_run": "show the plan (and check evidence and the upgrade gate), write nothing: exit "
                   "0, or 7 when the promotion would be refused",
        "yes": "write the plan (required: CI has no prompt)",
        "force": "promote despite missing, failing or stale evidence " "(needs --reason; recorded)",
        "reason": "why --force is needed; stored in the ledger record",
        "accept_regression": "promote although a figure is slower than the release it replaces "
        "(the reason; recorded with who)",
        "json": "print the release (with --dry-run: the plan) as one JSON document on stdout",
        "verbose": VERBOSE_HELP,
    }
)
@guarded
def promote(
    c,
    variant=None,
    version=None,
    bump=None,
    digest=None,
    dry_run=False,
    yes=False,
    force=False,
    reason=None,
    accept_regression=None,
    json=False,
    verbose=False,
):
    """Promote a verified image digest to a semver release: X.Y.Z-V, moving X.Y-V, X-V, latest-V.

    Prints the plan first: every tag, in which repository, from which digest, and what each moving
    tag pointed to before. Writes only with --yes. Requires a passing signed attestation of
    exactly that digest in the registry, by a key in release.trusted_keys, younger than
    release.evidence_max_age_hours, with no newer failing run; it is copied along with the image.
    Moving tags only move forward by
    semver precedence; a pre-release (1.5.0-rc.1) gets only its own tag; an existing release is
    never overwritten; a re-run after a crash finishes the job; a complete re-run does nothing.
    Blobs are mounted inside one registry (no layer moves). Every promotion appends a record to
    the ledger (invoke release.list). The upgrade gate compares the attested figures (training
    throughput, busbw, latency, export and inference times) with those of the release X.Y-V (else
    latest-V) points at, on the same hardware class: a figure slower by more than
    release.max_slowdown (beyond the runs' noise) refuses, naming it; --accept-regression "<why>"
    promotes anyway and records why and who (docs/guides/upgrade-gates.md). The gate's table
    (figure, baseline, candidate, change, verdict) is printed on stderr, with --json too.
    --json prints version, variant, digest, release reference, tags written, attestation,
    ledger record id and the comparison (paddlecd.release.promote.Released).
    Examples: invoke promote --variant cpu --version 1.4.0 --dry-run
              invoke promote --variant cu126 --bump minor --yes --json
    """
    from paddlecd.release import promote as release

    _one_of(dry_run, yes)
    s, name = settings(), pick_variant(variant, required_by="promote")
    todo = dict(variant=name, version=version, part=bump, digest=digest, force=force,
                reason=reason, accept_regression=accept_regression)
    if not yes or dry_run:  # the plan is all there is to see: printed as it comes
        outcome = release.promote(s, **todo, execute=False, report=_plan_lines(verbose))
    else:  # the plan and each step in the stage's log (and under its spinner on a terminal)
        with view.stage("promote", name, state=s.state, verbose=verbose) as st:
            outcome = release.promote(s, **todo, execute=True,
                                  report=lambda m: (st.detail if _timing(m) else st.line)(m))
            st.done(f"{outcome.plan.version}-{name}: "
                    + ("already released" if outcome.plan.noop
                       else f"{view.human_bytes(outcome.bytes_uploaded)} uploaded"))
        if st.how == "live" and outcome.plan.comparison:  # else printed in the plan, as it came
            for line in outcome.plan.comparison.describe(  # the gate, under its result line
                    shown_by=f"invoke release.show {outcome.plan.version}-{name}"):
                say(line)
    if not yes or dry_run:
        _confirmed(outcome, dry_run, yes, "promotion")  # raises unless there is nothing to write
        return json_result(release.released(outcome, executed=False)) if json else None
    if json:
        return json_result(release.released(outcome, executed=True))
    done = "already released" if outcome.plan.noop else "promoted"  # a no-op checks no evidence
    result(
        f"{done} {outcome.plan.version}-{outcome.plan.variant} = {outcome.plan.digest} "
        f"({outcome.bytes_uploaded} bytes uploaded in {_seconds(outcome)})"
    )


@task(
    help={
        "variant": "variant whose moving tags to re-point",
        "to": "the earlier release version, e.g. 1.3.2",
        "dry_run": "show the plan, write nothing, exit 0",
        "yes": "write the plan (required)",
    }
)
@guarded
def rollback(c, variant=None, to=None, dry_run=False, yes=False):
    """Re-point the moving tags of release --to (X.Y-V, X-V, latest-V) back to it; recorded.

    The one case where a moving tag goes back; the ledger records it. Later promotions move
    forward from there. Immutable release tags are never touched.
    Example: invoke release.rollback --variant cpu --to 1.3.2 --yes
    """
    from paddlecd.release import promote as release

    if not to:
        raise ConfigError(
            "release.rollback needs --to X.Y.Z", "see: invoke release.list --variant V"
        )
    _one_of(dry_run, yes)
    name = pick_variant(variant, required_by="release.rollback")
    outcome = release.rollback(settings(), variant=name, to=to, execute=yes and not dry_run,
                           report=_plan_lines())
    if not yes or dry_run:
        return _confirmed(outcome, dry_run, yes, "rollback")
    written = ", ".join(outcome.written) or "nothing"
    result(f"rolled back {written} to {to} (in {_seconds(outcome)})")


@task(
    help={
        "variant": "variant whose releases to complete",
        "dry_run": "show the plan, write nothing, exit 0",
        "yes": "write the plan (required)",
        "json": JSON_HELP,
    }
)
@guarded
def repair(c, variant=None, dry_run=False, yes=False, json=False):
    """Complete every release of a variant the ledger records: write missing or drifted tags.

    Each tag goes where the ledger says (a promotion killed after its ledger record left its tags
    unwritten).

    Reads the whole ledger and asks every release's tags; the next promotion of the variant
    completes the newest record by itself. A release whose image is not in the release
    repository is named (nothing can complete it) and exits non-zero.
    Example: invoke release.repair --variant cpu --yes
    """
    from paddlecd.errors import PromotionError
    from paddlecd.release import promote as rel

    _one_of(dry_run, yes)
    name = pick_variant(variant, required_by="release.repair")
    done = rel.repair(settings(), variant=name, execute=yes and not dry_run,
                      report=_plan_lines())
    if done.writes and not dry_run and not yes:
        raise ConfigError("repair not confirmed", CONFIRM_HINT)
    if json:
        json_result({"variant": name, "executed": bool(yes and not dry_run),
                     "writes": [{"tag": t, "digest": d, "release": r} for t, d, r in done.writes],
                     "lost": list(done.lost)})
    elif dry_run:
        say("dry run: nothing written")
    else:
        result(f"repaired {name}: {len(done.writes)} tag(s) written" if done.writes
               else f"nothing to repair for {name}: every recorded release has its tags")
    if done.lost:
        raise PromotionError(f"{len(done.lost)} recorded release(s) of {name} have no image in "
                             f"the release repository: {', '.join(done.lost)}",
                             "promote that digest again from the candidate repository, as "
                             "another version if need be")


def _evidence_text(record) -> str:
    ev = record.evidence_summary
    if not ev:
        text = "no evidence"
    else:  # skipped checks (GPU-only on a CPU image) are said apart, as evidence.show does
        skipped = int(ev.get("skipped") or 0)
        ran = ev["checks"] - skipped
        text = f"{ran - len(ev['failed'])}/{ev['checks']} checks passed"
        text += (f", {skipped} skipped" if skipped else "") + f", {ev['created']}"
    return text + (f"; FORCED: {record.reason}" if record.forced else "")


def _gate_lines(record) -> list[str]:
    """The upgrade gate the release passed (or was accepted past), as release.show prints it."""
    from paddlecd.release import gates

    if not record.gate:
        return []
    lines = gates.Comparison.from_json(record.gate).describe(every=True)
    return [line.replace("  comparison     ", "  comparison:", 1) for line in lines]


@task(
    # flags, not positional arguments: Invoke has no optional positionals (a "" default is never
    # filled, None makes both required and --history unusable)
    help={
        "a": "a release (1.0.0-cpu), a candidate digest (sha256:…) or an image reference",
        "b": "the other one, compared with a (ratio b/a)",
        "history": "instead of a and b: a variant; draws each figure over its releases (PNG)",
        "out": "with --history: the PNG to write (default <state>/charts/history-<variant>.png)",
        "json": JSON_HELP,
    },
)
@guarded
def compare(c, a=None, b=None, history=None, out=None, json=False):
    """Show the attested figures of two releases, or a release and a candidate, side by side.

    Every figure with the ratio b/a: training throughput and step time, busbw per size,
    latency, export and inference times, each with its spread and the hardware class it ran on.
    --history V writes a PNG of each figure over the releases of variant V (and a Markdown twin
    with mermaid charts). Reads only. Examples: invoke release.compare -a 1.0.0-cpu -b 1.1.0-cpu
              invoke release.compare -a 1.1.0-cpu -b sha256:… --json
              invoke release.compare --history cpu
    """
    from paddlecd.release import compare as cmp

    s = settings()
    if history and (a or b):
        raise ConfigError("release.compare: give two releases or digests, or --history, not both",
                          "e.g. invoke release.compare --history cpu")
    if out and not history:
        raise ConfigError("--out is for --history", "drop --out, or add --history VARIANT")
    if out:  # before the releases are read: /etc/x.png is refused whatever the ledger holds
        from paddlecd.files import refuse_foreign_file, refuse_output_place

        refuse_output_place(out, "--out", folder=False, example=f"./history-{history}.png")
        if Path(out).is_dir() or Path(out).suffix.lower() != ".png":  # a trial: h.txt was a
            raise ConfigError(                          # traceback; a folder or h, h.png beside
                f"--out {out}: " + ("is a folder" if Path(out).is_dir() else
                                    "does not end in .png"),
                f"give the PNG's path, e.g. --out ./history-{history}.png (its Markdown twin "
                "is written beside it, .md)")
        refuse_foreign_file(out, "--out", what="PNG file",
                            ours=lambda head: head.startswith(b"\x89PNG"))
        refuse_foreign_file(Path(out).with_suffix(".md"), "--out (its Markdown twin)",
                            what="chart Markdown file",
                            ours=lambda head: head.startswith(b"```mermaid"))
    if history:
        path, drawn = cmp.history_chart(s, history, Path(out) if out else None)
        if json:
            return json_result({"variant": history, "chart": str(path), "series": drawn})
        points = max(len(x['points']) for x in drawn.values())
        result(f"wrote {path} ({len(drawn)} figure{'s' * (len(drawn) != 1)} over {points} "
               f"release{'s' * (points != 1)})")
        return None
    if not (a and b):
        raise ConfigError("release.compare needs two releases or digests, or --history VARIANT",
                          "e.g. invoke release.compare -a 1.0.0-cpu -b 1.1.0-cpu")
    left, right = cmp.side(s, a, required=True), cmp.side(s, b, required=True)
    if json:
        return json_result({"a": left.to_json(), "b": right.to_json(),
                            "rows": [r.to_json() for r in cmp.rows(left, right)]})
    for line in cmp.table(left, right):
        result(line)
    return None


@task(name="list", help={"variant": "only this variant", "json": JSON_HELP})
@guarded
def list_(c, variant=None, json=False):
    """Show releases from the ledger: version, variant, digest, when, who, evidence, moving tags."""
    from paddlecd.release import promote as release

    rows = release.list_releases(settings(), (variants_given(variant) or [None])[0])
    if json:  # [{"release": <ledger record>, "moving_tags": [...]}]
        return json_result([{"release": record, "moving_tags": tags} for record, tags in rows])
    for record, tags in rows:
        result(
            f"{record.version}-{record.variant}  {record.digest}  {record.when}  {record.who}  "
            f"[{_evidence_text(record)}]  {' '.join(tags)}"
        )
    if not rows:
        say("no releases yet")


def _stored(s, record) -> list[str]:
    """Where the release repository holds the release's signed runs, each layout read and checked
    against release.trusted_keys (the ledger names only the one promotion rested on)."""
    from paddlecd.errors import SigningKeyError
    from paddlecd.registry.reference import parse_reference
    from paddlecd.verify import registry_store

    try:
        runs = registry_store.lookup(s, parse_reference(f"{s.release_repo}@{record.digest}"))
    except SigningKeyError as e:
        return [f"  stored: not checked ({e.cause})"]
    lines = []
    for run in runs:
        if run.problem:
            lines.append(f"  stored: REJECTED ({', '.join(run.layouts)}): {run.problem.cause}")
        elif run.verified:
            state = "passed" if run.verified.passed else "FAILED"
            lines += [f"  stored: {where} ({layout}, run {state} {run.verified.created})"
                      for where, layout in zip(run.verified.stored, run.layouts)]
    return lines or ["  stored: no signed run in the release repository"]


@task(help={"version": "a version (1.4.0: every variant) or a release (1.4.0-cpu)"})
@guarded
def show(c, version):
    """Show one release: digest, reference, moving tags on it now, evidence, its ledger history."""
    from paddlecd.release import promote as release

    s = settings()
    for record, tags, history in release.show(s, version):
        result(
            f"{record.version}-{record.variant}\n  reference: {s.release_repo}@{record.digest}\n"
            f"  moving tags: {' '.join(tags) or '(none)'}\n  evidence: {_evidence_text(record)}\n"
            f"  attestation: {record.attestation or '(none)'}"
        )
        for line in _stored(s, record):
            result(line)
        for line in _gate_lines(record):
            result(line)
        for h in history:
            result(f"  {h.when} {h.action} by {h.who} (record {h.id})")


@task(
    help={
        "out": "write the policy to this file (default: print it)",
        "action": "Enforce (default: refuse unverified Pods) or Audit (admit, report)",
        "json": "the policy as JSON instead of YAML (on stdout, or in the --out file)",
    }
)
@guarded
def policy(c, out=None, action="Enforce", json=False):
    """Write a Kyverno ClusterPolicy that lets a cluster run only paddlecd-verified releases.

    The policy (kyverno.io/v1 verifyImages, type SigstoreBundle, Kyverno >= 1.13) admits a Pod
    whose release-repository images carry a passing verify attestation signed by one of
    release.trusted_keys, checked offline (no Rekor, no CT log). Apply it with kubectl.
    Example: invoke release.policy --out policy.yaml && kubectl apply -f policy.yaml
    """
    import json as jsonlib

    from paddlecd.files import dump_yaml, refuse_foreign_file, refuse_output_place, write_text
    from paddlecd.release import admission

    if out:
        refuse_output_place(out, "--out", folder=False)
        refuse_foreign_file(out, "--out", what="ClusterPolicy file", ours=lambda head: any(
            k in head for k in (b"kind: ClusterPolicy", b'"kind": "ClusterPolicy"')))
    doc = admission.kyverno_policy(settings(), action=action)
    text = jsonlib.dumps(doc, indent=2) + "\n" if json else dump_yaml(doc)
    if out:
        write_text(Path(out), text)
        return say(f"wrote {out}: ClusterPolicy {doc['metadata']['name']} ({action}) for "
                   + " and ".join(doc['spec']['rules'][0]['verifyImages'][0]['imageReferences']))
    result(text.rstrip("\n"))


@task(
    help={
        "variant": "variant whose candidates to prune",
        "keep_days": "keep candidates younger than this many days (default: the variant's "
                     "retention.keep_days, else the setting retention.keep_days: 30)",
        "keep_last": "keep this many newest candidates (default: retention.keep_last: 10)",
        "dry_run": "show what goes, what stays and why, and the bytes freed; delete nothing",
        "yes": "delete the plan (required: CI has no prompt)",
        "json": "print the plan (and what was deleted) as one JSON document on stdout",
    }
)
@guarded
def prune(c, variant=None, keep_days=None, keep_last=None, dry_run=False, yes=False, json=False):
    """Delete old candidates of a variant and their referrers; never one a release names.

    A candidate (<variant>-<revision> in the candidate repository) stays when the release
    repository names its digest (a release or moving tag, a ledger record or rollback target, an
    attestation subject), when it is among the --keep-last newest, or younger than --keep-days.
    The rest goes by manifest DELETE by digest, its attestations, provenance and JUnit first.
    The release repository is read again before each delete. The registry frees the space at
    its garbage collection (distribution: registry garbage-collect; scripts/stack.sh gc).
    Example: invoke release.prune --variant cpu --keep-days 14 --dry-run
    """
    from paddlecd.release import prune as retention

    _one_of(dry_run, yes)
    s, name = settings(), pick_variant(variant, required_by="release.prune")
    days = count("keep-days", keep_days, bound="retention.keep_days")
    last = count("keep-last", keep_last, bound="retention.keep_last")
    the_plan = retention.plan(s, name, keep_days=days, keep_last=last)
    for line in the_plan.lines(view.human_bytes):
        say(line)
    if dry_run or not the_plan.doomed:
        say("dry run: nothing deleted" if dry_run else "nothing to delete")
        return json_result(the_plan) if json else None
    if not yes:
        raise ConfigError("prune not confirmed", CONFIRM_HINT.replace("written", "deleted")
                          .replace("write", "delete"))
    outcome = retention.prune(s, the_plan, report=say)
    if json:
        return json_result(outcome)
    result(f"deleted {len(outcome.deleted)} candidates of {name}"
           + (f", kept {len(outcome.skipped)} named since the plan" if outcome.skipped else "")
           + (f", restored {len(outcome.restored)}" if outcome.restored else "")
           + f"; up to {view.human_bytes(the_plan.bytes_freed)} freed at garbage collection")
