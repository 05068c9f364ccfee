"""``verify --nodes``: one collective job, two checks, each judged from its part of rank 0's
collective.json (smoke/workers/collective.py rewrites it after each part) — including the parts
a failed job never reached. The local executor is replaced here (it needs an engine:
tests/integration/test_verify_nodes.py runs it for real); the Kubernetes path's failures are in
tests/unit/test_verify_nodes_k8s.py."""

from __future__ import annotations

import ast
import json

import pytest
from test_verify_nodes_k8s import ALLREDUCE, COLLECTIVE, IMAGE

from paddlecd.cluster import local
from paddlecd.cluster.render import Target
from paddlecd.errors import ClusterError
from paddlecd.verify import nodes as multinode

from support import ROOT, project_settings

NAMES = list(multinode.WORKERS.values())
CAUSE = "rank 1 (container verify-collective-x-1) exited 1\nsee <out>/logs/collective/rank-1.log"


def test_the_checks_follow_the_parts_of_collective_py_in_order():
    """judge_parts reads rank 0's document by these keys, and "not run" relies on their order."""
    tree = ast.parse((ROOT / "smoke" / "workers" / "collective.py").read_text())
    (parts,) = [n.value for n in tree.body if isinstance(n, ast.Assign)
                and [t.id for t in n.targets] == ["PARTS"]]
    assert [k.value for k in parts.keys] == list(multinode.WORKERS)


def judged(result, failure=None):
    return multinode.judge_parts(result, failure=failure, world_size=2, duration_s=12.5)


def test_both_parts_are_judged_and_the_first_check_carries_the_jobs_time():
    allreduce, dp = judged(COLLECTIVE)
    assert [allreduce.name, dp.name] == NAMES and allreduce.passed and dp.passed
    assert allreduce.metrics["world_size"] == 2 and dp.metrics["relative_difference"] == 0.0
    assert (allreduce.duration_s, dp.duration_s) == (12.5, 0.0)  # one job: not timed apart


def test_a_job_that_failed_in_training_keeps_the_allreduce_result():
    allreduce, dp = judged({"allreduce": ALLREDUCE}, CAUSE)
    assert allreduce.passed and allreduce.metrics["busbw_GBps_largest"] > 0
    assert not dp.passed and dp.message == f"the job failed after its allreduce part: {CAUSE}"


def test_a_job_that_failed_before_anything_fails_both_checks_the_first_with_the_cause():
    allreduce, dp = judged({}, CAUSE)
    assert not allreduce.passed and allreduce.message == CAUSE  # the executor's cause, as is
    assert not dp.passed and dp.message == (
        "not run: the job failed before its train_dp part; the cause is on "
        "allreduce/test_allreduce_exact_sums")


def test_a_job_that_failed_after_every_part_fails_the_last_check_keeping_its_metrics():
    allreduce, dp = judged(COLLECTIVE, CAUSE)
    assert allreduce.passed
    assert not dp.passed and dp.message == f"the job failed after its last part reported: {CAUSE}"
    assert dp.metrics["relative_difference"] == 0.0
    diverged = {**COLLECTIVE, "train_dp": {**COLLECTIVE["train_dp"], "single_losses": [1, 0.5, 1]}}
    _, wrong = judged(diverged, CAUSE)  # the judge's problem first, then the job's
    assert wrong.message.startswith("data-parallel loss 0.0101000 vs single 1.0000000")
    assert wrong.message.endswith(f"; the job failed after its last part reported: {CAUSE}")


def test_a_job_that_succeeded_without_a_result_says_rank_0_wrote_none():
    allreduce, dp = judged({})
    assert not allreduce.passed and "rank 0 wrote no 'allreduce' part to collective.json" in (
        allreduce.message)
    assert not dp.passed and dp.message.startswith("not run: ")


@pytest.mark.parametrize("written, passed", [({}, [False, False]),
                                             ({"allreduce": ALLREDUCE}, [True, False])])
def test_run_local_is_one_job_judged_from_what_rank_0_wrote(tmp_path, monkeypatch, written,
                                                            passed):
    """One call of the executor for both checks, on collective.py, logs under logs/collective;
    a job the executor fails keeps the part rank 0 wrote before it failed."""
    out = tmp_path / "out"
    calls = []

    def fake_run(spec, target, **kw):
        calls.append((spec.name, spec.script, spec.args[:2], kw["logs"]))
        if written:
            (out / "collective.json").write_text(json.dumps(written))
        raise ClusterError(CAUSE.split("\n")[0], CAUSE.split("\n")[1])

    monkeypatch.setattr(local, "run", fake_run)
    out.mkdir()
    (out / "collective.json").write_text(json.dumps(COLLECTIVE))  # an earlier run's: cleared
    ran = multinode.run_local(project_settings(tmp_path / "state"), Target(IMAGE, "cpu"), nodes=2,
                              gpus_per_node=0, out=out, on_line=lambda _: None)
    assert calls == [("verify-collective", "/smoke/workers/collective.py",
                      ("--out", "/out/collective.json"), out / "logs" / "collective")]
    assert [c.name for c in ran.checks] == NAMES and [c.passed for c in ran.checks] == passed
    if written:  # the executor's cause on the check of the part rank 0 did not write
        assert ran.checks[1].message == f"the job failed after its allreduce part: {CAUSE}"
    else:
        assert ran.checks[0].message == CAUSE
