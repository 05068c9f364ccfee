"""podman as the engine, for real: podman 4.3's Docker-compatible API service started by the suite
(support/podman.py, config and store in a temp folder), the real TLS + htpasswd ``registry``.

`invoke build push verify --variant cpu` with ``engine.kind: podman`` builds with buildah through
the engine API (secrets, cache mounts, labels), pushes, reads the digest back from the registry
and verifies the digest in a podman container; the pushed image then trains as a 2-rank local job
on a podman network. The base comes from ``paddle_base`` (the session's one bootstrap, copied into
this worker's registry); the build pulls it into podman's store. The tier runs on one worker.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import docker
import pytest
import requests

from paddlecd import deployment, engine
from paddlecd.errors import RegistryError
from paddlecd.image import candidate
from paddlecd.verify import evidence

from support import UNIQUE, cli_env, invoke, project_settings

pytestmark = [pytest.mark.xdist_group("podman"), pytest.mark.uses_base]
REPOSITORY = f"paddlecd/podman-{UNIQUE}"


@pytest.fixture
def on_podman(podman_service, monkeypatch):
    """This process's engine client pointed at ``podman_service`` for one test, then back."""
    monkeypatch.setenv("DOCKER_HOST", podman_service.host)
    engine.reset_client()
    yield podman_service
    engine.reset_client()
    monkeypatch.undo()
    engine.reset_client()


@pytest.fixture(scope="module")
def podman_run(podman_service, registry, main_state, paddle_base, tmp_path_factory):
    """`invoke build push verify --variant cpu` on podman (``PADDLECD_ENGINE_KIND=podman``,
    ``DOCKER_HOST`` its socket), in CI mode, with its own state folder and repository."""
    state = tmp_path_factory.mktemp("podman-state")
    for name in ("lock.yaml", "lock.local.yaml"):  # the base's pin (bootstrapped: per machine)
        if (main_state / name).exists():
            shutil.copy(main_state / name, state / name)
    env = cli_env(registry, state, CI="true", DOCKER_HOST=podman_service.host,
                  PADDLECD_ENGINE_KIND="podman", PADDLECD_REGISTRY_REPOSITORY=REPOSITORY)
    run = invoke("build", "push", "verify", "--variant", "cpu", env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run, project_settings(state, registry=registry,
                                 **{"registry.repository": REPOSITORY})


def test_build_push_verify_of_the_cpu_variant_on_podman(podman_run, registry, podman_service):
    run, settings = podman_run
    assert "builder: podman 4.3.1 (buildah, engine API)" in run.stderr
    assert re.search(r"STEP \d+/\d+: RUN --mount=type=secret", run.stderr)  # buildah's stream
    cand = candidate.load_candidate(settings, "cpu")
    assert cand and cand.reference.startswith(f"{registry.host}/{REPOSITORY}@sha256:")
    # the registry serves that digest for the tag (read with requests, not paddlecd's client)
    served = _served_digest(registry, REPOSITORY, run_tag(settings))
    assert served == cand.digest
    record = evidence.load(settings, cand.digest)
    assert record.passed is True
    allreduce = next(c for c in record.checks if c.name == "allreduce/test_allreduce_exact_sums")
    assert allreduce.metrics["world_size"] == 2 and allreduce.metrics["wrong_elements"] == 0
    # built in podman's store, with the build's OCI labels; Docker never saw it
    tag = run_tag(settings)
    pod = docker.DockerClient(base_url=podman_service.host)  # not paddlecd's client
    try:
        assert pod.images.get(tag).labels["io.paddlecd.variant"] == "cpu"
    finally:
        pod.close()
    assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode


MANIFEST_TYPES = ", ".join(["application/vnd.oci.image.manifest.v1+json",
                            "application/vnd.docker.distribution.manifest.v2+json"])


def run_tag(settings) -> str:
    """The candidate tag the build recorded (``host/repo:cpu-<sha>``)."""
    return json.loads((settings.state / "builds" / "cpu.json").read_text())["tag"]


def _served_digest(registry, repository: str, tag: str) -> str:
    """``Docker-Content-Digest`` of the registry's answer for ``tag``, read with requests."""
    answer = requests.head(f"https://{registry.host}/v2/{repository}/manifests/"
                           f"{tag.rsplit(':', 1)[1]}", headers={"Accept": MANIFEST_TYPES},
                           auth=next(iter(registry.users.items())), verify=str(registry.ca_file),
                           timeout=10)
    answer.raise_for_status()
    return answer.headers["Docker-Content-Digest"]


def test_a_two_rank_local_job_trains_on_a_podman_network(podman_run, on_podman, tmp_path):
    from test_cluster_local import final_losses, write_job

    _, settings = podman_run
    reference = candidate.load_candidate(settings, "cpu").reference
    plan = deployment.plan(settings, job=str(write_job(tmp_path, steps=100)), image=reference,
                        cluster="local")
    lines: list[str] = []
    location = deployment.run(settings, plan, on_event=lines.append, on_line=lines.append)
    assert set(final_losses(lines)) == {"0", "1"}, lines[-30:]
    # rank 1 reached the master by its DNS alias on the job's podman network (aardvark-dns)
    assert any("Successfully connected to" in ln and f"{plan.job_id}-0.{plan.job_id}" in ln
               for ln in lines), lines[-30:]
    assert Path(location + ".pdiparams").is_file()
    client = engine.client()
    assert engine.kind() == "podman"
    assert not client.containers.list(all=True, filters={"label": f"paddlecd.io/job={plan.job_id}"})
    assert plan.job_id not in [n.name for n in client.networks.list()]


def test_an_imported_rootfs_keeps_its_tag_and_a_plain_http_push_is_one_line(on_podman, tmp_path):
    """podman's import ignores the tag and lists short names as docker.io/library/…; a registry
    on plain HTTP that podman was not told about fails in-band, as one line with the fix."""
    tar_path = tmp_path / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add("/bin/sh", arcname="bin/sh")
    ref = f"paddlecd-test/podman-{UNIQUE}:t1"
    image_id = engine.import_rootfs(str(tar_path), ref)
    try:
        assert engine.image_exists(ref) and engine.image_id(ref) == image_id
        from paddlecd.registry.embedded import RegistryServer, free_port

        plain = RegistryServer(tmp_path / "plain", port=free_port()).start()
        try:
            target = f"{plain.host}/paddlecd/podman:t1"
            engine.tag(ref, target)
            with pytest.raises(RegistryError) as e:
                engine.push(target)
            assert e.value.cause == (f"pushing {target}: {plain.host} speaks plain HTTP and the "
                                     "engine expects HTTPS")
            assert "registries.conf" in e.value.hint
        finally:
            plain.stop()
            engine.remove_image(f"{plain.host}/paddlecd/podman:t1")
    finally:
        engine.remove_image(ref)
