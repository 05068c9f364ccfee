"""Bandwidth expectations, the NCCL transport parser and the summary charts, on
recorded nccl-tests-style results and NCCL_DEBUG=INFO lines."""

from __future__ import annotations

import pytest

from paddlecd.verify import bandwidth, charts, nccl
from paddlecd.verify.evidence import Check, Evidence
from paddlecd.verify.run import warnings, write_summary

GIB = 1 << 30


def sweep(busbw_at_1gib: float) -> list[dict]:
    """A float32 sweep 4 KiB … 1 GiB shaped like nccl-tests output (busbw rising with size)."""
    sizes = [1 << p for p in range(12, 31, 2)]
    return [{"elements": s // 4, "dtype": "float32", "bytes": s, "wrong": 0,
             "busbw_GBps": busbw_at_1gib * s / GIB} for s in sizes]


def test_one_card_says_busbw_is_zero_by_definition():
    j = bandwidth.judge([], gpu_name="NVIDIA H100 80GB HBM3", cards=1)
    assert j.verdict == "one-card" and "0 by definition" in j.message
    check = j.to_check(0.8)
    assert check.passed and check.skipped and "one card" in check.message


def test_a_setup_without_a_row_is_no_expectation_not_a_pass():
    j = bandwidth.judge(sweep(20.0), gpu_name="NVIDIA L40S", cards=4)
    assert j.verdict == "no-expectation"
    assert "no expectation for 1×4×L40S over p2p" in j.message and "20.0 GB/s" in j.message
    check = j.to_check(0.8)
    assert check.skipped and check.metrics["verdict"] == "no-expectation"
    assert warnings([check]) == (f"{bandwidth.CHECK_NAME}: {check.message}",)


@pytest.mark.parametrize("name, transports, measured, verdict", [
    ("NVIDIA H100 80GB HBM3", ["P2P", "NVLS"], 0.8 * 480 - 0.1, "below"),  # just below
    ("NVIDIA H100 80GB HBM3", ["P2P", "NVLS"], 0.8 * 480 + 0.1, "pass"),   # just above
    ("NVIDIA H100 80GB HBM3", ["P2P"], 0.8 * 370 + 0.1, "pass"),          # ring row
    ("NVIDIA A100-SXM4-80GB", ["P2P"], 40.0, "below"),
])
def test_threshold_is_a_fraction_of_the_row(name, transports, measured, verdict):
    j = bandwidth.judge(sweep(measured), gpu_name=name, cards=8, transports=transports)
    assert j.verdict == verdict and j.message_bytes == GIB
    check = j.to_check(0.8)
    assert check.passed == (verdict == "pass") and not check.skipped
    assert check.metrics["source"].startswith("NVIDIA/nccl-tests#")
    if verdict == "below":  # measured, expected and source in the one line
        assert f"busbw {measured:.1f} GB/s at 1024 MiB is below 0.8 ×" in check.message
        assert "source: NVIDIA/nccl-tests#" in check.message


def test_the_fraction_is_configurable():
    results = sweep(300.0)
    kw = {"gpu_name": "NVIDIA H100 80GB HBM3", "cards": 8, "transports": ["NVLS"]}
    assert bandwidth.judge(results, fraction=0.6, **kw).verdict == "pass"
    assert bandwidth.judge(results, fraction=0.8, **kw).verdict == "below"


def test_every_row_names_a_public_source():
    assert all(row.source and "#" in row.source for row in bandwidth.TABLE)
    keys = [(r.gpu, r.cards, r.nodes, r.interconnect) for r in bandwidth.TABLE]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("name, model", [
    # Product names as the driver lists them (NVIDIA/open-gpu-kernel-modules 560.31.02 README.md,
    # "Compatible GPUs") and nvidia-smi prints them.
    ("NVIDIA A100-SXM4-40GB", "A100-SXM"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM"),
    ("NVIDIA A100-SXM-64GB", "A100-SXM"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIe"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe"),
    ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    ("NVIDIA H200", "H200-SXM"),
    ("NVIDIA H200 NVL", "H200-NVL"),
    ("NVIDIA GH200 480GB", "GH200 480GB"),  # Grace Hopper: no row, not an H200
    ("NVIDIA GH200 120GB", "GH200 120GB"),
    ("NVIDIA H800", "H800"),
    ("NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB"),
    ("Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB"),
])
def test_gpu_models_from_cuda_device_names(name, model):
    assert bandwidth.gpu_model(name) == model


def _smoke_checks(results, *, world_size=8, skipped=False, count=8):
    env = Check("environment/test_gpu_devices_visible", True,
                metrics={"device_count": count, "gpu_name": "NVIDIA A100-SXM4-80GB"})
    ar = Check("allreduce/test_allreduce_exact_sums", True, skipped=skipped,
               metrics={} if skipped else {"world_size": world_size, "results": results})
    return [env, ar]


def test_check_from_the_recorded_smoke_checks():
    passed = bandwidth.check(_smoke_checks(sweep(231.0)), fraction=0.8, transports=["P2P"])
    assert passed.passed and passed.metrics["expected_GBps"] == 230.0
    one = bandwidth.check(_smoke_checks([], skipped=True, count=1), fraction=0.8)
    assert one.skipped and one.metrics["verdict"] == "one-card"
    broken = bandwidth.check(_smoke_checks([]), fraction=0.8)
    assert not broken.passed and "no all-reduce results" in broken.message


RECORDED_NCCL = """\
gpu1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
gpu1:123:456 [1] NCCL INFO Channel 00/0 : 1[21000] -> 0[1000] via P2P/direct pointer
gpu1:123:456 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct
gpu1:123:456 [0] NCCL INFO NVLS multicast support is not available on dev 0
gpu1:123:456 [0] NCCL INFO Using network IB
gpu1:123:456 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
[rank 0] a training line that mentions via NET/Socket/0
"""


def test_nccl_transports_from_info_lines():
    assert nccl.transports(RECORDED_NCCL.splitlines()) == ("IB", "P2P", "SHM")
    assert nccl.transports(["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/Socket/0"]) \
        == ("Socket",)
    assert nccl.transports(["h:1:2 [0] NCCL INFO Connected NVLS"]) == ("NVLS",)
    assert nccl.transports([]) == ()


def test_interconnect_follows_transports_and_nodes():
    assert bandwidth.interconnect("H100-SXM", nodes=1, transports=["NVLS", "P2P"]) == "nvls"
    assert bandwidth.interconnect("H100-SXM", nodes=1, transports=["P2P"]) == "nvlink"
    assert bandwidth.interconnect("H100-PCIe", nodes=1, transports=["P2P"]) == "p2p"
    assert bandwidth.interconnect("A100-SXM", nodes=3, transports=["IB", "P2P"]) == "ib"
    assert bandwidth.interconnect("A100-SXM", nodes=2, transports=[]) == "socket"


def _record(**kw) -> Evidence:
    checks = (
        Check("allreduce/test_allreduce_exact_sums", True,
              metrics={"world_size": 2, "results": [
                  {"dtype": "float32", "bytes": 4096, "busbw_GBps": 0.5},
                  {"dtype": "int32", "bytes": 4096, "busbw_GBps": 9.0},
                  {"dtype": "float32", "bytes": 4, "busbw_GBps": 0.001}]}),
        Check("convergence/test_single_process_reaches_threshold", True,
              metrics={"loss_every": 20, "loss_curve": [0.635, 0.2, 0.0615]}),
    )
    return Evidence(digest="sha256:" + "ab" * 32, reference="r@sha256:" + "ab" * 32,
                    variant="cpu", passed=True, created="2026-11-29T00:00:00Z", checks=checks,
                    **kw)


def test_charts_are_mermaid_xycharts_of_busbw_and_loss():
    busbw, loss = charts.charts(_record())
    assert busbw.splitlines() == [
        "```mermaid", "xychart-beta", '    title "all-reduce busbw, 2 ranks on 1 node(s)"',
        '    x-axis "message size" ["4 B", "4 KiB"]', '    y-axis "busbw (GB/s)" 0 --> 0.525',
        "    line [0.001, 0.5]", "```"]
    assert '    x-axis "step" ["0", "20", "40"]' in loss.splitlines()
    assert "    line [0.635, 0.2, 0.0615]" in loss.splitlines()
    assert charts.size_label(GIB) == "1 GiB" and charts.size_label(1536) == "1.5 KiB"


def test_no_results_no_chart():
    bare = Evidence(digest="sha256:" + "ab" * 32, reference="r", variant="cpu", passed=False,
                    created="2026-11-29T00:00:00Z")
    assert charts.charts(bare) == []


def test_summary_draws_the_charts_and_lists_warnings(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    text = write_summary(_record(warnings=("allreduce/busbw_expectation: no expectation",)),
                         tmp_path)
    assert text.count("```mermaid") == 2
    assert "- ⚠️ allreduce/busbw_expectation: no expectation" in text
    assert (tmp_path / "summary.md").read_text() == text


def test_verify_jobs_render_as_deploys_indexed_job_and_validate(tmp_path):
    import kubernetes_validate

    from paddlecd import config
    from paddlecd.cluster.render import Target
    from paddlecd.verify import nodes_k8s

    from support import ROOT

    settings = config.load(root=ROOT, environ={})  # the pods get this checkout's smoke/
    target = Target("registry.example.com/paddlecd/paddle@sha256:" + "4f" * 32, "cpu")
    docs = nodes_k8s.manifests(settings, target, job_id=nodes_k8s.job_id(), nodes=2,
                               gpus_per_node=0, namespace="ml", pull_secret="paddlecd-registry")
    assert [d["kind"] for d in docs] == ["ConfigMap", "Service", "Job"]  # one job, both checks
    for doc in docs:
        assert kubernetes_validate.validate(doc, "1.30", strict=True) == "1.30"
    job = docs[2]["spec"]
    assert job["completions"] == job["parallelism"] == 2 and job["completionMode"] == "Indexed"
    argv = job["template"]["spec"]["containers"][0]["command"]
    assert argv[argv.index("--nnodes") + 1] == "2" and "/smoke/workers/collective.py" in argv


def test_worker_results_become_the_smoke_checks():
    from paddlecd.verify import nodes as multinode

    ok = multinode.judge("allreduce", {"world_size": 2, "backend": "gloo", "results": sweep(1.0)},
                         world_size=2, duration_s=1.0)
    assert ok.passed and ok.name == "allreduce/test_allreduce_exact_sums"
    short = multinode.judge("allreduce",
                            {"world_size": 1, "backend": "gloo", "results": sweep(1.0)},
                            world_size=2, duration_s=1.0)
    assert not short.passed and "world size 1, expected 2" in short.message
    losses = [0.6, 0.1, 0.06]
    dp = multinode.judge("train_dp", {"world_size": 2, "losses": losses,
                                  "single_losses": [0.6, 0.1, 0.06 * (1 + 1e-3)]},
                     world_size=2, duration_s=1.0)
    assert not dp.passed and "relative diff 9.99e-04 > 0.0001" in dp.message
