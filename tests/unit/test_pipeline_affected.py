"""Which variants a change touches: the rules on file lists, and on a real git
repository."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from paddlecd import config
from paddlecd.errors import ConfigError
from paddlecd.pipeline import affected
from paddlecd.pipeline import runner as pipeline
from paddlecd.pipeline import spec as pipeline_spec

from support import ROOT

VARIANTS = yaml.safe_load((ROOT / "images/variants.yaml").read_text())["variants"]
ALL = list(VARIANTS)


def touched(files, before=None, lock_now=None, lock_before=None):
    return affected.touched(
        files,
        variants_now=VARIANTS,
        variants_before=VARIANTS if before is None else before,
        lock_now=lock_now,
        lock_before=lock_before,
    )


@pytest.mark.parametrize(
    "path",
    [
        "images/Dockerfile",
        "smoke/test_export.py",
        "smoke/workers/allreduce.py",
        "images/.dockerignore",
    ],
)
def test_shared_files_touch_every_variant(path):
    assert touched(["README.md", path]) == ALL


def test_code_and_docs_touch_no_variant():
    assert (
        touched(
            ["src/paddlecd/builder.py", "README.md", "tests/unit/test_changes.py", "smokey.txt"]
        )
        == []
    )


def test_base_dockerfile_touches_bootstrapped_variants():
    assert touched(["images/base/Dockerfile.cpu"]) == ["cpu"]


def test_a_changed_variants_entry_touches_that_variant_only():
    before = {**VARIANTS, "cu126": {**VARIANTS["cu126"], "description": "old text"}}
    assert touched(["images/variants.yaml"], before=before) == ["cu126"]


def test_a_new_variant_is_touched():
    before = {k: v for k, v in VARIANTS.items() if k != "cu118"}
    assert touched(["images/variants.yaml"], before=before) == ["cu118"]


def test_a_moved_lock_entry_touches_that_variant():
    now = {"cpu": {"digest": "sha256:" + "a" * 64}, "cu118": {"digest": "sha256:" + "b" * 64}}
    before = {"cpu": {"digest": "sha256:" + "a" * 64}, "cu118": {"digest": "sha256:" + "c" * 64}}
    assert touched(["images/lock.yaml"], lock_now=now, lock_before=before) == ["cu118"]


def test_own_dockerfile_of_a_variant():
    variants = {**VARIANTS, "cu126": {**VARIANTS["cu126"], "dockerfile": "Dockerfile.trt"}}
    assert affected.touched(
        ["images/Dockerfile.trt"], variants_now=variants, variants_before=variants
    ) == ["cu126"]


@pytest.fixture
def repo(tmp_path):
    """A git repository holding a copy of images/ and smoke/, one commit on branch main."""
    shutil.copytree(
        ROOT / "images", tmp_path / "images", ignore=shutil.ignore_patterns("lock.yaml")
    )
    shutil.copytree(
        ROOT / "smoke", tmp_path / "smoke", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "pipelines", tmp_path / "pipelines")

    def git(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "empty")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "base")
    git("checkout", "-q", "-b", "change")
    return tmp_path


def test_select_on_a_real_repository(repo):
    s = config.load({}, root=repo, environ={})
    assert affected.select(s, "main") == []
    text = (
        (repo / "images/variants.yaml")
        .read_text()
        .replace("Paddle 2.6.1, CUDA 12.0", "Paddle 2.6.1 on CUDA 12.0")
    )
    (repo / "images/variants.yaml").write_text(text)  # uncommitted edits count too
    assert affected.select(s, "main") == ["cu120-p261"]
    (repo / "smoke" / "test_new.py").write_text("def test_x():\n    pass\n")  # untracked too
    assert affected.select(s, "main") == ALL
    pr = pipeline_spec.load(s, "pr")
    sel = pipeline.select(s, pr, base_ref="main")
    assert sel.variants == tuple(ALL) and "since main" in sel.why


def test_unknown_base_ref_is_a_clear_error(repo):
    s = config.load({}, root=repo, environ={})
    with pytest.raises(ConfigError) as e:
        affected.select(s, "origin/nope")
    assert "base ref 'origin/nope'" in e.value.cause and "fetch-depth: 0" in e.value.hint


@pytest.mark.parametrize("ref", ["--independent", "--octopus", "--upload-pack=touch /tmp/x",
                                 "-q"])
def test_an_option_shaped_base_ref_never_reaches_git_as_an_option(repo, ref):
    """Trial 13: ``--base-ref=--independent`` made merge-base print HEAD, so a PR pipeline
    diffed the change against itself, ran nothing and passed; ``--upload-pack=…`` reached git
    as an option (git printed its usage)."""
    s = config.load({}, root=repo, environ={})
    with pytest.raises(ConfigError) as e:
        affected.select(s, ref)
    assert "starts with '-': no git ref can" in e.value.cause and "--base-ref" in e.value.hint


def test_a_base_ref_that_names_no_commit_is_refused(repo):
    """A tree or a blob names no commit to fork from (rev-parse ^{commit})."""
    s = config.load({}, root=repo, environ={})
    with pytest.raises(ConfigError, match="base ref 'main:images'"):
        affected.select(s, "main:images")
    assert affected.merge_base(s, "main") == subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "main"], capture_output=True, text=True,
        check=True).stdout.strip()
