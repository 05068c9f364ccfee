"""``invoke artifacts.check --onnx``, ``upload`` and ``artifacts.show`` for real: exports
made by Paddle 3.0.0 on this host, converted by paddle2onnx 2.1.0 INSIDE the pushed cpu image
(installed there from the wheel cache), checked with onnxruntime 1.32.0 here, and read back by an
independent reader: ``onnx.checker`` (full check) and onnx's reference evaluator, which shares no
kernel with ONNX Runtime. No Paddle 2.x image can be built here (Docker Hub is unreachable): the
"not accepted" case is the cpu image with its paddlepaddle metadata claiming 2.6.1, which is what
paddle2onnx 2.1.0 reads at import to refuse a Paddle older than 3.0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from support import cli_env, invoke, project_settings

_EXPORT = """
import os, sys
if sys.argv[2] == "legacy":
    os.environ["FLAGS_enable_pir_api"] = "0"  # before import: Paddle 3.x then saves a .pdmodel
import numpy as np
import paddle
from paddle.static import InputSpec

paddle.seed(0)
layer = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 2))
layer.eval()
spec = [InputSpec([None, 4], "float32", "x")]
paddle.jit.save(layer, sys.argv[1] + "/inference", input_spec=spec)
x = np.random.default_rng(1).normal(size=(4, 4)).astype("float32")
np.savez(sys.argv[1] + "/reference_inputs.npz", x=x)
np.savez(sys.argv[1] + "/reference_outputs.npz", output_0=layer(paddle.to_tensor(x)).numpy())
"""


def _export(dest: Path, kind: str) -> Path:
    dest.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}
    subprocess.run([sys.executable, "-c", _EXPORT, str(dest), kind], check=True,
                   capture_output=True, env=env, timeout=300)
    return dest


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A PIR and a legacy export, made once for the session's workers (support/shared.py): the
    tests check copies of them (``artifacts.check`` writes beside the model) or upload them."""
    from support.shared import once

    root = once(tmp_path_factory, "onnx-exports",
                lambda root: [_export(root / kind, kind) for kind in ("pir", "legacy")])
    return {kind: root / kind for kind in ("pir", "legacy")}


@pytest.fixture(scope="module")
def runtime(registry, main_state, paddle_image):
    """The cpu image pushed to ``registry``: its ``host/repo@sha256:…``."""
    from paddlecd.image import push as publish

    settings = project_settings(main_state, registry=registry)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
        return publish.push(settings, "cpu", on_progress=None).reference


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """One state folder for the module: the paddle2onnx wheel is downloaded once."""
    return tmp_path_factory.mktemp("onnx-state")


@pytest.fixture
def env(registry, main_state, state):
    return cli_env(registry, main_state, PADDLECD_STATE_DIR=str(state))


def _copy(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for f in src.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    return dest


def _check(env, *args):
    return invoke("artifacts.check", *args, env=env, timeout=600)


def _one_line_error(r, cause: str) -> str:
    lines = [x for x in r.stderr.splitlines() if x.startswith(("error: ", "hint: "))]
    assert len(lines) == 2 and cause in lines[0], r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    return lines[1]


def _independent(path: Path, folder: Path) -> int:
    """onnx.checker (full) on the file, and onnx's reference evaluator against the references
    at batch 1 and 3; returns the file's opset."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    x = np.load(folder / "reference_inputs.npz")["x"]
    want = np.load(folder / "reference_outputs.npz")["output_0"]
    for batch in (1, 3):
        (got,) = ReferenceEvaluator(model).run(None, {"x": x[:batch]})
        np.testing.assert_allclose(got, want[:batch], rtol=1e-4, atol=1e-5)
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


@pytest.mark.parametrize("kind", ["pir", "legacy"])
def test_onnx_conversion_in_the_image_and_ort_parity(env, runtime, exports, tmp_path, kind):
    """paddle2onnx 2.1.0 accepts both formats under Paddle 3.0.0: the PIR .json as it is, the
    legacy .pdmodel translated to PIR (--no-pir: the flag path that lets Paddle load it too)."""
    folder = _copy(exports[kind], tmp_path / kind)
    r = _check(env, str(folder), "--image", runtime, "--onnx",
               *(["--no-pir"] if kind == "legacy" else []))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "; onnx inference.onnx opset 13, parity passed (rtol 0.0001, atol 1e-05)" in r.stdout
    doc = json.loads((folder / "check.json").read_text())
    cases = {c["name"]: c for c in doc["cases"]}
    assert {"onnx/convert", "onnxruntime/batch-1", "onnxruntime/batch-3"} <= set(cases)
    assert cases["onnxruntime/batch-3"]["shapes"] == [[3, 2]]
    assert cases["onnxruntime/batch-3"]["max_abs_err"] <= 1e-5
    o = doc["onnx"]
    assert (o["paddle2onnx"], o["onnxruntime"], o["paddle_version"]) == ("2.1.0", "1.32.0", "3.0.0")
    assert (o["parity"], o["batches"], o["image"]) == ("passed", [1, 3], runtime)
    assert _independent(folder / "inference.onnx", folder) == o["opset"] == 13
    wheels = list((Path(env["PADDLECD_STATE_DIR"]) / "wheels").glob("*/paddle2onnx-2.1.0-*.whl"))
    assert len(wheels) == 1  # installed in the container from the host's cache, not baked in


def test_a_tampered_reference_fails_onnx_parity_by_name(env, runtime, exports, tmp_path):
    """References 0.01 off: the Paddle cases pass within --atol 0.1, ONNX Runtime's do not within
    the stated 1e-5; the error names the ONNX cause, and upload refuses the failed .onnx."""
    folder = _copy(exports["pir"], tmp_path / "tampered")
    out = dict(np.load(folder / "reference_outputs.npz"))
    np.savez(folder / "reference_outputs.npz", output_0=out["output_0"] + 0.01)
    r = _check(env, str(folder), "--image", runtime, "--onnx", "--atol", "0.1")
    assert r.returncode == 6, r.stderr[-3000:]
    hint = _one_line_error(
        r, "the ONNX Runtime outputs differ from the reference outputs beyond the tolerance "
           "(onnxruntime/batch-1: max abs error 0.01")
    assert "--onnx-opset" in hint
    doc = json.loads((folder / "check.json").read_text())
    assert doc["onnx"]["parity"] == "failed" and doc["onnx"]["atol"] == 1e-5
    assert [c["code"] for c in doc["cases"] if not c["passed"]] == ["onnx-mismatch"] * 2

    r = invoke("upload", "--model-dir", str(folder), "--name", "tampered", "--version", "1.0.0",
               env=env, timeout=300)
    assert r.returncode == 2
    _one_line_error(r, "inference.onnx failed its ONNX Runtime parity check")
    assert not (Path(env["PADDLECD_STATE_DIR"]) / "artifacts" / "tampered").exists()


def test_upload_lists_the_onnx_and_show_prints_it(env, runtime, exports, tmp_path):
    folder = _copy(exports["pir"], tmp_path / "up")
    r = invoke("upload", "--model-dir", str(folder), "--name", "lin-onnx", "--version", "1.0.0",
               "--onnx", env=env, timeout=300)
    assert r.returncode == 2  # --onnx names the image paddle2onnx runs in
    _one_line_error(r, "upload --onnx needs --image")

    r = invoke("upload", "--model-dir", str(folder), "--name", "lin-onnx", "--version", "1.0.0",
               "--image", runtime, "--onnx", env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "onnx: inference.onnx opset 13, parity passed" in r.stderr
    assert "put    inference.onnx" in r.stderr
    stored = Path(env["PADDLECD_STATE_DIR"]) / "artifacts" / "lin-onnx" / "1.0.0"
    manifest = json.loads((stored / "manifest.json").read_text())
    files = {f["path"]: f for f in manifest["files"]}
    o = manifest["onnx"]
    assert files["inference.onnx"]["sha256"] == o["sha256"]
    assert (o["opset"], o["paddle2onnx"], o["parity"]) == (13, "2.1.0", "passed")
    assert _independent(stored / "inference.onnx", stored) == 13

    r = invoke("artifacts.show", "lin-onnx@1.0.0", env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "  paddle      3.0.0 (from the image)" in r.stdout
    assert f"  onnx        inference.onnx  opset 13, paddle2onnx 2.1.0 in {runtime}" in r.stdout
    assert "onnxruntime 1.32.0 parity passed (rtol 0.0001, atol 1e-05, batches 1,3" in r.stdout
    r = invoke("artifacts.show", "lin-onnx@2.0.0", env=env, timeout=120)
    assert r.returncode == 8
    _one_line_error(r, "no model at")


def test_a_stored_model_gains_its_onnx_on_s3(env, s3_server, runtime, exports):
    """artifacts.check NAME --onnx on S3 (Ceph RGW): the .onnx is stored beside the Paddle files,
    the manifest (rewritten last) lists it, and artifacts.show --json reads both back."""
    import boto3
    from botocore.config import Config

    bucket = f"models-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                 aws_access_key_id=s3_server.key, aws_secret_access_key=s3_server.secret,
                 config=Config(s3={"addressing_style": "path"})).create_bucket(Bucket=bucket)
    s3 = {**env, "AWS_ACCESS_KEY_ID": s3_server.key, "AWS_SECRET_ACCESS_KEY": s3_server.secret,
          "AWS_DEFAULT_REGION": "us-east-1", "PADDLECD_STORAGE_ENDPOINT_URL": s3_server.endpoint}
    store = f"s3://{bucket}/paddle"
    r = invoke("upload", "--model-dir", str(exports["legacy"]), "--name", "leg", "--version",
               "1.0.0", "--image", runtime, "--to", store, env=s3, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = invoke("artifacts.show", f"{store}/leg", "--json", env=s3, timeout=120)
    assert json.loads(r.stdout)["manifest"].get("onnx") is None

    r = _check(s3, "leg", "--store", store, "--image", runtime, "--onnx", "--no-pir")
    assert r.returncode == 0, r.stderr[-3000:]
    r = invoke("artifacts.show", f"{store}/leg@1.0.0", "--json", env=s3, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["url"] == f"{store}/leg/1.0.0"
    manifest, check = doc["manifest"], doc["check"]
    assert manifest["format"] == "paddle-program" and manifest["onnx"]["opset"] == 13
    assert "inference.onnx" in {f["path"] for f in manifest["files"]}
    assert check["status"] == "passed" and check["onnx"]["parity"] == "passed"
    assert check["flags"] == {"FLAGS_enable_pir_api": "0"}
    r = invoke("artifacts.download", f"{store}/leg/1.0.0", str(Path(env["PADDLECD_STATE_DIR"])
                                                                / "leg-down"), env=s3, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]  # sha256-verified, the .onnx included
    down = Path(env["PADDLECD_STATE_DIR"]) / "leg-down"
    assert _independent(down / "inference.onnx", down) == 13


def test_an_export_in_a_paddle_2x_runtime_is_not_accepted(env, registry, runtime, exports,
                                                          tmp_path):
    ref = f"{registry.host}/paddlecd/paddle-claims-2x:t1"
    meta = "/opt/paddle/lib/python3.11/site-packages/paddlepaddle-3.0.0.dist-info/METADATA"
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text(
        f"FROM {runtime}\nUSER root\nRUN sed -i 's/^Version: 3.0.0$/Version: 2.6.1/' {meta}\n"
        "USER paddle\n")
    docker = {**os.environ, "DOCKER_CONFIG": str(registry.docker_config_dir),
              "DOCKER_BUILDKIT": "0"}
    for argv in (["build", "-q", "-t", ref, str(tmp_path / "ctx")], ["push", ref]):
        done = subprocess.run(["/usr/bin/docker", *argv], env=docker, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    folder = _copy(exports["pir"], tmp_path / "pir")
    r = _check(env, str(folder), "--image", ref, "--onnx")
    assert r.returncode == 6
    hint = _one_line_error(r, "paddle2onnx 2.1.0 does not accept an export in this runtime: it "
                              "needs Paddle >= 3.0")
    assert "Paddle 3.x image" in hint
    doc = json.loads((folder / "check.json").read_text())
    assert doc["onnx"] is None and not (folder / "inference.onnx").exists()
    assert [c["code"] for c in doc["cases"] if not c["passed"]] == ["onnx-unsupported"]
