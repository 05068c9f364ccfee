"""A named pipe, a folder or a missing file where paddlecd reads a file is named at once.

Trial 9: push, promote, release.list, upload and cluster.render hung for good on a FIFO signing
key, trusted key, Docker config.json, kubeconfig, registry CA file, candidate or build record (a
read of a FIFO waits for a writer); a state key that became a FIFO or a folder was taken for
absent, so signing silently stopped; a configured build.ca_bundle that was missing, a folder, a
FIFO or no PEM was silently replaced by the system bundle; a FIFO ``model.pdiparams.info`` or
``reference_outputs.npz`` was silently left out of an upload. Each test runs under a 20 s
timeout: a regression hangs, then fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paddlecd.errors import ClusterError, ConfigError, SigningKeyError

from support import ROOT, project_settings

pytestmark = pytest.mark.timeout(20)


@pytest.fixture(params=["fifo", "folder"])
def odd(request, tmp_path) -> tuple[str, callable]:
    """A maker of the odd thing at a path: a named pipe, or a folder."""
    def make(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path) if request.param == "fifo" else path.mkdir()
        return path
    return ("a named pipe" if request.param == "fifo" else "a folder"), make


def test_a_signing_key_file_that_is_no_file(tmp_path, odd):
    from paddlecd.signing import keys

    kind, make = odd
    key = make(tmp_path / "k.key")
    s = project_settings(tmp_path / "state", **{"verify.signing_key": str(key)})
    with pytest.raises(SigningKeyError, match=f"{key} is {kind}, not a regular file"):
        keys.signer(s)


def test_the_state_folders_key_that_became_no_file_is_not_taken_for_absent(tmp_path, odd):
    from paddlecd.signing import keys

    kind, make = odd
    s = project_settings(tmp_path / "state")
    private, public = keys.state_pair(s)
    make(private)
    for call in (keys.configured, keys.signer):
        with pytest.raises(SigningKeyError, match=f"state folder's pair\\) {private} is {kind}"):
            call(s)
    make(public)
    with pytest.raises(SigningKeyError, match=f"{public} is {kind}"):
        keys.trusted(s)


def test_a_trusted_key_that_is_a_named_pipe(tmp_path):
    from paddlecd.signing import keys

    folder = tmp_path / "trusted"
    folder.mkdir()
    os.mkfifo(folder / "ci.pub")
    for given in (folder, folder / "ci.pub"):
        s = project_settings(tmp_path / "state", **{"release.trusted_keys": str(given)})
        with pytest.raises(SigningKeyError, match="ci.pub is a named pipe, not a regular file"):
            keys.trusted(s)


def test_a_docker_config_that_is_a_named_pipe(tmp_path, monkeypatch):
    from paddlecd.registry import auth

    os.mkfifo(tmp_path / "config.json")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    with pytest.raises(ConfigError, match="Docker config .*config.json is a named pipe"):
        auth.docker_config()


def test_a_kubeconfig_that_is_a_named_pipe(tmp_path, monkeypatch):
    from paddlecd.cluster import k8s

    os.mkfifo(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    wrong = k8s._shape_problem()
    assert isinstance(wrong, ClusterError) and "kubeconfig" in wrong.cause
    assert "is a named pipe, not a regular file" in wrong.cause


def test_a_registry_ca_file_that_is_a_named_pipe(tmp_path):
    from paddlecd.registry.transport import Transport

    os.mkfifo(tmp_path / "ca.pem")
    with pytest.raises(ConfigError, match="registry CA file .*ca.pem is a named pipe"):
        Transport("127.0.0.1:9", ca_file=str(tmp_path / "ca.pem"))
    Transport("127.0.0.1:9", ca_file=str(tmp_path / "ca.pem"), insecure=True)  # not read: http


def test_state_records_that_are_no_files(tmp_path, odd):
    from paddlecd.image import candidate, provenance

    kind, make = odd
    s = project_settings(tmp_path / "state")
    make(candidate.candidate_path(s, "cpu"))
    with pytest.raises(ConfigError, match=f"candidate record .*cpu.json is {kind}"):
        candidate.load_candidate(s, "cpu")
    make(s.state / "builds" / "cpu.json")
    with pytest.raises(ConfigError, match=f"build record .*cpu.json is {kind}"):
        provenance.read_build(s, "cpu")


@pytest.mark.parametrize("shape", ["missing", "folder", "fifo", "no PEM"])
def test_a_configured_build_ca_bundle_is_used_or_refused_never_replaced(tmp_path, shape):
    from paddlecd.image import build

    path = tmp_path / "ca.pem"
    if shape == "folder":
        path.mkdir()
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "no PEM":
        path.write_text("precious\n")
    s = project_settings(tmp_path / "state", **{"build.ca_bundle": str(path)})
    with pytest.raises(ConfigError, match=r"CA bundle \(build.ca_bundle\)") as e:
        build.ca_bundle(s)
    assert {"missing": "does not exist", "folder": "is a folder", "fifo": "is a named pipe",
            "no PEM": "holds no PEM certificate"}[shape] in e.value.cause
    path = tmp_path / "good.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    good = project_settings(tmp_path / "state", **{"build.ca_bundle": str(path)})
    assert build.ca_bundle(good) == str(path)


@pytest.mark.parametrize("name", ["model.pdiparams.info", "reference_outputs.npz"])
def test_an_export_file_that_is_a_named_pipe_is_named_not_left_out(tmp_path, name):
    from paddlecd.artifacts import manifest

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.json").write_bytes(
        (ROOT / "tests/data/artifacts/pir-linear.json").read_bytes())
    (folder / "model.pdiparams").write_bytes(b"\0" * 64)
    (folder / "reference_inputs.npz").write_bytes(b"PK")
    os.mkfifo(folder / name)
    with pytest.raises(ConfigError, match=f"{name} is not a regular file \\(a named pipe\\)"):
        manifest.find_export(folder)


@pytest.mark.parametrize("name", ["manifest.json", "model.sig", "check.json"])
def test_a_named_pipe_inside_a_file_store_is_named_not_opened(tmp_path, name):
    """Trial 10: a FIFO manifest.json, model.sig or check.json in a file:// store made
    artifacts.list, show and download hang for good."""
    from paddlecd.artifacts import transfer as arts
    from paddlecd.artifacts.storage.file import FileStore
    from paddlecd.errors import StorageError

    folder = tmp_path / "store" / "m" / "1.0.0"
    folder.mkdir(parents=True)
    (folder / "model.pdiparams").write_bytes(b"\0")
    os.mkfifo(folder / name)
    store = FileStore(tmp_path / "store")
    with pytest.raises(StorageError, match=f"m/1.0.0/{name} is a named pipe, not a stored file"):
        store.get_bytes(f"m/1.0.0/{name}")
    with pytest.raises(StorageError, match="is a named pipe"):
        store.sha256(f"m/1.0.0/{name}")
    if name == "manifest.json":
        with pytest.raises(StorageError, match="is a named pipe"):
            arts.list_versions(store, "m")


def test_a_candidate_record_with_a_key_given_twice_is_refused(tmp_path):
    """Trial 12: candidates/cpu.json with a second "digest" key was promoted with the later one,
    without a word (the artifact manifest and metrics refuse duplicate keys)."""
    from paddlecd.image import candidate

    s = project_settings(tmp_path / "state")
    record = s.state / "candidates" / "cpu.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"digest": "sha256:' + "b" * 64 + '", "digest": "sha256:' + "a" * 64 +
                      '"}')
    with pytest.raises(ConfigError, match="the key 'digest' is given twice"):
        candidate.load_candidate(s, "cpu")


def test_a_project_settings_file_that_is_no_file_is_named_with_its_fixed_place(tmp_path, odd):
    """Trial 19: a folder or named pipe at paddlecd.yaml was "not a regular file", hint "pass
    the file itself": no flag passes it; it is read from the project root."""
    from paddlecd import config

    kind, make = odd
    make(tmp_path / config.PROJECT_FILE)
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.cause == f"{tmp_path / config.PROJECT_FILE}: not a regular file ({kind})"
    assert e.value.hint.startswith(f"the project's settings are read from {tmp_path}")


def test_a_project_settings_file_that_is_a_dangling_link_is_named_not_taken_for_absent(tmp_path):
    """Trial 21: paddlecd.yaml linking to an unmounted file was read as no settings file."""
    from paddlecd import config

    (tmp_path / config.PROJECT_FILE).symlink_to(tmp_path / "nonexist.yaml")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.cause == (f"{tmp_path / config.PROJECT_FILE} is a symbolic link (to "
                             f"{tmp_path / 'nonexist.yaml'}), which does not exist")
