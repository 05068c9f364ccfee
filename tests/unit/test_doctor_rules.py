"""doctor's GPU, runtime and disk rules on given host facts (the engine/registry checks run for real
in tests/integration/test_doctor.py). No GPU exists on the test machines: the GPU-present cases use
driver versions from NVIDIA's table as facts."""

from __future__ import annotations

import pytest

from paddlecd import config, doctor
from paddlecd.errors import ClusterError
from paddlecd.image import variants

from support import ROOT


def host(settings, names, *, driver=None, gpus=0, info=None, require_gpu=False):
    chosen = tuple(variants.get(settings, n) for n in names)
    return doctor.Host(
        settings=settings,
        variants=chosen,
        driver=driver,
        gpus=gpus,
        info=info or {"Runtimes": {"runc": {}}, "DockerRootDir": "/"},
        require_gpu=require_gpu,
    )


def test_no_gpu_and_cpu_only_is_fine(settings):
    row = doctor.check_gpu_driver(host(settings, ["cpu"]))
    assert (row.status, row.detail) == ("ok", "no GPU on this host; only CPU variants in use")


def test_require_gpu_with_only_cpu_variants_is_warned_not_dropped(settings):
    """Trial 5: ``doctor --require-gpu --variant cpu`` on a host without a GPU said "OK" and
    nothing of the flag. It applies to GPU variants (their "no GPU" fails instead of warning):
    with none selected it is said to require nothing (a warning, exit 0: the gpu-smoke workflow
    passes it for the cpu variant in tests/integration/test_workflows_act.py)."""
    row = doctor.check_gpu_driver(host(settings, ["cpu"], require_gpu=True))
    assert row.status == "warn" and "so --require-gpu requires nothing here" in row.detail
    assert "drop --require-gpu" in row.hint


def test_gpu_variants_without_gpu_warn_unless_required(settings):
    row = doctor.check_gpu_driver(host(settings, ["cpu", "cu126"]))
    assert row.status == "warn" and "no GPU on this host" in row.detail and "cu126" in row.detail
    assert doctor.check_gpu_driver(host(settings, ["cu126"], require_gpu=True)).status == "fail"


def test_driver_below_the_cuda_minimum_fails(settings):
    row = doctor.check_gpu_driver(host(settings, ["cu118", "cu126"], driver="470.82.01", gpus=8))
    assert row.status == "fail" and "minimum for CUDA 12.x" in row.detail
    assert row.hint == "upgrade the NVIDIA driver to >= 560.28.03"


def test_minor_version_compatibility_warns(settings):
    row = doctor.check_gpu_driver(host(settings, ["cu126"], driver="535.104.05", gpus=2))
    assert row.status == "warn" and "minor-version compatibility" in row.detail


def test_recent_driver_is_ok_for_every_gpu_variant(settings):
    row = doctor.check_gpu_driver(
        host(settings, ["cu118", "cu126", "cu120-p261"], driver="570.86.15", gpus=4)
    )
    assert row.status == "ok" and "11.8, 12.0, 12.6" in row.detail


def test_nvidia_runtime_missing_is_a_warning_without_gpu_and_a_failure_with_one(settings):
    assert doctor.check_nvidia_runtime(host(settings, ["cu126"])).status == "warn"
    assert (
        doctor.check_nvidia_runtime(host(settings, ["cu126"], driver="570.86.15", gpus=1)).status
        == "fail"
    )
    present = {"Runtimes": {"runc": {}, "nvidia": {}}, "DockerRootDir": "/"}
    assert (
        doctor.check_nvidia_runtime(
            host(settings, ["cu126"], driver="570.86.15", gpus=1, info=present)
        ).status
        == "ok"
    )


def test_disk_budget_counts_only_runnable_variants_as_blocking(settings, monkeypatch):
    free = {"value": 10 * doctor.GIB}
    monkeypatch.setattr(
        doctor.shutil, "disk_usage", lambda p: type("U", (), {"free": free["value"]})()
    )
    assert doctor.check_disk(host(settings, ["cpu"])).status == "ok"
    assert (
        doctor.check_disk(host(settings, ["cpu", "cu126"])).status == "warn"
    )  # the GPU one cannot run here
    assert (
        doctor.check_disk(host(settings, ["cpu", "cu126"], driver="570.86.15", gpus=1)).status
        == "fail"
    )
    free["value"] = 1 * doctor.GIB
    assert doctor.check_disk(host(settings, ["cpu"])).status == "fail"


def test_kubeconfig_is_skipped_for_local_and_checked_for_k8s(tmp_path, monkeypatch):
    local = config.load({}, root=ROOT, environ={})
    assert doctor.check_kubeconfig(host(local, ["cpu"])).status == "skip"
    k8s = config.load({"cluster.kind": "k8s"}, root=ROOT, environ={})
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ClusterError) as e:  # doctor.run turns this into a FAIL row with the hint
        doctor.check_kubeconfig(host(k8s, ["cpu"]))
    assert "no kubeconfig: " in e.value.cause and "KUBECONFIG" in e.value.hint


def test_a_locked_base_on_the_engine_is_judged_by_its_own_nvidia_require_cuda(settings,
                                                                               monkeypatch):
    """The R535 host the table only warns about (12.6 toolkit driver 560.28.03) is fine for a base
    whose NVIDIA_REQUIRE_CUDA lists the R535 branch (NVIDIA's 12.6 base, tests/data/drivers), and
    a GeForce card on R535 fails: libnvidia-container dsl.c @ 5823754b, configure.c @ 09df17a2."""
    import json

    from paddlecd.verify import drivers
    from paddlecd.verify.requirements import Device, Host

    require = json.loads((ROOT / "tests/data/drivers/nvidia_require_cuda.json").read_text())[
        "images"]["12.6"]["NVIDIA_REQUIRE_CUDA"]
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    base = host(settings, ["cu126"], driver="535.104.05", gpus=8)
    base = doctor.Host(**{**base.__dict__, "base_env": {"cu126": {"NVIDIA_REQUIRE_CUDA": require}}})
    brand = {"value": "Unknown"}
    monkeypatch.setattr(drivers, "host_facts", lambda d: Host(d, "12.2", (
        Device("0", "GPU-0", brand["value"], "9.0"),)))
    row = doctor.check_gpu_driver(base)
    assert row.status == "warn" and "satisfies the image's NVIDIA_REQUIRE_CUDA" in row.detail
    brand["value"] = "GeForce"
    row = doctor.check_gpu_driver(base)
    assert row.status == "fail"
    assert "cu126: the NVIDIA Container Toolkit would not start" in row.detail
    assert "NVIDIA_REQUIRE_CUDA" in row.hint


def test_base_envs_reads_only_locked_gpu_bases_present_on_the_engine(settings, monkeypatch):
    """What build pulled (the lock's pinned base) is read; a base not on the engine or a CPU
    variant is left to the table, and an engine error leaves it out instead of failing doctor."""
    from paddlecd import engine
    from paddlecd.errors import EngineError
    from paddlecd.image import lock

    entry = lock.LockEntry(variant="cu126", base="paddlepaddle/paddle:3.0.0-gpu-cuda12.6",
                           digest="sha256:" + "1" * 64, media_type="m", locked="t")
    other = lock.LockEntry(variant="cu118", base="paddlepaddle/paddle:3.0.0-gpu-cuda11.8",
                           digest="sha256:" + "2" * 64, media_type="m", locked="t")
    monkeypatch.setattr(lock, "read", lambda s: {"cu126": entry, "cu118": other})
    present = {entry.pinned}

    def exists(ref):
        if ref == other.pinned:
            raise EngineError("inspecting: engine gone", "start it")
        return ref in present

    monkeypatch.setattr(engine, "image_exists", exists)
    monkeypatch.setattr(engine, "image_env", lambda ref: {"NVIDIA_REQUIRE_CUDA": "cuda>=12.6"})
    chosen = [variants.get(settings, n) for n in ("cpu", "cu118", "cu126")]
    assert doctor.base_envs(settings, chosen) == {"cu126": {"NVIDIA_REQUIRE_CUDA": "cuda>=12.6"}}


def test_keys_are_loaded_named_by_their_id_and_matched(tmp_path, monkeypatch):
    """A trial (issue 21): doctor said nothing about the signing and trusted keys. Each loads
    (a broken one is the error of the file, which doctor.run makes a FAIL row), is named by the
    id keygen prints, and a signing key no trusted key matches is a warning."""
    from paddlecd.errors import SigningKeyError
    from paddlecd.signing import keys

    monkeypatch.delenv(keys.ENV_PEM, raising=False)
    mine, mine_pub = keys.keygen(tmp_path / "mine")
    _, other_pub = keys.keygen(tmp_path / "other")

    def row(**values):
        s = config.load({"state_dir": str(tmp_path / "state"), **values}, root=ROOT, environ={})
        return doctor.check_keys(host(s, ["cpu"]))

    none = row()
    assert none.status == "warn" and none.detail == "no signing key; trusted: none"
    ok = row(**{"verify.signing_key": str(mine), "release.trusted_keys": str(mine_pub)})
    kid = keys.key_id(mine_pub)
    assert ok.status == "ok" and ok.detail == (
        f"signing key ({mine}) {kid}; trusted: {kid} ({mine_pub})")
    foreign = row(**{"verify.signing_key": str(mine), "release.trusted_keys": str(other_pub)})
    assert foreign.status == "warn" and foreign.hint.startswith(f"{kid} is not a trusted key")
    (tmp_path / "bad.pub").write_text("not a key")
    with pytest.raises(SigningKeyError, match=r"bad.pub is not a PEM public key"):
        row(**{"verify.signing_key": str(mine),
               "release.trusted_keys": str(tmp_path / "bad.pub")})
    with pytest.raises(SigningKeyError, match=r"missing.key does not exist"):
        row(**{"verify.signing_key": str(tmp_path / "missing.key")})
    with pytest.raises(SigningKeyError, match=r"signing.pub is not an unencrypted PEM private"):
        row(**{"verify.signing_key": str(mine), "release.trusted_keys": str(mine_pub),
               "artifacts.signing_key": str(mine_pub)})  # a public key where the private goes



def test_a_state_folder_that_cannot_be_written_fails_its_row(settings, monkeypatch):
    """Trial 15: doctor said all was well for a read-only state folder that every task then failed
    to write. ``access(2)`` answers EROFS for a read-only mount; here the kernel's answer is
    given (a read-only mount needs root: trial 15 made one by hand, and the row said OK)."""
    import os

    ok = doctor.check_state(host(settings, ["cpu"]))
    assert ok.status == "ok" and "writable" in ok.detail
    real = os.access
    monkeypatch.setattr(doctor.os, "access",
                        lambda p, mode: False if mode & os.W_OK else real(p, mode))
    row = doctor.check_state(host(settings, ["cpu"]))
    assert row.status == "fail" and "cannot be written (a read-only mount" in row.detail
    assert row.detail.startswith(str(settings.state)) and "PADDLECD_STATE_DIR" in row.hint
