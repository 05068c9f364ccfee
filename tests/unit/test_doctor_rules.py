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
    assert "no usable kubeconfig" in e.value.cause and "KUBECONFIG" in e.value.hint
