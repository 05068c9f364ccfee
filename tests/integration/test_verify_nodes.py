"""``verify --nodes 2`` for real: the collective checks as one job of 2 containers on one network
(gloo, smoke/workers/collective.py), on the Paddle CPU image of the ``paddle_image`` fixture
pushed to the TLS + htpasswd test registry; each rank's logs copied out of its container before
it is removed; and a rank that cannot reach the master fails fast with the address named. The
Kubernetes path is tested against a scripted API server in tests/unit/test_verify_nodes_k8s.py
(no API server can run here)."""

from __future__ import annotations

import time

import pytest

from paddlecd import engine
from paddlecd.cluster.render import Target
from paddlecd.verify import nodes as multinode
from paddlecd.verify import run as smoke

from support import project_settings


@pytest.fixture(scope="module")
def image_by_digest(paddle_image, registry):
    """``paddle_image`` pushed to the test registry: ``host/paddlecd/verify-nodes@sha256:…``."""
    ref = f"{registry.host}/paddlecd/verify-nodes:cpu"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
        engine.tag(paddle_image, ref)
        digest = engine.push(ref)
    yield f"{registry.host}/paddlecd/verify-nodes@{digest}"
    engine.remove_image(ref)  # the tag only: the image stays for other tests


def test_two_node_verify_passes_and_lists_both_nodes(image_by_digest, registry, tmp_path,
                                                     monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
    settings = project_settings(tmp_path / "state", registry=registry)
    lines: list[str] = []
    done = smoke.verify(settings, image=image_by_digest, out_dir=tmp_path / "out", nodes=2,
                        on_line=lines.append)
    assert done.passed, [c.message for c in done.failed] or lines[-30:]
    names = [c.name for c in done.record.checks]
    assert names == list(multinode.WORKERS.values())
    allreduce, dp = done.record.checks
    assert allreduce.metrics["world_size"] == 2 and allreduce.metrics["backend"] == "gloo"
    assert dp.metrics["relative_difference"] <= multinode.DP_RTOL
    facts = done.record.nodes
    assert [f["rank"] for f in facts] == [0, 1] and done.record.node_count == 2
    assert len({f["hostname"] for f in facts}) == 2 and all(f["gpus"] == 0 for f in facts)
    assert all(f["transport"] == multinode.GLOO for f in facts)  # CPU: gloo, no NCCL transport
    assert allreduce.metrics["transport"] == "none/gloo" and done.record.to_json()["nodes"] == facts
    for rank in (0, 1):  # every rank's logs, copied out before the containers went
        own = tmp_path / "out" / "logs" / multinode.JOB / f"rank-{rank}.log"
        assert f"rendezvous: rank {rank} on " in own.read_text(), own
        workerlog = own.parent / f"rank-{rank}" / "workerlog.0"  # the launcher's, copied out
        for worker in multinode.WORKERS:  # both parts ran in the one launch
            assert f"{worker}: rank {rank}/2 " in workerlog.read_text(), list(own.parent.rglob("*"))
    assert (tmp_path / "out" / "evidence.json").is_file()
    junit = smoke.parse_junit(tmp_path / "out" / "junit.xml")  # the attestation's junit layer
    assert [c.name for c in junit] == names and all(c.passed for c in junit)
    assert "```mermaid" in (tmp_path / "out" / "summary.md").read_text()
    assert not (settings.state / "evidence").exists()  # one-container evidence is not replaced


def test_a_rank_that_cannot_reach_the_master_fails_fast_naming_it(settings, image_by_digest,
                                                                  tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    started = time.monotonic()
    ran = multinode.run_local(settings, Target(image_by_digest, "cpu"), nodes=2, gpus_per_node=0,
                          out=out, on_line=lambda _: None, master="no-such-master.invalid:36543",
                          timeout=5)
    assert time.monotonic() - started < 90  # the launcher alone would wait until the deadline
    check, dp = ran.checks  # the one job failed before either part
    assert not check.passed and check.name == multinode.WORKERS["allreduce"]
    assert "rank 1" in check.message
    assert "cannot reach the master no-such-master.invalid:36543 within 5s" in check.message
    assert not dp.passed and dp.message.startswith("not run: ") and check.name in dp.message
    failed = (out / "logs" / "collective" / "rank-1.log").read_text()  # kept though it failed
    assert "rendezvous: rank 1 cannot reach the master no-such-master.invalid:36543" in failed


def test_the_k8s_dry_run_refuses_cards_for_a_cpu_image_as_the_real_run(image_by_digest, registry,
                                                                        tmp_path):
    """Trial 9: ``verify --cluster k8s --gpus-per-node 1 --dry-run`` on a CPU image printed
    manifests asking nvidia.com/gpu per pod, exit 0, while the real run refuses. The dry run reads
    the image's labels from the registry as the real k8s run does (no API server runs here)."""
    from support import invoke

    env = {"PADDLECD_REGISTRY_URL": registry.host,
           "PADDLECD_REGISTRY_CA_FILE": str(registry.ca_file),
           "DOCKER_CONFIG": str(registry.docker_config_dir),
           "PADDLECD_STATE_DIR": str(tmp_path / "state")}
    run = invoke("verify", "--image", image_by_digest, "--nodes", "2", "--cluster", "k8s",
                 "--gpus-per-node", "1", "--dry-run", **env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--gpus-per-node 1: " in run.stderr and "is not a GPU image" in run.stderr
    assert "nvidia.com/gpu" not in run.stdout
    ok = invoke("verify", "--image", image_by_digest, "--nodes", "2", "--cluster", "k8s",
                "--dry-run", **env)
    assert ok.returncode == 0 and "kind: Job" in ok.stdout, ok.stderr
