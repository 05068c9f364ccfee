"""Config cascade, driver table, busbw arithmetic, push-stream decoding, JUnit → checks; no services."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from paddlecd import config, engine
from paddlecd.errors import ConfigError, RegistryAuthError, RegistryError, VerifyError
from paddlecd.verify import drivers
from paddlecd.verify import run as verify

ROOT = Path(__file__).resolve().parents[2]


def test_config_cascade_order(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("registry: {url: file.example:1, repository: team/paddle}\nstate_dir: /s1\n")
    s = config.load({"registry.url": "flag.example:3"}, root=tmp_path,
                    environ={"PADDLECD_REGISTRY_URL": "env.example:2", "PADDLECD_STATE_DIR": "/s2"})
    assert s.registry.url == "flag.example:3"           # flags beat environment
    assert s.state_dir == "/s2"                          # environment beats the project file
    assert s.registry.repository == "team/paddle"        # project file beats defaults
    assert s.candidate_repo == "flag.example:3/team/paddle"


@pytest.mark.parametrize("yaml_text,environ,fragment", [
    ("registry: {urll: x}", {}, "did you mean 'registry.url'"),
    ("", {"PADDLECD_REGISTRY_INSECURE": "maybe"}, "is not a bool"),
    ("", {"PADDLECD_VERIFY_CPU_RANKS": "two"}, "is not an integer"),
    ("", {"PADDLECD_VERIFY_TIMEOUT": "-5"}, "must be greater than 0"),
    ("registry: [1]", {}, "must be a mapping"),
    ("registry: {url: [unclosed", {}, "not valid YAML"),
])
def test_config_errors(tmp_path, yaml_text, environ, fragment):
    (tmp_path / "paddlecd.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ=environ)
    assert fragment in e.value.cause + (e.value.hint or "")


def test_config_secrets_are_not_settings(tmp_path):
    s = config.load(root=tmp_path, environ={"PADDLECD_REGISTRY_PASSWORD": "hunter2", "PADDLECD_REGISTRY_USERNAME": "u"})
    assert "hunter2" not in repr(s)


@pytest.mark.parametrize("cuda,driver,ok,full", [
    ("12.6", "560.35.03", True, True),
    ("12.6", "535.104.05", True, False),   # 12.x minor-version compatibility (>= 525.60.13)
    ("12.0", "525.60.13", True, True),
    ("12.0", "470.82.01", False, False),
    ("11.8", "450.80.02", True, False),
    ("11.8", "450.51.06", False, False),
    ("11.8", "520.61.05", True, True),
])
def test_driver_table(cuda, driver, ok, full):
    result = drivers.check(cuda, driver)
    assert (result.ok, result.full) == (ok, full)
    assert driver in result.message


def test_driver_table_unknown_cuda():
    with pytest.raises(VerifyError):
        drivers.required("10.2")


def test_verify_requires_the_toolkit_driver(monkeypatch):
    """Minor-version compatibility is not enough for images carrying NVIDIA_REQUIRE_CUDA (Paddle's)."""
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
    """The smoke suite's AllReduce worker module (imports paddle; the host test env has the CPU wheel)."""
    pytest.importorskip("paddle")
    sys.path.insert(0, str(ROOT / "smoke"))
    spec = importlib.util.spec_from_file_location("allreduce_worker", ROOT / "smoke/workers/allreduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("n,factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_is_nccl_tests_definition(n, factor):
    # nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw * 2(n-1)/n
    assert load_worker().busbw(10.0, n) == pytest.approx(10.0 * factor)


def test_push_stream_error_chunk_raises_even_after_progress():
    chunks = [{"status": "Preparing", "id": "abc"}, {"status": "Pushing", "id": "abc", "progress": "[=>] 1MB"},
              {"errorDetail": {"message": "blob upload unknown"}, "error": "blob upload unknown"}]
    seen = []
    with pytest.raises(RegistryError) as e:
        engine.decode_stream(iter(chunks), what="pushing r/x:1", on_progress=seen.append)
    assert "blob upload unknown" in e.value.cause and len(seen) == 2


def test_push_stream_auth_error_is_typed():
    raw = [b'{"status":"Preparing","id":"a"}\n{"error":"unauthorized: authentication required"}\n']
    with pytest.raises(RegistryAuthError):
        engine.decode_stream(iter(raw), what="pushing r/x:1")


def test_push_stream_success_returns_messages():
    msgs = engine.decode_stream(iter([{"status": "Pushed", "id": "a"}, {"aux": {"Digest": "sha256:" + "1" * 64}}]),
                                what="p")
    assert msgs[-1]["aux"]["Digest"].startswith("sha256:")


def test_parse_junit_turns_properties_into_metrics(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text("""<testsuites><testsuite>
      <testcase classname="test_allreduce" name="test_allreduce_exact_sums" time="7.3">
        <properties><property name="world_size" value="2"/><property name="backend" value="&quot;gloo&quot;"/></properties>
      </testcase>
      <testcase classname="test_environment" name="test_import_paddle" time="0.1">
        <failure message="ImportError: libgomp.so.1: cannot open shared object file">trace</failure>
      </testcase>
      <testcase classname="test_environment" name="test_gpu_devices_visible" time="0"><skipped message="GPU-only"/></testcase>
    </testsuite></testsuites>""")
    checks = {c.name: c for c in verify.parse_junit(xml)}
    allreduce = checks["allreduce/test_allreduce_exact_sums"]
    assert allreduce.metrics == {"world_size": 2, "backend": "gloo"}
    assert checks["environment/test_import_paddle"].passed is False
    assert "libgomp" in checks["environment/test_import_paddle"].message
    gpu = checks["environment/test_gpu_devices_visible"]
    assert gpu.skipped and gpu.passed


def test_builder_is_picked_explicitly():
    b = engine.pick_builder()
    assert "BuildKit" in b.description or "DOCKER_BUILDKIT=1" in b.description


def test_builder_refuses_a_cli_without_buildkit(tmp_path):
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n[ \"$1\" = version ] && echo 28.2.2 && exit 0\nexit 1\n")
    fake.chmod(0o755)
    from paddlecd.errors import EngineError

    with pytest.raises(EngineError) as e:
        engine.pick_builder(str(fake))
    assert "no BuildKit-capable docker CLI" in e.value.cause


@pytest.mark.parametrize("env,expected", [
    ({}, None), ({"CUDA_VISIBLE_DEVICES": "all"}, None), ({"CUDA_VISIBLE_DEVICES": "2,3"}, ["2", "3"]),
    ({"NVIDIA_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1"}, ["1"]),
])
def test_gpu_pinning_from_environment(monkeypatch, env, expected):
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert drivers.pinned_devices() == expected


def test_gpu_run_options_pin_cards_and_share_ipc(monkeypatch, tmp_path):
    """GPU-only path, checked without a GPU: the smoke container gets the pinned cards, host IPC, big shm."""
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(drivers, "host_gpus", lambda: ("560.35.03", 2))
    s = config.load(root=ROOT, environ={})
    opts = verify.run_options(s, {"io.paddlecd.device": "gpu", "io.paddlecd.cuda.version": "12.6"}, tmp_path)
    assert opts["ipc_mode"] == "host" and opts["shm_size"] == s.verify.gpu_shm_size
    assert opts["device_requests"][0]["DeviceIDs"] == ["2", "3"]
    assert opts["environment"]["PADDLECD_GPUS"] == "2" and opts["environment"]["PADDLECD_DEVICE"] == "gpu"
    assert opts["environment"]["PADDLECD_EXPECT_CUDA"] == "12.6"
    assert opts["environment"]["NVIDIA_TF32_OVERRIDE"] == "0"  # full fp32 for the 1e-5 export check


@pytest.mark.parametrize("url", ["http://127.0.0.1:5000", "registry.example/team"])
def test_registry_url_is_host_and_port_only(tmp_path, url):
    with pytest.raises(ConfigError) as e:
        config.load({"registry.url": url}, root=tmp_path, environ={})
    assert "give host[:port] only" in e.value.cause


@pytest.mark.parametrize("version,expected", [(8907, "8.9"), (8600, "8.6"), (90501, "9.5"), (90100, "9.1")])
def test_cudnn_integer_versions_decode_per_major(version, expected):
    """cudnn_version.h: CUDNN_VERSION is M*1000+m*100+p up to 8, M*10000+m*100+p from 9 (GPU-only check's helper)."""
    pytest.importorskip("paddle")
    sys.path.insert(0, str(ROOT / "smoke"))
    spec = importlib.util.spec_from_file_location("smoke_env", ROOT / "smoke/test_environment.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.cudnn_major_minor(version) == expected


def test_env_registry_credentials_go_only_to_the_configured_registry(tmp_path, monkeypatch):
    """PADDLECD_REGISTRY_USERNAME/PASSWORD must not be sent to another registry (e.g. Docker Hub for a base)."""
    from paddlecd.registry import client as registry

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # empty: no config.json
    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "alice")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "s3cret")
    s = config.load({"registry.url": "registry.example:5000"}, root=tmp_path, environ={})
    assert registry.client_for(s).credentials.username == "alice"
    assert registry.client_for(s, "docker.io").credentials is None
    assert registry.client_for(s, "other.example").credentials is None


def test_bootstrap_mirror_skips_non_debian_archives(tmp_path):
    from paddlecd.image import bootstrap

    s = config.load(root=tmp_path, environ={})
    ubuntu = tmp_path / "ubuntu.sources"
    ubuntu.write_text("Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble\n")
    debian = tmp_path / "debian.sources"
    debian.write_text("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n")
    security = tmp_path / "sources.list"
    security.write_text("deb http://security.debian.org/debian-security bookworm-security main\n")
    assert bootstrap.host_mirror(s, [ubuntu, security]) == bootstrap.DEFAULT_MIRROR
    assert bootstrap.host_mirror(s, [ubuntu, debian]) == "http://mirror.example/debian"
    s2 = config.load({"build.debian_mirror": "http://pinned.example/debian"}, root=tmp_path, environ={})
    assert bootstrap.host_mirror(s2, [debian]) == "http://pinned.example/debian"
