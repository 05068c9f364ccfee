"""Detecting a paddle.jit.save export folder. Files are stand-ins: only names matter here;
tests/integration uses real exports written by Paddle."""

from __future__ import annotations

import pytest

from paddlecd.artifacts.manifest import find_export
from paddlecd.errors import ConfigError


def _folder(tmp_path, *names):
    tmp_path.mkdir(parents=True, exist_ok=True)
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    return tmp_path


def test_paddle3_export_with_json_program(tmp_path):
    e = find_export(_folder(tmp_path, "inference.json", "inference.pdiparams", "README.md"))
    assert (e.prefix, e.format, e.files) == (
        "inference",
        "paddle-pir-json",
        ("inference.json", "inference.pdiparams"),
    )


def test_paddle2_export_with_info_file(tmp_path):
    e = find_export(_folder(tmp_path, "model.pdmodel", "model.pdiparams", "model.pdiparams.info"))
    assert (e.prefix, e.format) == ("model", "paddle-program")
    assert e.files == ("model.pdmodel", "model.pdiparams", "model.pdiparams.info")


def test_unrelated_json_next_to_a_paddle2_export_is_not_uploaded(tmp_path):
    e = find_export(_folder(tmp_path, "inference.pdmodel", "inference.pdiparams", "config.json"))
    assert e.files == ("inference.pdmodel", "inference.pdiparams")


@pytest.mark.parametrize(
    ("names", "missing"),
    [
        (["inference.json"], "missing inference.pdiparams"),
        (["inference.pdmodel"], "missing inference.pdiparams"),
        (
            ["inference.pdiparams"],
            "missing inference.json (Paddle 3.x) or inference.pdmodel (Paddle 2.x)",
        ),
        (["inference.pdiparams", "other.json"], "missing inference.json"),
    ],
)
def test_incomplete_export_names_what_is_missing(tmp_path, names, missing):
    with pytest.raises(ConfigError, match="incomplete jit.save export") as e:
        find_export(_folder(tmp_path, *names))
    assert missing in e.value.cause and str(tmp_path) in e.value.cause


def test_not_an_export(tmp_path):
    with pytest.raises(
        ConfigError, match=r"is not a paddle.jit.save export: no <prefix>.pdiparams"
    ) as e:
        find_export(_folder(tmp_path, "weights.bin", "a.json", "b.json"))
    assert "paddle.jit.save(" in e.value.hint


def test_several_exports_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="holds several exports: a, b"):
        find_export(_folder(tmp_path, "a.json", "a.pdiparams", "b.pdmodel", "b.pdiparams"))


def test_missing_folder(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        find_export(tmp_path / "nope")


@pytest.mark.parametrize("name", ["model.json", "model.pdiparams"])
def test_a_file_of_the_export_is_named_as_a_file_not_as_missing(tmp_path, name):
    """Trial 4: ``upload --model-dir <export>/model.json`` said the file "does not exist"."""
    _folder(tmp_path, "model.json", "model.pdiparams")
    with pytest.raises(ConfigError) as e:
        find_export(tmp_path / name)
    assert e.value.cause == f"model folder {tmp_path / name} is a file, not a folder"
    assert e.value.hint == (f"pass its folder {tmp_path} (or the prefix {tmp_path / 'model'} "
                            "given to paddle.jit.save)")


def test_a_jit_save_prefix_is_taken_as_its_folder(tmp_path):
    """deploy prints the model as the jit.save prefix (`<output>/model`); upload accepts it too."""
    _folder(tmp_path, "model.json", "model.pdiparams")
    assert find_export(tmp_path / "model").files == ("model.json", "model.pdiparams")


def test_a_symlink_out_of_the_export_folder_is_refused_by_name(tmp_path):
    """The trial's hole: model.pdiparams -> /etc/shadow was uploaded (and stored world-readable)."""
    folder = _folder(tmp_path / "export", "model.json")
    secret = _folder(tmp_path / "elsewhere", "shadow") / "shadow"
    (folder / "model.pdiparams").symlink_to(secret)
    with pytest.raises(ConfigError, match="model.pdiparams is a symlink to .*elsewhere/shadow, "
                       "outside the export folder"):
        find_export(folder)


def test_a_relative_symlink_that_climbs_out_is_refused(tmp_path):
    folder = _folder(tmp_path / "export", "model.json", "model.pdiparams")
    (tmp_path / "ref.npz").write_bytes(b"x")
    (folder / "reference_inputs.npz").symlink_to("../ref.npz")
    with pytest.raises(ConfigError, match="reference_inputs.npz is a symlink to .*outside"):
        find_export(folder)


def test_a_symlink_inside_the_folder_is_read_as_its_target(tmp_path):
    folder = _folder(tmp_path / "export", "model.json")
    _folder(folder / "weights", "v3.pdiparams")
    (folder / "model.pdiparams").symlink_to("weights/v3.pdiparams")
    assert find_export(folder).files == ("model.json", "model.pdiparams")


def test_a_dangling_symlink_is_named_as_a_link_not_as_missing(tmp_path):
    folder = _folder(tmp_path / "export", "model.json")
    (folder / "model.pdiparams").symlink_to("gone.pdiparams")
    with pytest.raises(ConfigError, match="model.pdiparams is a symlink to .*gone.pdiparams, "
                       "which is not a file"):
        find_export(folder)


def test_a_check_record_linked_out_of_the_folder_is_refused(tmp_path):
    folder = _folder(tmp_path / "export", "model.json", "model.pdiparams")
    (folder / "check.json").symlink_to(_folder(tmp_path / "x", "c.json") / "c.json")
    with pytest.raises(ConfigError, match="check.json is a symlink"):
        find_export(folder)


def test_a_named_pipe_as_the_params_file_is_named_as_one(tmp_path):
    """A trial: a FIFO model.pdiparams was reported as "missing model.pdiparams"."""
    import os

    folder = _folder(tmp_path / "export", "model.json")
    os.mkfifo(folder / "model.pdiparams")
    with pytest.raises(ConfigError, match=r"model.pdiparams is not a regular file \(a named pipe"):
        find_export(folder)


def test_no_pir_on_a_pir_program_is_refused_before_any_image_runs(tmp_path):
    """Trial 7: ``artifacts.check --no-pir`` on a Paddle 3 export (model.json) ran the check,
    which failed ("path … not exists"), and stored a failed check.json beside a good model. The
    flag is for 2.x programs: refused by name, nothing run (no registry on 127.0.0.1:9)."""
    from paddlecd import config
    from paddlecd.artifacts import check

    from support import ROOT

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.json").write_bytes(
        (ROOT / "tests/data/artifacts/pir-linear.json").read_bytes())
    (tmp_path / "m" / "model.pdiparams").write_bytes(b"\0" * 64)
    s = config.load({"state_dir": str(tmp_path / "state"), "registry.url": "127.0.0.1:9"},
                    root=ROOT, environ={})
    with pytest.raises(ConfigError, match=r"--no-pir: .* holds a PIR program \(model\.json\)"):
        check.check_folder(s, tmp_path / "m", image="1.0.0-cpu", no_pir=True)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["model.json", "model.pdiparams"]
    # a stored model is named as such, not by the scratch folder it was downloaded to (trial 8)
    with pytest.raises(ConfigError, match=r"^--no-pir: linear-demo 1\.0\.0 holds a PIR program"):
        check.check_folder(s, tmp_path / "m", image="1.0.0-cpu", no_pir=True,
                           name="linear-demo 1.0.0")


def test_a_prefix_whose_parameters_are_gone_names_the_missing_file(tmp_path):
    """Trial 11: with model.pdiparams removed, ``--model-dir <folder>/model`` said "model folder
    … does not exist" (the folder and model.json were there)."""
    _folder(tmp_path, "model.json")
    with pytest.raises(ConfigError, match="incomplete jit.save export: missing model.pdiparams"):
        find_export(tmp_path / "model")


@pytest.mark.parametrize("empty", ["model.pdiparams", "model.json"])
def test_an_empty_file_of_the_export_is_refused(tmp_path, empty):
    """Trial 11: a 0-byte model.pdiparams was stored and signed (exit 0); the model check then
    failed in the image ("Cannot read tensor desc size"). paddle.jit.save writes no .pdiparams
    for a model without parameters (Paddle 3.0: "no variable in your model")."""
    _folder(tmp_path, "model.json", "model.pdiparams")
    (tmp_path / empty).write_bytes(b"")
    with pytest.raises(ConfigError, match=rf"{empty} is empty \(0 bytes\)"):
        find_export(tmp_path)


def test_an_export_with_both_program_forms_is_refused(tmp_path):
    """Trial 17: model.json and model.pdmodel beside one model.pdiparams were both stored as a
    paddle-pir-json export, the .pdmodel never checked."""
    with pytest.raises(ConfigError) as e:
        find_export(_folder(tmp_path, "model.json", "model.pdmodel", "model.pdiparams"))
    assert e.value.cause == (f"{tmp_path} holds both model.json (Paddle 3.x) and model.pdmodel "
                             "(Paddle 2.x): one jit.save writes one of them")
