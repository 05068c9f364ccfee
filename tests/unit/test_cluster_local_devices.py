"""Local multi-node GPU jobs on one machine: each rank's cards come from the cards the job may use.

A shared runner pins a job to some of the host's cards with NVIDIA_VISIBLE_DEVICES (indexes or
UUIDs, comma-separated: NVIDIA/nvidia-container-toolkit internal/config/image/cuda_image.go @
1081cecea97d60a9c4e715c3a9ecaa5323d7cdec DevicesFromEnvvars); verify.drivers.pinned_devices reads
it. Ranks must split those, not the host's cards from 0, or a pinned job takes its neighbour's.
"""

from __future__ import annotations

import pytest

from paddlecd.cluster import jobfile, local
from paddlecd.cluster.render import Target
from paddlecd.errors import ClusterError, ConfigError
from paddlecd.verify import nodes as multinode

from support import ROOT, project_settings

IMAGE = "registry.example.com/paddlecd/release@sha256:" + "4f" * 32


@pytest.mark.parametrize("devices, per_node, expected", [
    (None, 2, [("0", "1"), ("2", "3")]),  # not pinned: the host's cards from 0
    (["2", "3", "6", "7"], 2, [("2", "3"), ("6", "7")]),
    (["GPU-a", "GPU-b"], 1, [("GPU-a",), ("GPU-b",)]),
    (["2", "3"], 0, [None, None]),  # a CPU job gets no cards
])
def test_each_rank_takes_its_run_of_the_cards_the_job_may_use(devices, per_node, expected):
    """cuda_image.go DevicesFromEnvvars @ 1081cece: the pinned list, split per rank in order."""
    assert local.node_devices(2, per_node, devices) == expected


def test_too_few_pinned_cards_are_refused_naming_them():
    """Two ranks × two cards on a runner pinned to three: refused before any container."""
    with pytest.raises(ConfigError) as e:
        local.node_devices(2, 2, ["4", "5", "6"])
    assert e.value.cause == "2 nodes × 2 cards need 4 cards; this job is pinned to 3 (4,5,6)"
    assert "NVIDIA_VISIBLE_DEVICES" in e.value.hint


def test_the_rank_container_gets_its_cards():
    """The engine spec of rank 1 carries exactly the cards handed to it."""
    spec = jobfile.load(ROOT / "tests/data/cluster/jobs/gpu-eight.yaml").with_overrides(
        nodes=2, gpus=2)
    c = local._container(spec, Target(IMAGE, "cu126"), "j-0a1b2c", 1, gpus=("6", "7"))
    assert c.gpus == ("6", "7")
    assert local._container(spec, Target(IMAGE, "cu126"), "j-0a1b2c", 1).gpus == ("2", "3")


def test_verify_nodes_hands_the_pinned_cards_to_the_local_executor(tmp_path, monkeypatch):
    """verify --nodes 2 --gpus-per-node 1 on a runner pinned to cards 4,5: the executor is given
    those (verify.drivers.pinned_devices), so rank 0 runs on 4 and rank 1 on 5."""
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "4,5")
    seen = []

    def fake_run(spec, target, **kw):
        seen.append((spec.resources.gpus, kw["devices"]))
        raise ClusterError("stopped by the test", "nothing ran")

    monkeypatch.setattr(local, "run", fake_run)
    ran = multinode.run_local(project_settings(tmp_path / "state"), Target(IMAGE, "cu126"), nodes=2,
                          gpus_per_node=1, out=tmp_path / "out", on_line=lambda _: None)
    assert seen == [(1, ["4", "5"])] and not ran.checks[0].passed
