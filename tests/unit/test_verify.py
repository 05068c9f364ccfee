"""verify without a GPU or an engine: the driver table, GPU pinning and run options, busbw
arithmetic and cuDNN decoding of the smoke suite, JUnit → checks."""

from __future__ import annotations

import importlib.util
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from paddlecd import config, engine, proc
from paddlecd.errors import VerifyError
from paddlecd.verify import drivers
from paddlecd.verify import run as smoke

from support import ROOT


@pytest.mark.parametrize(
    "cuda,driver,ok,full",
    [
        ("12.6", "560.35.03", True, True),
        ("12.6", "535.104.05", True, False),  # 12.x minor-version compatibility (>= 525.60.13)
        ("12.0", "525.60.13", True, True),
        ("12.0", "470.82.01", False, False),
        ("11.8", "450.80.02", True, False),
        ("11.8", "450.51.06", False, False),
        ("11.8", "520.61.05", True, True),
    ],
)
def test_driver_table(cuda, driver, ok, full):
    result = drivers.check(cuda, driver)
    assert (result.ok, result.full) == (ok, full)
    assert driver in result.message


def test_driver_table_unknown_cuda():
    with pytest.raises(VerifyError):
        drivers.required("10.2")


def test_verify_requires_the_toolkit_driver(monkeypatch):
    """Minor-version compatibility is not enough for images with NVIDIA_REQUIRE_CUDA (Paddle's)."""
    monkeypatch.setattr(drivers, "host_gpus", lambda: ("535.104.05", 1))
    with pytest.raises(VerifyError) as e:
        drivers.require_for("12.6")
    assert "NVIDIA_REQUIRE_CUDA" in e.value.cause and "560.28.03" in e.value.hint
    monkeypatch.setattr(drivers, "host_gpus", lambda: ("560.35.03", 1))
    assert drivers.require_for("12.6").full


def test_driver_check_without_gpu_says_so(monkeypatch):
    monkeypatch.setattr(drivers, "host_gpus", lambda: (None, 0))
    with pytest.raises(VerifyError) as e:
        drivers.require_for("12.6")
    assert "no NVIDIA GPU" in e.value.cause


def load_worker():
    """The smoke suite's AllReduce worker module (imports paddle; tests have the CPU wheel)."""
    pytest.importorskip("paddle")
    sys.path.insert(0, str(ROOT / "smoke"))
    spec = importlib.util.spec_from_file_location(
        "allreduce_worker", ROOT / "smoke/workers/allreduce.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.xdist_group("paddle")  # one worker imports paddle (~2.5 s of CPU), not both
@pytest.mark.parametrize("n,factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_is_nccl_tests_definition(n, factor):
    # nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw * 2(n-1)/n
    assert load_worker().busbw(10.0, n) == pytest.approx(10.0 * factor)


def test_parse_junit_turns_properties_into_metrics(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text("""<testsuites><testsuite>
      <testcase classname="test_allreduce" name="test_allreduce_exact_sums" time="7.3">
        <properties><property name="world_size" value="2"/>
          <property name="backend" value="&quot;gloo&quot;"/></properties>
      </testcase>
      <testcase classname="test_environment" name="test_import_paddle" time="0.1">
        <failure message="ImportError: libgomp.so.1: cannot open shared object file">trace</failure>
      </testcase>
      <testcase classname="test_environment" name="test_gpu_devices_visible" time="0">
        <skipped message="GPU-only"/></testcase>
    </testsuite></testsuites>""")
    checks = {c.name: c for c in smoke.parse_junit(xml)}
    allreduce = checks["allreduce/test_allreduce_exact_sums"]
    assert allreduce.metrics == {"world_size": 2, "backend": "gloo"}
    assert checks["environment/test_import_paddle"].passed is False
    assert "libgomp" in checks["environment/test_import_paddle"].message
    gpu = checks["environment/test_gpu_devices_visible"]
    assert gpu.skipped and gpu.passed


@pytest.mark.parametrize(
    "env,expected",
    [
        ({}, None),
        ({"CUDA_VISIBLE_DEVICES": "all"}, None),
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, ["2", "3"]),
        ({"NVIDIA_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1"}, ["1"]),
    ],
)
def test_gpu_pinning_from_environment(monkeypatch, env, expected):
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert drivers.pinned_devices() == expected


def test_gpu_smoke_container_pins_cards_and_shares_ipc(monkeypatch, tmp_path):
    """GPU-only path, checked without a GPU: the smoke container gets the pinned cards, host IPC,
    big shm."""
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(drivers, "host_gpus", lambda: ("560.35.03", 2))
    s = config.load(root=ROOT, environ={})
    labels = {"io.paddlecd.device": "gpu", "io.paddlecd.cuda.version": "12.6"}
    spec = smoke.smoke_container(s, "r/x@sha256:" + "a" * 64, labels, tmp_path)
    assert (spec.gpus, spec.ipc, spec.shm_size) == (("2", "3"), "host", s.verify.gpu_shm_size)
    assert spec.env["SMOKE_GPUS"] == "2" and spec.env["SMOKE_DEVICE"] == "gpu"
    assert spec.env["SMOKE_EXPECT_CUDA"] == "12.6"
    assert spec.env["NVIDIA_TF32_OVERRIDE"] == "0"  # full fp32 for the 1e-5 export check
    kwargs = engine._run_kwargs(spec)  # what the engine is asked for
    assert kwargs["device_requests"][0]["DeviceIDs"] == ["2", "3"] and kwargs["ipc_mode"] == "host"


def test_cpu_smoke_container_has_no_gpu_parts(tmp_path):
    s = config.load(root=ROOT, environ={})
    labels = {"io.paddlecd.device": "cpu"}
    spec = smoke.smoke_container(s, "r/x@sha256:" + "a" * 64, labels, tmp_path)
    kwargs = engine._run_kwargs(spec)
    assert "device_requests" not in kwargs and "ipc_mode" not in kwargs
    assert kwargs["volumes"] == {
        str(ROOT / "smoke"): {"bind": "/smoke", "mode": "ro"},
        str(tmp_path): {"bind": "/out", "mode": "rw"},
    }
    assert kwargs["shm_size"] == s.verify.shm_size and kwargs["working_dir"] == "/tmp"


def test_a_smoke_container_is_labelled_by_its_output_folder(tmp_path):
    """A re-run into the same folder finds what a killed run left (one label, the same value);
    a run into another folder does not."""
    s = config.load(root=ROOT, environ={})
    labels = {"io.paddlecd.device": "cpu"}
    one = smoke.smoke_container(s, "r/x@sha256:" + "a" * 64, labels, tmp_path / "a")
    again = smoke.smoke_container(s, "r/x@sha256:" + "b" * 64, labels, tmp_path / "a")
    other = smoke.smoke_container(s, "r/x@sha256:" + "a" * 64, labels, tmp_path / "b")
    assert dict(one.labels) == dict(again.labels) == {**smoke.out_label(tmp_path / "a"),
                                                      engine.OWNER: proc.owner()}
    assert list(one.labels) == ["io.paddlecd.smoke-out", engine.OWNER]  # owner: Ctrl-C stops it
    assert dict(other.labels) != dict(one.labels)


@pytest.mark.xdist_group("paddle")  # one worker imports paddle (~2.5 s of CPU), not both
@pytest.mark.parametrize(
    "version,expected", [(8907, "8.9"), (8600, "8.6"), (90501, "9.5"), (90100, "9.1")]
)
def test_cudnn_integer_versions_decode_per_major(version, expected):
    """cudnn_version.h: CUDNN_VERSION is M*1000+m*100+p up to 8, M*10000+m*100+p from 9 (GPU-only
    check's helper)."""
    pytest.importorskip("paddle")
    sys.path.insert(0, str(ROOT / "smoke"))
    spec = importlib.util.spec_from_file_location("smoke_env", ROOT / "smoke/test_environment.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.cudnn_major_minor(version) == expected


def test_write_junit_reads_back_as_the_same_checks(tmp_path):
    """A multi-node run's checks written as JUnit (its attestation layer) and read back by
    parse_junit, the reader of pytest's own XML; xml.etree parses it as a testsuite."""
    from paddlecd.verify import evidence

    checks = [
        evidence.Check(name="allreduce/test_sums", passed=True, duration_s=1.5,
                       metrics={"busbw_gbps": 0.0, "world_size": 4}),
        evidence.Check(name="allreduce/test_busbw", passed=True, skipped=True,
                       message="one card: busbw is 0 by definition"),
        evidence.Check(name="convergence/test_dp_equals_one", passed=False,
                       message="loss 0.9 != 0.1"),
    ]
    path = smoke.write_junit(checks, tmp_path / "junit.xml", suite="paddlecd verify --nodes 2")
    root = ET.parse(path).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuite", "3", "1")
    back = {c.name: c for c in smoke.parse_junit(path)}
    assert list(back) == [c.name for c in checks]
    assert back["allreduce/test_sums"].metrics == {"busbw_gbps": 0.0, "world_size": 4}
    assert back["allreduce/test_busbw"].skipped and back["allreduce/test_busbw"].passed
    failed = back["convergence/test_dp_equals_one"]
    assert not failed.passed and failed.message == "loss 0.9 != 0.1"


def test_a_run_that_cannot_start_leaves_the_previous_runs_folder_whole(tmp_path, monkeypatch):
    """A trial: a verify whose container failed to start deleted the previous run's junit.xml
    and kept the rest. The run writes into a folder beside it, which replaces it only after the
    suite ran; a killed run's folder is swept by the next."""
    from paddlecd.verify import run as smoke

    out = tmp_path / "verify" / "cpu-0123456789ab"
    out.mkdir(parents=True)
    for name in ("junit.xml", "smoke.log", "summary.md"):
        (out / name).write_text("previous run")
    stage = smoke.staging_folder(out)
    assert stage.parent == out.parent and list(stage.iterdir()) == [] and stage != out
    assert stage.stat().st_mode & 0o777 == 0o777  # the image's non-root user writes there
    (stage / "junit.xml").write_text("this run")
    smoke.replace_folder(out, stage)
    assert [p.name for p in out.iterdir()] == ["junit.xml"] and not stage.exists()
    assert (out / "junit.xml").read_text() == "this run"
    killed = out.parent / f".{out.name}.999999999.run"  # no such pid: a killed run's
    killed.mkdir()
    smoke.staging_folder(out)
    assert not killed.exists() and sorted(p.name for p in out.parent.iterdir()) == [
        f".{out.name}.{os.getpid()}.run", out.name]


@pytest.mark.parametrize(
    "device, gpus, cpu_ranks, outcome",
    [("cpu", 0, 9, "fail"), ("cpu", 0, 2, "run"), ("cpu", 0, 1, "skip"), ("gpu", 16, 2, "skip"),
     ("gpu", 8, 2, "run")],
)
def test_a_world_size_the_user_chose_badly_fails_the_collective_check(monkeypatch, tmp_path,
                                                                       device, gpus, cpu_ranks,
                                                                       outcome):
    """A trial: verify.cpu_ranks=100000 skipped both convergence checks and the run passed (and
    was promoted). A skip is for what the hardware decides (one card; cards that do not split the
    840 samples); on CPU the user chose the ranks, and 9 fails the check."""
    monkeypatch.syspath_prepend(str(ROOT / "smoke"))
    import _common

    expect = _common.Expect(device=device, paddle=None, cuda=None, cudnn=None, gpus=gpus,
                            cpu_ranks=cpu_ranks, out=tmp_path)
    outcomes = {"fail": pytest.fail.Exception, "skip": pytest.skip.Exception}
    if outcome == "run":
        _common.require_collective(expect)
    else:
        with pytest.raises(outcomes[outcome]):
            _common.require_collective(expect)


@pytest.mark.parametrize("name", ["1.0.0-cpu", "1.4.0-rc.1-cu126"])
def test_a_release_name_given_as_image_is_refused_with_its_reference(name):
    """A trial: ``verify --image 1.0.0-cpu`` was looked up as
    ``docker.io/library/1.0.0-cpu:latest`` ("Docker Hub cannot be reached")."""
    from paddlecd.errors import ConfigError

    s = config.load(root=ROOT, environ={})
    with pytest.raises(ConfigError) as e:
        smoke.target(s, None, name)
    assert e.value.cause.startswith(f"--image {name} names a release, not an image")
    assert f"--image {s.release_repo}:{name}" in e.value.hint
