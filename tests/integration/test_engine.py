"""The engine module against the real Docker engine: containers from a ContainerSpec (env,
mounts, user, network aliases, exit code, logs, timeout), networks, and docker errors translated
with their cause.

The image is made here from the host's own ``sh``, ``sleep``, ``cat`` and ``getent`` and their
libraries (no hub is reachable from test machines), imported with ``engine.import_rootfs``.
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import uuid
from pathlib import Path

import docker.errors
import pytest

from paddlecd import engine
from paddlecd.errors import ContainerTimeout, EngineError, RegistryError

from support import WORKER

TOOLS = {"sh": "/bin/sh", "sleep": "/bin/sleep", "cat": "/bin/cat", "getent": "/usr/bin/getent"}


def _libraries(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return {m for m in re.findall(r"(/\S+) \(0x", out)}


@pytest.fixture(scope="module")
def tiny_image(tmp_path_factory, docker_engine):
    """``paddlecd-test/tiny:<hex>``: sh, sleep, cat and getent from the host; removed afterwards."""
    tar_path = tmp_path_factory.mktemp("tiny") / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        for name, binary in TOOLS.items():
            tar.add(Path(binary).resolve(), arcname=f"bin/{name}")
        for lib in set().union(*(_libraries(b) for b in TOOLS.values())):
            tar.add(Path(lib).resolve(), arcname=lib.lstrip("/"))
        for folder in ("tmp", "etc"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(info)
    ref = f"paddlecd-test/tiny:{uuid.uuid4().hex[:8]}"
    engine.import_rootfs(str(tar_path), ref, changes=["ENV PATH=/bin"])
    yield ref
    engine.remove_image(ref)


def _name() -> str:
    return f"paddlecd-test-{WORKER}-{uuid.uuid4().hex[:8]}"


def _exists(name: str) -> bool:
    return bool(engine.client().containers.list(all=True, filters={"name": f"^{name}$"}))


def test_a_spec_runs_with_its_env_mounts_user_and_workdir(tiny_image, tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    (src / "msg").write_text("from the host\n")
    name = _name()
    spec = engine.ContainerSpec(
        image=tiny_image, name=name, user="4321:4321", workdir="/tmp",
        command=("sh", "-c", 'echo "greeting=$GREETING"; cat /in/msg; echo "cwd=$PWD"; '
                             'echo written > /out/result; echo to-stderr >&2; exit 3'),
        env={"GREETING": "hello world"}, labels={"paddlecd.io/test": "engine"},
        mounts=(engine.Mount(str(src), "/in", read_only=True), engine.Mount(str(out), "/out")))
    seen: list[str] = []
    with engine.container(spec) as c:
        assert c.name == name
        raw = engine.client().containers.get(name)
        assert raw.labels["paddlecd.io/test"] == "engine"
        finished = engine.wait(c, timeout=60, on_line=seen.append)
    assert finished.exit_code == 3
    lines = finished.logs.splitlines()  # stdout and stderr each in order; not their interleaving
    stdout = ["greeting=hello world", "from the host", "cwd=/tmp"]
    assert [ln for ln in lines if ln != "to-stderr"] == stdout
    assert lines.count("to-stderr") == 1
    assert seen == finished.logs.splitlines()
    assert (out / "result").read_text() == "written\n" and (out / "result").stat().st_uid == 4321
    assert not _exists(name)  # removed on exit


def test_a_read_only_mount_refuses_writes(tiny_image, tmp_path):
    spec = engine.ContainerSpec(image=tiny_image, command=("sh", "-c", "echo x > /in/file"),
                                mounts=(engine.Mount(str(tmp_path), "/in", read_only=True),))
    with engine.container(spec) as c:
        finished = engine.wait(c, timeout=60)
    assert finished.exit_code != 0 and "Read-only file system" in finished.logs
    assert not (tmp_path / "file").exists()


def test_containers_find_each_other_by_network_alias(tiny_image):
    net = _name()
    with engine.network(net, labels={"paddlecd.io/test": "engine"}) as joined:
        assert joined == net
        server = engine.ContainerSpec(image=tiny_image, name=f"{net}-0", network=net,
                                      aliases=(f"rank-0.{net}",), command=("sleep", "60"))
        client = engine.ContainerSpec(image=tiny_image, name=f"{net}-1", network=net,
                                      command=("getent", "hosts", f"rank-0.{net}"))
        with engine.container(server) as s, engine.container(client) as c:
            finished = engine.wait(c, timeout=60)
            s.kill()
    assert finished.exit_code == 0, finished.logs
    assert re.match(rf"\d+\.\d+\.\d+\.\d+\s+rank-0\.{net}", finished.logs)
    assert not engine.client().networks.list(names=[net])


def test_a_limit_on_cpu_memory_and_shm_reaches_the_engine(tiny_image):
    spec = engine.ContainerSpec(image=tiny_image, command=("sleep", "30"), cpus=0.5,
                                memory=64 * 2**20, shm_size=8 * 2**20)
    with engine.container(spec) as c:
        host = engine.client().containers.get(c.name).attrs["HostConfig"]
        c.kill()
    assert (host["NanoCpus"], host["Memory"], host["ShmSize"]) == (5 * 10**8, 64 * 2**20, 8 * 2**20)


def test_a_container_past_its_timeout_is_killed_and_named(tiny_image):
    with engine.container(engine.ContainerSpec(image=tiny_image, command=("sleep", "120"))) as c:
        with pytest.raises(EngineError) as e:
            engine.wait(c, timeout=2)
        state = engine.client().containers.get(c.name).attrs["State"]
    assert e.value.cause == f"container {c.name} did not finish within 2s"
    assert state["Running"] is False and isinstance(e.value, ContainerTimeout)


def test_a_refused_container_is_translated_with_its_cause():
    """An image the engine cannot pull: one EngineError naming the image, docker's error kept."""
    ref = "127.0.0.1:9/paddlecd-test/absent:none"  # port 9 (discard): refused at once
    with pytest.raises(EngineError) as e:
        with engine.container(engine.ContainerSpec(image=ref)):
            pass
    assert e.value.cause.startswith(f"starting a container of {ref}: ")
    assert isinstance(e.value.__cause__, docker.errors.APIError)


def test_a_missing_local_image_is_named():
    with pytest.raises(EngineError) as e:
        engine.image_labels("paddlecd-test/absent:none")
    assert e.value.cause.startswith("inspecting image paddlecd-test/absent:none: image not found")
    assert e.value.hint == "build, pull or push it first"
    assert isinstance(e.value.__cause__, docker.errors.ImageNotFound)


def test_a_push_the_registry_refuses_is_a_registry_error(tiny_image):
    ref = f"127.0.0.1:9/paddlecd-test/tiny:{uuid.uuid4().hex[:6]}"
    engine.tag(tiny_image, ref)
    try:
        with pytest.raises(RegistryError) as e:
            engine.push(ref)
    finally:
        engine.remove_image(ref)
    assert e.value.cause.startswith(f"pushing {ref}: ") and "connection refused" in e.value.cause


def test_a_duplicate_network_is_refused_with_the_cleanup_hint():
    net = _name()
    with engine.network(net):
        with pytest.raises(EngineError) as e:
            with engine.network(net):
                pass
    assert e.value.cause.startswith(f"creating network {net}: ")
    assert e.value.hint == f"remove the stale network: docker network rm {net}"
    assert isinstance(e.value.__cause__, docker.errors.APIError)


def test_one_client_is_shared_and_an_unreachable_engine_is_named(monkeypatch, tmp_path):
    assert engine.client() is engine.client()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    engine.reset_client()
    try:
        with pytest.raises(EngineError) as e:
            engine.client()
        assert f"unix://{tmp_path}/no.sock" in e.value.cause and "dockerd" in e.value.hint
        assert e.value.__cause__ is not None
    finally:
        monkeypatch.undo()
        engine.reset_client()
    assert engine.info()["ServerVersion"]


def test_containers_a_killed_run_left_are_found_by_label_and_removed(tiny_image):
    """What verify does before it starts: a container kept (as a SIGKILLed run leaves it, still
    running) is removed by its labels; one with other labels stays."""
    key = uuid.uuid4().hex[:8]
    left, other = _name(), _name()
    for name, value in ((left, key), (other, key + "-other")):
        spec = engine.ContainerSpec(image=tiny_image, command=("sleep", "120"), name=name,
                                    labels={"io.paddlecd.smoke-out": value}, keep=True)
        with engine.container(spec):
            pass
    try:
        assert engine.remove_containers({"io.paddlecd.smoke-out": key}) == [left]
        assert not _exists(left) and _exists(other)
        assert engine.remove_containers({"io.paddlecd.smoke-out": key}) == []
    finally:
        engine.client().containers.get(other).remove(force=True)


def test_what_a_killed_run_left_is_removed_by_the_next_and_a_live_runs_stays(tiny_image):
    """A deploy or pipeline.run killed with kill -9 left its containers and network behind, and
    no later run removed them. Each carries its owner (host/pid/start); the next local job
    removes those whose owner is gone and leaves a running owner's alone."""
    from paddlecd import proc

    dead = subprocess.Popen(["sleep", "60"])
    gone_owner = proc.owner(dead.pid)
    dead.kill()
    dead.wait()
    key = uuid.uuid4().hex[:8]
    made = {}
    for who, owner in (("dead", gone_owner), ("live", proc.owner())):
        labels = {"paddlecd.io/test": key, engine.OWNER: owner}
        net = engine.client().networks.create(f"{_name()}-{who}", labels=labels)
        spec = engine.ContainerSpec(image=tiny_image, command=("sleep", "120"), name=_name(),
                                    labels=labels, network=net.name, keep=True)
        with engine.container(spec):
            pass
        made[who] = (spec.name, net.name)
    try:
        removed = engine.remove_orphans({"paddlecd.io/test": key})
        assert removed == [f"container {made['dead'][0]}", f"network {made['dead'][1]}"]
        assert not _exists(made["dead"][0]) and _exists(made["live"][0])
        assert engine.remove_orphans({"paddlecd.io/test": key}) == []
    finally:
        engine.client().containers.get(made["live"][0]).remove(force=True)
        engine.client().networks.get(made["live"][1]).remove()


def test_a_container_that_cannot_start_is_not_left_created(tiny_image):
    """A trial: verify of an image without python3 left a "Created" container behind."""
    name = _name()
    spec = engine.ContainerSpec(image=tiny_image, command=("python3", "-V"), name=name)
    with pytest.raises(EngineError, match="python3"):
        with engine.container(spec):
            pass
    assert not _exists(name)


def test_a_runs_own_containers_are_stopped_on_ctrl_c(tiny_image):
    """A trial: Ctrl-C in pipeline.run left the verify stage's container running to its end. The
    runner removes the containers this process owns (engine.OWNER = proc.owner())."""
    from paddlecd import proc

    name = _name()
    spec = engine.ContainerSpec(image=tiny_image, command=("sleep", "120"), name=name,
                                labels={engine.OWNER: proc.owner()}, keep=True)
    with engine.container(spec):
        pass
    assert _exists(name)
    assert engine.remove_owned() == [name] and not _exists(name)


def test_an_images_config_env_is_read_as_the_toolkit_reads_it(tmp_path, docker_engine):
    """engine.image_env returns Config.Env as {NAME: value}, checked against the docker CLI's own
    inspect; the NVIDIA_REQUIRE_CUDA of NVIDIA's 12.6 base (tests/data/drivers) survives whole,
    spaces and all, and verify's driver rule reads it (libnvidia-container dsl.c @ 5823754b)."""
    from paddlecd.verify import drivers
    from paddlecd.verify.requirements import Device, Host

    from support import ROOT

    require = json.loads((ROOT / "tests/data/drivers/nvidia_require_cuda.json").read_text())[
        "images"]["12.6"]["NVIDIA_REQUIRE_CUDA"]
    tar_path = tmp_path / "empty.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("tmp")
        info.type, info.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(info)
    ref = f"paddlecd-test/env-{WORKER}:{uuid.uuid4().hex[:8]}"
    engine.import_rootfs(str(tar_path), ref, changes=[
        f'ENV NVIDIA_REQUIRE_CUDA="{require}"', "ENV CUDA_VERSION=12.6.0", "ENV EMPTY="])
    try:
        env = engine.image_env(ref)
        inspect = ["docker", "image", "inspect", "--format", "{{json .Config.Env}}", ref]
        cli = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout
        assert env == dict(e.split("=", 1) for e in json.loads(cli))
        assert env["NVIDIA_REQUIRE_CUDA"] == require and env["EMPTY"] == ""
        r535 = Host("535.104.05", "12.2", (Device("0", "GPU-0", "Unknown", "9.0"),))
        assert drivers.check_image("12.6", env, r535).ok
    finally:
        engine.remove_image(ref)


def test_a_second_verify_into_a_folder_refuses_while_the_first_runs(tiny_image, tmp_path):
    """Trial 9: a second verify of one digest removed the first's live smoke container as "left
    by a killed run"; the first then failed blaming the suite (exit 137). A live owner's smoke
    container is named and kept; a dead owner's is removed as before."""
    from paddlecd import config, proc
    from paddlecd.errors import VerifyError
    from paddlecd.verify import run as smoke

    from support import ROOT

    key = tmp_path / "verify" / "cpu-0123456789ab"
    spec = engine.ContainerSpec(image=tiny_image, command=("sleep", "120"), name=_name(),
                                labels={**smoke.out_label(key), engine.OWNER: proc.owner()},
                                keep=True)
    with engine.container(spec):
        pass
    settings = config.load({"state_dir": str(tmp_path / "state")}, root=ROOT, environ={})
    try:
        with pytest.raises(VerifyError, match=f"another verify is writing into {key} now"):
            smoke._one_container(settings, tiny_image, {}, tmp_path / "stage", None, key=key)
        assert _exists(spec.name)
    finally:
        engine.client().containers.get(spec.name).remove(force=True)


def test_what_a_killed_model_check_left_is_removed_by_the_next_check(tiny_image, tmp_path):
    """Trial 9: kill -9 of artifacts.check left its exited loader container and its scratch
    folder <state>/check/model-… for good. The next check removes those of a gone process and
    keeps a live one's."""
    from paddlecd import config, proc
    from paddlecd.artifacts import scratch

    from support import ROOT

    dead = subprocess.Popen(["sleep", "60"])
    gone_owner, gone_pid = proc.owner(dead.pid), dead.pid
    dead.kill()
    dead.wait()
    settings = config.load({"state_dir": str(tmp_path / "state")}, root=ROOT, environ={})
    names = {}
    for who, owner in (("dead", gone_owner), ("live", proc.owner())):
        spec = engine.ContainerSpec(image=tiny_image, command=("sh", "-c", "exit 0"),
                                    name=_name(), keep=True,
                                    labels={**scratch.CHECK_LABEL, engine.OWNER: owner})
        with engine.container(spec):
            pass
        names[who] = spec.name
    (settings.state / "check" / f"model-{gone_pid}-abc_12").mkdir(parents=True)
    live = scratch.folder(settings, "model")
    try:
        out = scratch.folder(settings, "model")
        assert not _exists(names["dead"]) and _exists(names["live"])
        assert sorted(p.name for p in (settings.state / "check").iterdir()) == sorted(
            [live.name, out.name])
    finally:
        engine.client().containers.get(names["live"]).remove(force=True)
