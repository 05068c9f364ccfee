"""A flag a command does not use is refused by name, never taken and dropped, and an input is
named for what it is (a re-trial of bad inputs: most of these ran with exit 0, the flag ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError

from support import ROOT, invoke


def settings(tmp_path: Path) -> config.Settings:
    return config.load({"state_dir": str(tmp_path / "state")}, root=ROOT)


def test_promote_reason_without_force(tmp_path):
    from paddlecd.release import promote

    with pytest.raises(ConfigError, match="--reason is for --force"):
        promote.promote(settings(tmp_path), variant="cpu", version="1.4.0", reason="why")


def test_deploy_variant_against_the_release(tmp_path, monkeypatch):
    from paddlecd.deployment import stage
    from paddlecd.release import query

    found = query.Release("1.4.0", "cpu", "sha256:" + "a" * 64,
                          "127.0.0.1:5000/paddlecd/release@sha256:" + "a" * 64)
    monkeypatch.setattr(query, "find", lambda s, release: found)
    with pytest.raises(ConfigError, match="--variant cu126 contradicts --release 1.4.0-cpu"):
        stage.resolve(settings(tmp_path), release="1.4.0-cpu", image=None, variant="cu126")
    assert stage.resolve(settings(tmp_path), release="1.4.0-cpu", image=None,
                         variant="cpu").variant == "cpu"


def test_check_onnx_flags_without_onnx_and_base_ref_on_nightly(tmp_path):
    state = str(tmp_path / "state")
    run = invoke("artifacts.check", "--model", str(tmp_path), "--image", "r@sha256:" + "a" * 64,
                 "--onnx-opset", "13", PADDLECD_STATE_DIR=state)
    assert run.returncode == 2 and "error: --onnx-opset is for --onnx" in run.stderr, run.stderr
    run = invoke("pipeline.run", "nightly", "--base-ref", "HEAD", "--dry-run",
                 PADDLECD_STATE_DIR=state)
    assert run.returncode == 2 and "error: --base-ref is for a pipeline" in run.stderr, run.stderr


def test_evidence_show_names_a_bare_digest_as_one(tmp_path):
    """A re-trial: ``evidence.show sha256:…`` said the digest "names no known variant"."""
    from paddlecd.release import query

    with pytest.raises(ConfigError, match="is a digest without its repository"):
        query.evidence_of(settings(tmp_path), "sha256:" + "a" * 64)


def test_a_bare_variant_is_named_as_a_variant_not_an_unknown_one(tmp_path):
    """A re-trial: ``evidence.show cpu`` said "'cpu' names no known variant" above a hint that
    listed cpu among the variants."""
    from paddlecd.release import query

    with pytest.raises(ConfigError, match="'cpu' is a variant, not a release") as e:
        query.split_release_tag(settings(tmp_path), "cpu")
    assert "1.0.0-cpu" not in e.value.hint and "X.Y.Z-cpu" in e.value.hint
    with pytest.raises(ConfigError, match="names no known variant"):
        query.split_release_tag(settings(tmp_path), "1.0.0-nosuch")


def test_a_build_tag_is_not_called_a_release_with_no_known_variant(tmp_path):
    """Trial 4: ``release.compare -b cpu-5dc125f`` (the candidate's build tag) said "names no
    known variant" above a hint that listed cpu; where an image will do, the hint says so."""
    from paddlecd.release import query

    with pytest.raises(ConfigError, match=r"^'cpu-5dc125f' is not a release \(X.Y.Z-<variant>\)$"):
        query.split_release_tag(settings(tmp_path), "cpu-5dc125f")
    with pytest.raises(ConfigError) as e:
        query.evidence_of(settings(tmp_path), "cpu-5dc125f")
    # never a bare sha256:… (trial 13: the hint offered one, which the task refuses)
    assert e.value.hint.endswith("or an image: host/repo@sha256:… or host/repo:tag")


def test_a_broken_docker_config_met_while_resolving_a_release_gets_no_image_hint(
        tmp_path, monkeypatch):
    """Trial 6: ``release.compare -a 1.0.0-cpu`` with a truncated ``config.json`` named the file,
    then hinted "or an image: …" as if the release name were the slip; an image reference reads
    the same broken file. The hint is the file's own."""
    from paddlecd.release import query

    (tmp_path / "dc").mkdir()
    (tmp_path / "dc" / "config.json").write_text('{"auths":')
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "dc"))
    with pytest.raises(ConfigError, match=r"config\.json") as e:
        query.evidence_of(settings(tmp_path), "1.0.0-cpu")
    assert "or an image" not in e.value.hint
