"""Output folders written whole beside their target, then renamed (files.staging_folder,
files.publish_folder): errors name the target the user gave, never paddlecd's temp folder.

Trial 10: ``cluster.render --out`` and ``artifacts.download`` into a read-only folder said
"Read-only file system: /tmp/ro/.r.zbw3m48r.render"; the second of two downloads into one
folder printed the raw "Directory not empty" of its rename. No services.
"""

from __future__ import annotations

import errno
import tempfile
import types

import pytest
import yaml

from paddlecd import files
from paddlecd.errors import ConfigError


def test_a_folder_that_cannot_be_made_names_the_target(tmp_path, monkeypatch):
    def read_only(*args, dir=None, **kw):  # root writes through chmod: EROFS as a mount gives it
        raise OSError(errno.EROFS, "Read-only file system", f"{dir}/.r.1.abcd.render")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    with pytest.raises(OSError) as e:
        files.staging_folder(tmp_path / "r", ".render")
    assert files.os_error_text(e.value)[0] == f"Read-only file system: {tmp_path / 'r'}"


def test_a_target_filled_meanwhile_is_refused_by_name_and_kept(tmp_path):
    target = tmp_path / "m"
    stage = files.staging_folder(target, ".download")
    (stage / "model.json").write_text("mine")
    target.mkdir()
    (target / "model.json").write_text("theirs")  # the other download won the race
    with pytest.raises(ConfigError, match=f"destination {target} is not an empty folder any "
                                          "more: another run wrote it meanwhile"):
        files.publish_folder(stage, target, "destination")
    assert (target / "model.json").read_text() == "theirs"


def test_render_into_a_folder_another_render_filled_refuses_and_leaves_only_that(tmp_path,
                                                                               monkeypatch):
    from paddlecd import deployment as deploy

    out = tmp_path / "r"
    plan = types.SimpleNamespace(manifests=[{"kind": "Job", "metadata": {"name": "j"}}])
    real = yaml.safe_dump

    def racing(doc, **kw):
        out.mkdir(exist_ok=True)
        (out / "00-job-other.yaml").write_text("kind: Job\n")
        return real(doc, **kw)

    monkeypatch.setattr(yaml, "safe_dump", racing)
    with pytest.raises(ConfigError, match=f"--out {out} is not an empty folder any more"):
        deploy.render_to(plan, out)
    assert [p.name for p in tmp_path.iterdir()] == ["r"]
    assert [p.name for p in out.iterdir()] == ["00-job-other.yaml"]


def test_render_on_a_full_disk_names_the_file_of_out_and_a_df_that_runs(tmp_path, monkeypatch):
    """Trial 21: the error named paddlecd's staging file (removed), and its df hint failed."""
    import errno

    from paddlecd import deployment as deploy

    def full(path, text, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(files, "write_text", full)
    out = tmp_path / "r"
    plan = types.SimpleNamespace(manifests=[{"kind": "Job", "metadata": {"name": "j"}}])
    with pytest.raises(OSError) as e:
        deploy.render_to(plan, out)
    assert e.value.filename == str(out / "00-job-j.yaml")
    assert files.os_error_text(e.value)[1] == f"free space there (df -h {tmp_path}), then re-run"
    assert list(tmp_path.iterdir()) == []


def test_render_onto_a_file_names_it_a_file_and_keeps_it(tmp_path):
    """Trial 11: ``cluster.render --out <a file>`` said "is not an empty folder"."""
    from paddlecd import deployment as deploy

    out = tmp_path / "precious"
    out.write_text("precious")
    plan = types.SimpleNamespace(manifests=[{"kind": "Job", "metadata": {"name": "j"}}])
    with pytest.raises(ConfigError, match=f"--out {out} is a file, not a folder"):
        deploy.render_to(plan, out)
    assert out.read_text() == "precious"


@pytest.mark.parametrize("name", ["r\x01x", "p\x1bx.yaml", "k\nx"])
def test_an_output_path_with_a_control_character_is_refused(tmp_path, name):
    """Trial 12: release.policy --out $'/tmp/p\\x1bx.yaml', evidence.keygen and cluster.render
    made the file and printed the path raw (the ESC reached the terminal)."""
    from paddlecd.signing import keys

    with pytest.raises(ConfigError, match="holds the control character"):
        files.refuse_output_place(tmp_path / name, "--out", folder=True)
    with pytest.raises(ConfigError, match="holds the control character"):
        keys.keygen(tmp_path / name)
    assert list(tmp_path.iterdir()) == []
