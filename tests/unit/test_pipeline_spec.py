"""Pipeline files: the shipped ones load, bad ones are refused with one line and a hint (issue
6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError, PipelineError
from paddlecd.pipeline import runner as pipeline
from paddlecd.pipeline import spec as pipeline_spec
from paddlecd.pipeline import stages

PATH = Path("pipelines/test.yaml")


def parse(stages, **top):
    return pipeline_spec.parse({"schema": 1, "stages": stages, **top}, PATH, "test")


def test_shipped_pipelines_load_in_order(settings):
    assert pipeline_spec.names(settings) == ["nightly", "pr", "release"]
    order = {
        n: [s.kind for s in pipeline_spec.load(settings, n).stages]
        for n in pipeline_spec.names(settings)
    }
    assert order["pr"] == ["lock-check", "build", "push", "verify"]
    assert order["nightly"] == ["lock-check", "build", "push", "verify"]
    assert order["release"] == ["promote", "deploy", "upload", "check"]
    nightly = pipeline_spec.load(settings, "nightly")
    assert nightly.variants == "all" and nightly.stages[1].params == {"no_cache": True}
    assert nightly.stages[1].parallel == 2


def test_unknown_pipeline_names_the_known_ones(settings):
    with pytest.raises(PipelineError) as e:
        pipeline_spec.load(settings, "nightlyy")
    assert (
        "unknown pipeline 'nightlyy'" in e.value.cause and "did you mean 'nightly'" in e.value.hint
    )


@pytest.mark.parametrize("name", ["../images/variants", "pr.yaml", "/etc/passwd"])
def test_a_path_given_as_a_pipeline_name_is_called_a_path(settings, name):
    """Trial 7: ``pipeline.run ../images/variants`` said "no pipelines/../images/variants.yaml",
    a file that exists: the reason given was false."""
    with pytest.raises(PipelineError) as e:
        pipeline_spec.load(settings, name)
    assert e.value.cause == (f"unknown pipeline '{name}' (a pipeline is named by its file in "
                             "pipelines/, without a path or .yaml)")


def test_unknown_stage_kind_with_did_you_mean():
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "lock-check"}, {"stage": "biuld"}])
    assert e.value.cause == f"{PATH}: unknown stage 'biuld' at stages[1].stage"
    assert e.value.hint.startswith("did you mean 'build'?")


@pytest.mark.parametrize(("stage_list", "top", "cause", "hint"), [
    # trial 20: each was jsonschema's "is not valid under any of the given schemas", no cause
    ([{"stage": "build"}], {"variants": "chnaged"}, "unknown variants 'chnaged' at variants",
     "did you mean 'changed'?"),
    ([{"stage": "build"}], {"variants": ["cpu", "cpu"]}, "variants lists the text 'cpu' twice",
     "list each once"),
    ([{"stage": "build"}], {"variants": 5},
     "variants is the number 5, not one of: changed, all, one or a list", "see "),
    # and "stages: [] should be non-empty", "stages: None is not of type 'array'"
    ([], {}, "stages is an empty list: give at least 1", "see "),
    (None, {}, "stages is null, not a list", "see "),
])
def test_a_wrong_value_is_named_by_its_cause_in_the_files_words(stage_list, top, cause, hint):
    with pytest.raises(PipelineError) as e:
        parse(stage_list, **top)
    assert e.value.cause == f"{PATH}: {cause}" and e.value.hint.startswith(hint)


def test_unknown_key_at_top_level_and_in_a_stage():
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "build"}], varients="all")
    assert "unknown key 'varients'" in e.value.cause and e.value.hint == "did you mean 'variants'?"
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "build", "paralel": 2}])
    assert (
        "unknown key 'paralel' at stages[0]" in e.value.cause
        and e.value.hint == "did you mean 'parallel'?"
    )


def test_unknown_stage_parameter_is_checked_per_kind():
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "build", "with": {"no_cahce": True}}])
    assert (
        "unknown key 'no_cahce' at stages[0].with" in e.value.cause and "no_cache" in e.value.hint
    )
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "verify", "with": {"no_cache": True}}])
    assert "unknown key 'no_cache'" in e.value.cause and "takes no parameters" in e.value.hint
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "deploy", "with": {"nodes": 2}}])
    assert "'job' is a required property" in e.value.cause


def test_duplicate_stage_is_refused_with_a_rename_hint():
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "build"}, {"stage": "push"}, {"stage": "build"}])
    assert (
        e.value.cause == f"{PATH}: duplicate stage 'build' (stages[2])"
        and "name: build-2" in e.value.hint
    )
    ok = parse([{"stage": "build"}, {"stage": "build", "name": "build-again"}])
    assert [s.name for s in ok.stages] == ["build", "build-again"]


def test_cycle_through_needs_is_refused():
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "build", "needs": ["verify"]}, {"stage": "push", "needs": ["build"]},
               {"stage": "verify", "needs": ["push"]}])
    assert "stages form a cycle" in e.value.cause
    assert all(n in e.value.cause for n in ("build", "push", "verify")) and "needs" in e.value.hint


def test_needs_on_unknown_stage():
    with pytest.raises(PipelineError) as e:
        parse([{"stage": "build"}, {"stage": "push", "needs": ["biuld"]}])
    assert (
        "needs unknown stage 'biuld'" in e.value.cause and e.value.hint == "did you mean 'build'?"
    )


def test_needs_reorders_and_default_is_the_stage_listed_before():
    p = parse([{"stage": "lock-check"}, {"stage": "build"}, {"stage": "verify", "needs": ["push"]},
               {"stage": "push", "needs": ["build"]}])
    assert [s.name for s in p.stages] == ["lock-check", "build", "push", "verify"]
    with pytest.raises(
        PipelineError
    ):  # listed first with no needs, lock-check would follow verify: a cycle
        parse([{"stage": "verify", "needs": ["push"]}, {"stage": "lock-check"}, {"stage": "push"}])


def test_malformed_yaml_names_the_line(settings, tmp_path):
    bad = tmp_path / "pipelines" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text("schema: 1\nstages:\n  - stage: build\n   - stage: push\n")
    s = config.load({}, root=tmp_path, environ={})
    with pytest.raises(PipelineError) as e:
        pipeline_spec.load(s, "bad")
    assert "not valid YAML (line 4)" in e.value.cause


def test_unknown_variant_listed_in_a_pipeline_file(settings):
    p = parse([{"stage": "build"}], variants=["cpu", "cu127"])
    with pytest.raises(PipelineError) as e:
        pipeline.select(settings, p)
    assert "unknown variant 'cu127'" in e.value.cause and str(PATH) in e.value.cause
    assert "did you mean" in e.value.hint


def test_unknown_variant_on_the_command_line(settings):
    with pytest.raises(ConfigError) as e:
        pipeline.select(settings, pipeline_spec.load(settings, "pr"), ("cu999",))
    assert "unknown variant 'cu999'" in e.value.cause


def test_variant_selection_policies(settings):
    pr, nightly = pipeline_spec.load(settings, "pr"), pipeline_spec.load(settings, "nightly")
    assert pipeline.select(settings, pr).variants == ("cpu",)  # local run, no base ref
    assert pipeline.select(settings, pr, ("cu126",)).variants == ("cu126",)
    assert pipeline.select(settings, nightly).variants == ("cpu", "cu118", "cu126", "cu120-p261")
    assert pipeline.select(settings, nightly, ("cpu",)).variants == ("cpu",)


@pytest.mark.parametrize(
    "stage_list,fragment",
    [
        (
            [{"stage": "deploy", "with": {"job": "examples/train.yaml"}}],
            "needs a promote stage before it",
        ),
        ([{"stage": "promote"}, {"stage": "deploy"}], "'with' is a required property"),
        (
            [
                {"stage": "promote"},
                {"stage": "deploy", "with": {"job": "j.yaml"}},
                {"stage": "upload"},
            ],
            "'with' is a required property",
        ),
        ([{"stage": "push"}], "needs a build stage before it"),
    ],
)
def test_stage_inputs_are_checked_before_anything_runs(stage_list, fragment):
    with pytest.raises(PipelineError) as e:
        parse(stage_list)
    assert fragment in e.value.cause


def test_the_kind_registry_is_complete():
    """Every kind shows only outputs it declares, and needs/reads name kinds that exist."""
    for kind in stages.KINDS.values():
        assert set(kind.key_outputs) <= set(kind.outputs), kind.name
        assert set(kind.needs) | set(kind.reads) <= set(stages.KINDS), kind.name
        assert kind.changes in (None, "registry", "cluster", "bucket"), kind.name
    stage = pipeline_spec.schema()["$defs"]["stage"]
    assert stage["properties"]["stage"]["enum"] == list(stages.KINDS)


def test_a_kind_is_added_in_one_place(settings, monkeypatch):
    """One registry entry makes a kind known to the schema (its `with:` too), the input check and
    the plan: nothing else is edited."""
    scan = stages.Kind(name="scan", run=lambda ctx: None, changes="registry", outputs=("report",),
                       key_outputs=("report",), needs=("push",),
                       params={"type": "object", "additionalProperties": False,
                               "properties": {"level": {"type": "integer"}}})
    monkeypatch.setitem(stages.KINDS, "scan", scan)
    pdef = parse([{"stage": "build"}, {"stage": "push"}, {"stage": "scan", "with": {"level": 2}}])
    assert [s.kind for s in pdef.stages] == ["build", "push", "scan"]
    with pytest.raises(PipelineError, match="unknown key 'levle' at stages\\[2\\].with"):
        parse([{"stage": "build"}, {"stage": "push"}, {"stage": "scan", "with": {"levle": 2}}])
    with pytest.raises(PipelineError, match="stage 'scan' \\(scan\\) needs a push stage before it"):
        parse([{"stage": "build"}, {"stage": "scan"}])
    lines = pipeline.plan_lines(pdef, pipeline.Selection(("cpu",), "--variant"), settings)
    assert "changes the registry" in lines[3] and "level=2" in lines[3]


def test_an_input_comes_from_the_stage_needed_not_the_last_of_its_kind():
    pdef = parse([{"stage": "build"}, {"stage": "push", "name": "push-a"},
                  {"stage": "push", "name": "push-b"}, {"stage": "verify", "needs": ["push-a"]}])
    verify = pdef.stages[-1]
    assert pipeline_spec.supplier(pdef.stages, verify, "push").name == "push-a"
    push_b = pdef.stages[2]
    assert pipeline_spec.supplier(pdef.stages, push_b, "push").name == "push-a"  # listed before
    assert pipeline_spec.supplier(pdef.stages, verify, "promote") is None


def test_a_pipeline_file_that_links_out_of_pipelines_is_refused_unread(tmp_path):
    # issue 21 trial: pipelines/x.yaml -> /etc/passwd was read, and its lines quoted in the error
    (tmp_path / "pipelines").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash:0:0\n")
    (tmp_path / "pipelines" / "x.yaml").symlink_to(secret)
    s = config.load({}, root=tmp_path, environ={})
    with pytest.raises(PipelineError, match=r"x.yaml is a symlink to .*secret.txt, outside") as e:
        pipeline_spec.load(s, "x")
    assert "hash" not in e.value.cause + (e.value.hint or "")


def test_a_name_no_file_can_have_is_an_unknown_pipeline(settings):
    """Trial 9: a 100,000-character name was "File name too long" (exit 2, hint "check the
    path"); every other unknown name is a PipelineError (exit 10)."""
    with pytest.raises(PipelineError) as e:
        pipeline_spec.load(settings, "p" * 100_000)
    assert e.value.cause == (f"unknown pipeline '{'p' * 80}' (100000 characters: a pipeline "
                             "name is at most 200)")


def _project(tmp_path, stage_list) -> config.Settings:
    import shutil

    import yaml

    from support import ROOT

    (tmp_path / "pipelines").mkdir()
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "train.yaml", tmp_path / "examples" / "train.yaml")
    (tmp_path / "pipelines" / "t.yaml").write_text(yaml.safe_dump({"schema": 1,
                                                                   "stages": stage_list}))
    return config.load({}, root=tmp_path, environ={})


RELEASE = [{"stage": "promote"}]
DEPLOY = {"stage": "deploy", "with": {"job": "examples/train.yaml", "nodes": 2,
                                      "cluster": "local"}}


@pytest.mark.parametrize(("deploy", "upload", "fragment"), [
    ({"job": ""}, None, "job"),  # schema: an empty path was the project's root folder
    ({"job": "/etc/passwd"}, None, "stage 'deploy' (deploy): "),
    ({"job": "../../../etc/passwd"}, None, "stage 'deploy' (deploy): "),
    ({"job": "examples/absent.yaml"}, None, "stage 'deploy' (deploy): "),
    ({"nodes": 99999}, None, "stage 'deploy' (deploy): --nodes 99999 is outside 1..512"),
    ({"nodes": 65}, None, "--nodes 65: --cluster local starts one container per node"),
    ({}, {"name": "../x"}, "stage 'upload' (upload): invalid model name '../x'"),
    ({}, {"name": ""}, "name"),
    ({}, {"name": "m", "to": "ftp://x/y"}, "stage 'upload' (upload): "),
    # trial 13: each passed the dry run; artifacts.check refuses each flag
    ({}, {"name": "m", "check": {"batch": 1000000000}}, "batch"),
    ({}, {"name": "m", "check": {"rtol": float("nan")}}, "rtol"),
    ({}, {"name": "m", "check": {"atol": float("inf")}}, "atol"),
    ({}, {"name": "m", "check": {"onnx_opset": 13}},
     "stage 'check' (check): with.onnx_opset is for onnx: true"),
    ({}, {"name": "m", "check": {"image": "not an image!"}}, "stage 'check' (check): with.image"),
    ({}, {"name": "m", "check": {"image": "repo@sha256:abc"}}, "stage 'check' (check): "),
    ({}, {"name": "m", "check": {"image": "reg:5000/Bad/Repo:1"}}, "stage 'check' (check): "),
])
def test_stage_parameters_are_checked_as_their_tasks_check_them_before_any_stage(
        tmp_path, deploy, upload, fragment):
    """Trial 11: ``job: ''``, ``job: /etc/passwd``, ``nodes: 99999`` and ``name: ../x`` passed
    the pipeline's schema and its --dry-run (exit 0); the real run promoted first, then failed
    at deploy naming the project's root folder. They are refused when the file is loaded."""
    stage_list = [*RELEASE, {**DEPLOY, "with": {**DEPLOY["with"], **deploy}}]
    if upload is not None:
        check = upload.pop("check", None)
        stage_list.append({"stage": "upload", "with": upload})
        if check is not None:
            stage_list.append({"stage": "check", "with": check})
    s = _project(tmp_path, stage_list)
    with pytest.raises(PipelineError, match=re.escape(fragment)) as e:
        pipeline_spec.load(s, "t")
    assert "pipelines/t.yaml" in e.value.cause


def test_a_pipeline_with_good_stage_parameters_loads(tmp_path):
    s = _project(tmp_path, [*RELEASE, DEPLOY, {"stage": "upload", "with": {"name": "m"}}])
    assert [st.kind for st in pipeline_spec.load(s, "t").stages] == ["promote", "deploy", "upload"]


@pytest.mark.parametrize("check", [
    {"image": "1.4.0-cpu", "batch": 4096, "rtol": 0.001},
    {"image": "reg:5000/app:1"},
    {"image": "reg:5000/app@sha256:" + "a" * 64, "onnx": True, "onnx_opset": 17},
])
def test_a_check_stage_with_what_artifacts_check_takes_loads(tmp_path, check):
    stage_list = [*RELEASE, DEPLOY, {"stage": "upload", "with": {"name": "m"}},
                  {"stage": "check", "with": check}]
    assert pipeline_spec.load(_project(tmp_path, stage_list), "t").stages[-1].params == check


def test_a_file_whose_name_is_no_pipeline_name_is_named_so(tmp_path):
    """Trial 11: ``pipelines/Bad Name.yaml`` made pipeline.list say "unknown pipeline 'Bad Name'",
    hint "did you mean 'Bad Name'?"."""
    s = _project(tmp_path, RELEASE)
    (tmp_path / "pipelines" / "Bad Name.yaml").write_text("schema: 1\nstages: []\n")
    with pytest.raises(PipelineError) as e:
        for name in pipeline_spec.names(s):
            pipeline_spec.load(s, name)
    assert e.value.cause.endswith("Bad Name.yaml: 'Bad Name' is no pipeline name (lowercase "
                                  "letters, digits, - and _, at most 200, first a letter or "
                                  "digit)")
    assert e.value.hint == "rename the file, e.g. pipelines/bad-name.yaml"


def test_a_deploy_stage_is_checked_against_each_selected_variant(tmp_path):
    """Trial 12: ``gpus_per_node: 1`` in a deploy stage planned for cpu (dry run exit 0), where
    ``invoke deploy --gpus-per-node 1`` on cpu is refused."""
    import shutil

    from support import ROOT

    s = _project(tmp_path, [*RELEASE, {**DEPLOY, "with": {**DEPLOY["with"],
                                                          "cluster": "k8s", "gpus_per_node": 1}}])
    (tmp_path / "images").mkdir()
    shutil.copy(ROOT / "images" / "variants.yaml", tmp_path / "images" / "variants.yaml")
    pdef = pipeline_spec.load(s, "t")
    with pytest.raises(PipelineError, match=r"stage 'deploy' \(deploy\) for cpu: "
                       r"with.gpus_per_node 1: GPUs per node requested on the CPU variant 'cpu'"
                       ) as e:  # trial 19: named as the stage's parameter, not the task's flag
        pipeline_spec.plan_lines(pdef, pipeline_spec.Selection(("cpu",), "--variant"), s)
    assert e.value.hint.startswith("drop with.gpus_per_node, or deploy a GPU release")
    assert pipeline_spec.plan_lines(pdef, pipeline_spec.Selection(("cu126",), "--variant"), s)


def test_a_pipeline_file_that_is_a_dangling_link_is_named_as_one(tmp_path):
    """Trial 21: ``pipelines/x.yaml -> /nonexistent`` was "unknown pipeline 'x'", hint "did you
    mean 'x'?", the broken link never named."""
    s = _project(tmp_path, [{"stage": "build"}])
    link = tmp_path / "pipelines" / "dangle.yaml"
    link.symlink_to("/nonexistent/p.yaml")
    with pytest.raises(PipelineError) as e:
        pipeline_spec.load(s, "dangle")
    assert e.value.cause == (f"{link} is a symbolic link (to /nonexistent/p.yaml), which does "
                             "not exist")
    assert "did you mean" not in e.value.hint
