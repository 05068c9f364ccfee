"""The pipeline runner with fake stage callables (the real stages run in
tests/integration/test_pipeline.py): order, summary files, resume from the failed stage with the
recorded outputs, parallel builds, events."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from paddlecd import proc
from paddlecd.errors import Interrupted, PipelineError, VerifyError
from paddlecd.pipeline import runner as pipeline
from paddlecd.pipeline import stages
from paddlecd.pipeline.records import Summary

from support import ROOT, project_settings


class Fakes:
    """Stage callables that record their calls; ``fail`` makes a kind raise once per variant
    listed."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []
        self.fail: dict[str, set[str]] = {}
        self.seen_push: dict[str, str] = {}
        self.lock = threading.Lock()

    def kinds(self):
        def make(kind):
            def run(ctx: stages.StageContext):
                with self.lock:
                    self.calls.append((kind, ctx.variant))
                if kind == "push":
                    ctx.outputs.update(
                        digest=f"sha256:{ctx.variant}", reference=f"reg/repo@sha256:{ctx.variant}"
                    )
                if kind == "verify":
                    self.seen_push[ctx.variant] = ctx.inputs["push"]["reference"]
                    failing = ctx.variant in self.fail.get("verify", set())
                    ctx.outputs["checks"] = [
                        {"name": "env/import", "passed": True, "seconds": 0.1},
                        {"name": "export/jit", "passed": not failing, "seconds": 0.2},
                    ]
                if ctx.variant in self.fail.get(kind, set()):
                    self.fail[kind].discard(ctx.variant)
                    raise VerifyError(
                        f"verify failed for {ctx.variant}: export/jit: outputs differ",
                        "see smoke.log",
                    )

            return run
        return {k: make(k) for k in stages.KINDS}


def run(settings, fakes, events=None, **kw):
    return pipeline.run(
        settings,
        "pr",
        kinds=fakes.kinds(),
        on_event=(events.append if events is not None else lambda e: None),
        **kw,
    )


def test_stages_run_in_order_and_the_summary_is_written(settings):
    fakes, events = Fakes(), []
    result = run(settings, fakes, events, given=("cpu",))
    assert fakes.calls == [
        ("lock-check", "cpu"),
        ("build", "cpu"),
        ("push", "cpu"),
        ("verify", "cpu"),
    ]
    assert result.error() is None and result.summary.status == "succeeded"
    saved = json.loads((result.folder / "summary.json").read_text())
    assert saved == result.summary.to_json() and Summary.from_json(saved) == result.summary
    assert saved["attempts"] == 1 and saved["variants"] == ["cpu"]
    assert [s["status"] for s in saved["stages"]] == ["succeeded"] * 4
    assert saved["stages"][2]["variants"]["cpu"]["outputs"]["digest"] == "sha256:cpu"
    assert (result.folder.parent / "latest").read_text().strip() == saved["run_id"]
    assert result.folder == settings.state / "pipelines" / "pr" / saved["run_id"]
    assert "| push | cpu | ✅ succeeded |" in (result.folder / "summary.md").read_text()
    kinds = [e.event for e in events]
    assert (
        kinds.count("variant.end") == 4
        and kinds.count("check") == 2
        and kinds[-1] == "pipeline.end"
    )
    assert all(e.run_id == saved["run_id"] and e.pipeline == "pr" for e in events)


def test_failed_stage_stops_the_run_and_resume_reuses_recorded_outputs(settings):
    fakes = Fakes()
    fakes.fail["verify"] = {"cpu"}
    first = run(settings, fakes, given=("cpu",))
    err = first.error()
    assert isinstance(err, PipelineError) and err.exit_code == 10
    assert "stage 'verify' failed for cpu: verify failed for cpu: export/jit" in err.cause
    assert "--resume" in err.hint and str(first.folder / "summary.json") in err.hint
    verify = first.summary.stages[3].variants["cpu"]
    assert verify.status == "failed" and verify.outputs["checks"][1]["passed"] is False
    fakes.calls.clear()
    events = []
    second = run(settings, fakes, events, resume=True)
    assert fakes.calls == [("verify", "cpu")]  # lock-check, build, push reused
    assert fakes.seen_push["cpu"] == "reg/repo@sha256:cpu"  # the recorded push output
    assert second.folder == first.folder and second.summary.run_id == first.summary.run_id
    assert second.summary.status == "succeeded" and second.summary.attempts == 2
    assert second.summary.stages[1].variants["cpu"].attempt == 1
    assert second.summary.stages[3].variants["cpu"].attempt == 2
    assert [e.stage for e in events if e.status == "reused"] == ["lock-check", "build", "push"]


def test_ctrl_c_records_the_run_as_interrupted_and_resume_continues_it(settings):
    """A trial: Ctrl-C in pipeline.run exited 1 with no message and left the run "running"."""
    fakes = Fakes()
    kinds = fakes.kinds()
    verify = kinds["verify"]

    def interrupted(ctx):
        kinds["verify"] = verify  # once
        raise KeyboardInterrupt

    kinds["verify"] = interrupted
    with pytest.raises(Interrupted) as e:
        pipeline.run(settings, "pr", kinds=kinds, on_event=lambda ev: None, given=("cpu",))
    assert e.value.exit_code == 130 and "was interrupted" in e.value.cause
    assert "invoke pipeline.run pr --resume" in e.value.hint
    folder, saved = pipeline.last_run(settings, "pr")
    assert saved.status == "interrupted" and saved.finished
    assert [s.status for s in saved.stages] == ["succeeded"] * 3 + ["interrupted"]
    assert "⏹" in (folder / "summary.md").read_text()
    fakes.calls.clear()
    again = pipeline.run(settings, "pr", kinds=kinds, on_event=lambda ev: None, resume=True)
    assert fakes.calls == [("verify", "cpu")] and again.summary.status == "succeeded"


def test_a_unit_that_fails_because_ctrl_c_stopped_it_is_recorded_interrupted(settings):
    """Trial 7: Ctrl-C during verify stopped its container, the stage then saw exit 137 and
    recorded "failed", and summary.md (the GitHub step summary) blamed the smoke suite. A unit
    that fails once the runner is stopping (its Ctrl-C handler sets ``stopping`` before it stops
    the containers) is recorded as interrupted; the same failure otherwise stays a failure."""
    from paddlecd.errors import VerifyError
    from paddlecd.pipeline import runner as pipeline_runner
    from paddlecd.pipeline import spec as pipeline_spec

    def stopped(ctx):
        raise VerifyError("verify failed for cpu: container exit 137", "see its log")

    pdef = pipeline_spec.load(settings, "pr")
    selection = pipeline_spec.Selection(("cpu",), "given")
    for stopping, status in ((False, "failed"), (True, "interrupted")):
        summary = pipeline_runner.new_summary(pdef, selection, settings, {}, None)
        folder = settings.state / "pipelines" / "pr" / summary.run_id
        kinds = {**Fakes().kinds(), "verify": stopped}
        run = pipeline_runner.Runner(settings, pdef, summary, folder, on_event=lambda e: None,
                                     on_line=lambda *a: None, kinds=kinds)
        if stopping:
            run.stopping.set()
        index = [s.name for s in pdef.stages].index("verify")
        run._unit(index, pdef.stages[index], "cpu")
        unit = run.summary.stages[index].variants["cpu"]
        assert unit.status == status, unit
        report = (folder / "summary.md").read_text() if (folder / "summary.md").exists() else ""
        if stopping:
            assert unit.error_type == "Interrupted" and "exit 137" not in unit.error
            assert "❌" not in report and "exit 137" not in report


def test_resume_without_a_previous_run_is_refused(settings):
    with pytest.raises(PipelineError) as e:
        run(settings, Fakes(), resume=True)
    assert "no previous run of pipeline 'pr' to resume" in e.value.cause
    assert e.value.hint == "start one: invoke pipeline.run pr"


def test_resume_for_other_variants_is_refused(settings):
    fakes = Fakes()
    fakes.fail["push"] = {"cpu"}
    run(settings, fakes, given=("cpu",))
    with pytest.raises(PipelineError) as e:
        run(settings, fakes, resume=True, given=("cu126",))
    assert "for its variants (cpu), not cu126" in e.value.cause
    assert run(settings, fakes, resume=True, given=("cpu",)).error() is None


def test_resume_of_a_changed_pipeline_is_refused(settings):
    fakes = Fakes()
    fakes.fail["build"] = {"cpu"}
    first = run(settings, fakes, given=("cpu",))
    summary = json.loads((first.folder / "summary.json").read_text())
    summary["stages"][1]["name"] = "compile"
    (first.folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(PipelineError) as e:
        run(settings, fakes, resume=True)
    assert "changed since run" in e.value.cause


def test_resume_only_reruns_the_variants_that_failed(settings):
    fakes = Fakes()
    fakes.fail["verify"] = {"cu126"}
    first = run(settings, fakes, given=("cpu", "cu126"))
    assert [(s, v) for s, v, _ in first.failures] == [("verify", "cu126")]
    fakes.calls.clear()
    second = run(settings, fakes, resume=True)
    assert fakes.calls == [("verify", "cu126")] and second.error() is None


def test_builds_of_two_variants_run_at_once(settings):
    """pr.yaml says parallel: 2 for build: both builds must be inside the stage at the same time."""
    barrier = threading.Barrier(2, timeout=20)
    fakes = Fakes()
    kinds = fakes.kinds()
    kinds["build"] = (
        lambda ctx: barrier.wait()
    )  # a serial runner breaks the barrier (BrokenBarrierError)
    result = pipeline.run(settings, "pr", given=("cpu", "cu126"), kinds=kinds)
    assert result.error() is None, result.error()


def test_variants_on_one_base_build_in_one_group(settings, tmp_path):
    digest = "sha256:" + "1" * 64
    lock = {
        "schema": 1,
        "bases": {
            n: {
                "base": f"b/{n}:1",
                "digest": digest if n != "cu126" else "sha256:" + "2" * 64,
                "media_type": "application/vnd.oci.image.index.v1+json",
                "locked": "2026-12-01T09:00:00Z",
            }
            for n in ("cpu", "cu118", "cu126")
        },
    }
    (tmp_path / "lock.yaml").write_text(json.dumps(lock))
    assert stages.groups(settings, "build", ["cpu", "cu118", "cu126"]) == [
        ["cpu", "cu118"],
        ["cu126"],
    ]
    assert stages.groups(settings, "push", ["cpu", "cu118"]) == [["cpu"], ["cu118"]]


def test_no_touched_variant_skips_every_stage(settings):
    fakes = Fakes()
    result = pipeline.run(settings, "pr", kinds=fakes.kinds(), given=())
    assert fakes.calls and result.summary.variants == ("cpu",)  # local default
    pdef = pipeline.pipeline_spec.load(settings, "pr")
    summary = pipeline.new_summary(
        pdef, pipeline.Selection((), "touched by the change since main"), settings, {}, "main"
    )
    runner = pipeline.Runner(
        settings,
        pdef,
        summary,
        settings.state / "x" / "y",
        on_event=lambda e: None,
        on_line=lambda *a: None,
        kinds=fakes.kinds(),
    )
    done = runner.run()
    assert done.status == "succeeded" and {s.status for s in done.stages} == {"skipped"}


def test_unexpected_exception_is_recorded_against_its_stage(settings):
    fakes = Fakes()
    kinds = fakes.kinds()
    kinds["push"] = lambda ctx: 1 / 0
    result = pipeline.run(settings, "pr", given=("cpu",), kinds=kinds)
    assert "stage 'push' failed for cpu: ZeroDivisionError" in result.error().cause
    assert result.summary.stages[3].status == "pending"  # verify never ran


def test_resume_takes_a_new_version_after_a_refused_promotion(settings):
    """A promotion refused for its version (e.g. clobber) is resumed with --version given again."""
    from paddlecd.errors import PromotionError

    seen: list[str] = []

    def promote(ctx: stages.StageContext) -> None:
        seen.append(ctx.params.get("version"))
        if ctx.params.get("version") == "1.0.0":
            raise PromotionError("1.0.0-cpu exists on another digest", "promote a new version")
        ctx.outputs.update(version=ctx.params["version"])

    kinds = {k: (lambda ctx: None) for k in stages.KINDS}
    kinds["promote"] = promote
    first = pipeline.run(
        settings, "release", given=("cpu",), options={"version": "1.0.0"}, kinds=kinds
    )
    assert first.error() is not None and "--resume" in first.error().hint
    second = pipeline.run(
        settings, "release", resume=True, options={"version": "1.0.1"}, kinds=kinds
    )
    assert second.error() is None and seen == ["1.0.0", "1.0.1"]
    assert json.loads((second.folder / "summary.json").read_text())["options"]["version"] == "1.0.1"


def test_a_new_version_for_a_run_whose_promotion_succeeded_is_refused(settings):
    """Trial 19: promote made 8.13.0, deploy was interrupted; ``--resume --version 8.14.0`` (and
    its dry run) reused 8.13.0 and deployed it, the 8.14.0 dropped without a word."""
    def promote(ctx: stages.StageContext) -> None:
        ctx.outputs.update(release=f"{ctx.params['version']}-cpu", version=ctx.params["version"])

    def deploy(ctx: stages.StageContext) -> None:
        raise VerifyError("the job failed", "see its logs")

    kinds = {k: (lambda ctx: None) for k in stages.KINDS}
    kinds.update(promote=promote, deploy=deploy)
    first = pipeline.run(settings, "release", given=("cpu",), options={"version": "8.13.0"},
                         kinds=kinds)
    assert first.error() is not None
    with pytest.raises(PipelineError) as e:
        pipeline.run(settings, "release", resume=True, options={"version": "8.14.0"},
                     kinds=kinds)
    assert e.value.cause == (f"--version 8.14.0: the promote stage of run "
                             f"{first.summary.run_id} succeeded (8.13.0-cpu), and a resume "
                             "reuses it")
    assert e.value.hint.endswith("invoke pipeline.run release --version 8.14.0")
    again = pipeline.run(settings, "release", resume=True, options={"version": "8.13.0"},
                         kinds=kinds)  # the same version given again is no change
    assert again.summary.run_id == first.summary.run_id


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_stage_error_shows_its_traceback_only_with_runtime_debug(tmp_path, debug):
    """runtime.debug (PADDLECD_DEBUG) is a setting: the runner reads Settings, not os.environ."""
    s = project_settings(tmp_path / "state", lock_file=tmp_path / "lock.yaml",
                         **{"runtime.debug": debug})

    def broken(ctx):
        raise KeyError("not a PaddlecdError")

    lines = []
    result = pipeline.run(s, "pr", given=("cpu",), kinds={k: broken for k in stages.KINDS},
                          on_line=lambda stage, variant, line: lines.append(line))
    assert result.error() is not None
    assert ("Traceback (most recent call last):" in lines) is debug


def test_two_stages_of_one_kind_keep_their_own_outputs(settings):
    """Earlier outputs are keyed by stage name: each verify gets the push it needs, not the last."""
    pdef = pipeline.pipeline_spec.parse({"schema": 1, "stages": [
        {"stage": "build"},
        {"stage": "push", "name": "push-a"}, {"stage": "push", "name": "push-b"},
        {"stage": "verify", "name": "verify-a", "needs": ["push-a"]},
        {"stage": "verify", "name": "verify-b", "needs": ["push-b"]},
    ]}, Path("pipelines/two.yaml"), "two")
    seen: dict[str, str] = {}

    def push(ctx: stages.StageContext) -> None:
        ctx.outputs.update(reference=f"reg/{ctx.stage}@sha256:1")

    def verify(ctx: stages.StageContext) -> None:
        seen[ctx.stage] = ctx.inputs["push"]["reference"]
        assert set(ctx.earlier) >= {"push-a", "push-b"}

    summary = pipeline.new_summary(pdef, pipeline.Selection(("cpu",), "--variant"), settings, {},
                                   None)
    folder = settings.state / "pipelines" / "two" / summary.run_id
    runner = pipeline.Runner(settings, pdef, summary, folder,
                             on_event=lambda e: None, on_line=lambda *a: None,
                             kinds={"build": lambda ctx: None, "push": push, "verify": verify})
    done = runner.run()
    assert done.status == "succeeded", done.failures()
    assert seen == {"verify-a": "reg/push-a@sha256:1", "verify-b": "reg/push-b@sha256:1"}
    outputs = {s.name: s.variants["cpu"].outputs for s in done.stages}
    assert outputs["push-a"] != outputs["push-b"]


def _install_summary(settings, data: dict) -> Path:
    folder = settings.state / "pipelines" / "pr" / data["run_id"]
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(data))
    (folder.parent / "latest").write_text(data["run_id"] + "\n")
    return folder


def test_a_summary_written_before_the_typed_records_resumes(settings):
    """tests/data/pipeline-summary-v1.json was written by the dict-based runner (push succeeded,
    verify failed); resuming it reruns verify with the digest that run pushed."""
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    folder = _install_summary(settings, old)
    fakes = Fakes()
    result = run(settings, fakes, resume=True)
    assert fakes.calls == [("verify", "cpu")] and result.folder == folder
    assert fakes.seen_push["cpu"] == "reg.example/ci/paddle@sha256:" + "a" * 64
    assert result.summary.status == "succeeded" and result.summary.attempts == 2
    saved = json.loads((folder / "summary.json").read_text())
    assert saved["stages"][2] == old["stages"][2]  # the reused stage is written back unchanged
    assert set(saved) == set(old) | {"owner"}  # the one key added since: who runs it


def test_a_resume_of_a_run_made_at_another_revision_says_so(settings):
    """Trial 7: a run recorded at another commit resumed without a word, its built and pushed
    stages reused for this checkout."""
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    _install_summary(settings, {**old, "revision": "0" * 40})
    plans: list[list[str]] = []
    run(settings, Fakes(), resume=True, on_plan=plans.append)
    assert any(x.startswith("warning: run 20261201T091911Z-e872 was made at revision "
                            "000000000000, the checkout is at ") for x in plans[0]), plans


def _killed_summary(settings, owner: str) -> Path:
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    stages = [{**s, "status": "running"} if s["name"] == "verify" else s for s in old["stages"]]
    return _install_summary(settings, {**old, "status": "running", "finished": None,
                                       "owner": owner, "stages": stages})


def test_a_run_killed_while_running_is_closed_by_the_next_fresh_run(settings):
    """Trial 4: a pipeline.run killed with -9 kept "status": "running" for good once the next
    run was a fresh one (``--resume`` reads only the latest run)."""
    folder = _killed_summary(settings, f"{socket.gethostname()}/999999999/1")  # no such pid
    plans = []
    result = run(settings, Fakes(), on_plan=plans.append)
    killed = json.loads((folder / "summary.json").read_text())
    assert killed["status"] == "interrupted" and killed["finished"]
    assert [s["status"] for s in killed["stages"] if s["name"] == "verify"] == ["interrupted"]
    assert plans[0][0] == f"run {killed['run_id']} was killed while running: recorded as " \
                          "interrupted"
    assert result.summary.status == "succeeded" and result.summary.owner == proc.owner()
    assert result.folder != folder


def test_a_resume_plan_of_a_killed_run_says_it_was_killed_not_running(settings):
    """Trial 19: ``--resume --dry-run`` of a run killed with -9 said "(running)"."""
    folder = _killed_summary(settings, f"{socket.gethostname()}/999999999/1")  # no such pid
    summary = Summary.from_json(json.loads((folder / "summary.json").read_text()),
                                source="summary.json")
    line = pipeline.resume_lines(summary)[0]
    assert "(killed while running: the resume records it as interrupted): from stage verify" \
        in line


def test_a_run_whose_process_still_runs_is_not_taken_for_killed(settings):
    folder = _killed_summary(settings, proc.owner())  # this very process: running
    with pytest.raises(PipelineError, match="is running now"):
        run(settings, Fakes())
    assert json.loads((folder / "summary.json").read_text())["status"] == "running"


@pytest.mark.parametrize("pointer", ["nosuchrun", "../../../../etc", "20990101T000000Z-abcd"])
def test_a_broken_latest_pointer_is_named_not_called_no_run(settings, pointer):
    """Trial 4: ``latest`` naming no run said "no previous run … (nothing under …)"."""
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    folder = _install_summary(settings, old)
    (folder.parent / "latest").write_text(pointer + "\n")
    with pytest.raises(PipelineError) as e:
        run(settings, Fakes(), resume=True)
    assert e.value.cause == f"{folder.parent / 'latest'} names {pointer!r}, which is not a run " \
                            f"under {folder.parent}"
    assert old["run_id"] in e.value.hint


@pytest.mark.parametrize("change, words", [
    ({"schema": 2}, "summary schema 2, this paddlecd reads 1"),
    ({"stages": [{"name": "build"}]}, "not a pipeline summary: stages[0]: 'kind' is a required"),
    # trial 7: these resumed, ran variants c, p and u (or "nosuch"), and recorded success
    ({"variants": "cpu"}, "not a pipeline summary: variants is the text 'cpu', not a list"),
    ({"variants": ["nosuch"]}, "names variant 'nosuch', which images/variants.yaml does not"),
    ({"run_id": "../../../../tmp/x"}, "not a pipeline summary: run_id:"),
    ({"pipeline": "release"}, "is the record of run '20261201T091911Z-e872' of pipeline "
                              "'release', not of run 20261201T091911Z-e872 of 'pr'"),
    # trial 9: unknown options, an option pr refuses and a time that is none were resumed
    ({"options": {"no_cache": "maybe", "evil": 1}}, "unknown key 'no_cache' at options"),
    ({"options": {"digest": "sha256:" + "1" * 64}}, "records options that pipeline.run "
                                                    "refuses: --digest: for the promote stage"),
    ({"started": "yesterday"}, "not a pipeline summary: started:"),
])
def test_a_summary_this_paddlecd_cannot_read_is_refused(settings, change, words):
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    folder = _install_summary(settings, old)
    (folder / "summary.json").write_text(json.dumps({**old, **change}))
    with pytest.raises(PipelineError) as e:
        run(settings, Fakes(), resume=True)
    assert words in e.value.cause and ("summary.json" in e.value.cause or "nosuch" in words)
    assert e.value.hint.startswith("start a fresh run")


def test_a_stage_writing_an_undeclared_output_fails(settings):
    """KINDS says what each kind outputs; a stage that writes more fails instead of growing the
    summary's contract silently."""
    kinds = {k: (lambda ctx: None) for k in stages.KINDS}
    kinds["build"] = lambda ctx: ctx.outputs.update(tag="t", secret_path="/x")
    result = pipeline.run(settings, "pr", given=("cpu",), kinds=kinds)
    assert "stage 'build' (build) wrote undeclared outputs: secret_path" in result.error().cause
    assert "paddlecd.pipeline.stages.KINDS" in result.error().hint


@pytest.mark.parametrize("edit, words", [
    ({"push": {"digest": "sha256:" + "0" * 64}}, "records digest sha256:0000"),
    ({"verify": {"digest": "sha256:" + "b" * 64}}, "but the push it took recorded sha256:aaaa"),
])
def test_a_resume_whose_recorded_digests_disagree_is_refused(settings, edit, words):
    """Trial 8: push's ``outputs.digest`` edited in summary.json resumed as "succeeded", the
    summary naming one digest for push and another for verify. Digests a resume reuses must agree
    (a stage's reference and digest; verify and the push it took)."""
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    by_name = {s["name"]: s for s in old["stages"]}
    for name, outputs in edit.items():
        unit = by_name[name]["variants"]["cpu"]
        unit["outputs"] = {**unit["outputs"], **outputs}
        if name == "verify":
            unit.update(status="succeeded", outputs={**unit["outputs"],
                        "reference": "reg.example/ci/paddle@" + outputs["digest"]})
    folder = _install_summary(settings, old)
    before = (folder / "summary.json").read_bytes()
    fakes = Fakes()
    with pytest.raises(PipelineError, match=words):
        run(settings, fakes, resume=True)
    assert fakes.calls == [] and (folder / "summary.json").read_bytes() == before


def test_ctrl_c_does_not_wait_for_a_unit_stuck_in_a_read(settings):
    """Trial 9: with one unit's network read held (promote's registry PUT), Ctrl-C ended
    pipeline.run after 243 s: the stage's thread pool waited for every thread at its exit. The
    run is recorded interrupted at once; the catch site ends a process whose threads hang."""
    release, started = threading.Event(), threading.Event()
    kinds = Fakes().kinds()

    def build(ctx):
        if ctx.variant == "cu126":  # held, as a read that never returns
            started.set()
            release.wait(60)
        else:
            started.wait(20)
            raise KeyboardInterrupt

    kinds["build"] = build
    begun = time.monotonic()
    try:
        with pytest.raises(Interrupted):
            pipeline.run(settings, "pr", given=("cpu", "cu126"), kinds=kinds)
        assert time.monotonic() - begun < 20
    finally:
        release.set()
    assert pipeline.last_run(settings, "pr")[1].status == "interrupted"


def test_a_latest_pointer_that_links_out_is_replaced_not_written_through(settings, tmp_path):
    """Trial 13: ``pipelines/<name>/latest`` replaced by a link to a file outside the state
    folder: the run wrote its id into that file (summary.md the same way)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("victim data")
    folder = settings.state / "pipelines" / "pr"
    folder.mkdir(parents=True)
    (folder / "latest").symlink_to(victim)
    result = run(settings, Fakes(), given=("cpu",))
    assert victim.read_text() == "victim data"
    latest = folder / "latest"
    assert not latest.is_symlink() and latest.read_text().strip() == result.summary.run_id
