"""``--cluster local`` for real: a Paddle CPU image run as 2 containers on a Docker network (gloo).

Real Docker engine; the image is the ``paddle_image`` fixture (a locally built Paddle CPU image
whose default user is ``paddle``, uid 1000), pushed to the real TLS + htpasswd ``registry`` fixture
so the job runs it by digest, as deploy does. The training is examples/train_linear.py (a few
hundred steps of a linear model on synthetic data), mounted as the job's code folder.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
import yaml

from paddlecd import config, deployment, engine
from paddlecd.errors import ConfigError

from support import ROOT, clean_env, invoke, project_settings

# Read the export back with paddle.jit.load in the same image and score it on the training data.
LOAD_BACK = """
import sys; sys.path.insert(0, '/workspace/examples')
import numpy as np, paddle
from train_linear import synthetic
model = paddle.jit.load('/output/model')
x, y = synthetic(512)
pred = model(paddle.to_tensor(x)).numpy()
print('loaded shape', list(pred.shape), 'mse', float(np.mean((pred - y) ** 2)))
"""


@pytest.fixture(scope="module")
def image_by_digest(paddle_image, registry):
    """``paddle_image`` pushed to the test registry: ``host/paddlecd/cluster-test@sha256:…``."""
    ref = f"{registry.host}/paddlecd/cluster-test:cpu"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
        engine.tag(paddle_image, ref)
        digest = engine.push(ref)
    yield f"{registry.host}/paddlecd/cluster-test@{digest}"
    engine.remove_image(ref)  # the tag only: the image stays for other tests


def write_job(tmp_path: Path, *, steps: int, extra_args: tuple[str, ...] = ()) -> Path:
    """A job file training the example script, writing to ``tmp_path/out``."""
    job = {
        "name": "pytest-train",
        "nodes": 2,
        "command": {"script": "train_linear.py", "args": ["--steps", str(steps), *extra_args]},
        "code": {"path": str(ROOT / "examples"), "mountPath": "/workspace/examples"},
        "output": {"path": "out", "mountPath": "/output"},
        "resources": {"cpu": "1", "memory": "2Gi", "shm": "256Mi"},
        "activeDeadlineSeconds": 600,
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def leftovers(job_id: str) -> list[str]:
    """Containers and networks of ``job_id`` still present in the engine."""
    docker = engine.client()
    found = [
        c.name
        for c in docker.containers.list(all=True, filters={"label": f"paddlecd.io/job={job_id}"})
    ]
    return found + [n.name for n in docker.networks.list(names=[job_id]) if n.name == job_id]


def final_losses(lines: list[str]) -> dict[str, float]:
    """``{rank: final_loss}`` from the streamed, rank-prefixed logs."""
    out = {}
    for line in lines:
        m = re.match(r"\[rank (\d+)\] rank \d+/2 final_loss=([0-9.e+-]+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def test_two_containers_train_with_gloo_and_export_a_model_jit_load_reads(
    settings, image_by_digest, tmp_path
):
    plan = deployment.plan(
        settings, job=str(write_job(tmp_path, steps=300)), image=image_by_digest, cluster="local"
    )
    lines: list[str] = []
    location = deployment.run(settings, plan, on_event=lines.append, on_line=lines.append)

    assert location == str(tmp_path / "out" / "model")
    losses = final_losses(lines)
    assert set(losses) == {"0", "1"}, lines[-30:]
    assert max(losses.values()) < 0.01  # y = x·w + 0.5 + 0.01·noise: converged means ≈ noise level
    assert any(
        "Successfully connected to" in ln and f"{plan.job_id}-0.{plan.job_id}" in ln for ln in lines
    )
    assert Path(location + ".pdiparams").is_file()
    assert leftovers(plan.job_id) == []

    load_back = engine.ContainerSpec(
        image=image_by_digest,
        command=("python", "-c", LOAD_BACK),
        user="1000:1000",
        mounts=(
            engine.Mount(str(tmp_path / "out"), "/output", read_only=True),
            engine.Mount(str(ROOT / "examples"), "/workspace/examples", read_only=True),
        ),
    )
    with engine.container(load_back) as c:
        loaded = engine.wait(c, timeout=300)
    assert loaded.exit_code == 0, loaded.logs[-2000:]
    m = re.search(r"loaded shape \[512, 1\] mse ([0-9.e+-]+)", loaded.logs)
    assert m and float(m.group(1)) < 0.01, loaded.logs[-2000:]


def test_a_failing_rank_fails_the_job_with_its_log_tail(image_by_digest, tmp_path):
    """Through the CLI, as a user runs it: exit 9, the failing rank named, its log tail the hint."""
    job = write_job(tmp_path, steps=50, extra_args=("--fail-rank", "1"))
    result = invoke(
        "deploy",
        "--image",
        image_by_digest,
        "--job",
        str(job),
        "--cluster",
        "local",
        env=clean_env(drop=("PADDLECD_",), PADDLECD_STATE_DIR=str(tmp_path / "state")),
        timeout=600,
    )

    assert result.returncode == 9, result.stdout[-2000:] + result.stderr
    # Rank 0 fails too (its collective breaks); rank 1 must be named with its own log tail.
    assert re.search(
        r"error: .*rank 1 \(pytest-train-[0-9a-f]{6}-1\) failed with exit code \d+.*"
        r"; the job was stopped",
        result.stderr,
    )
    hint = result.stderr.split("\nhint: ", 1)[1]  # at a line start: rank log lines start "[rank N]"
    assert "failing on purpose" in hint.split("last lines of rank 1:", 1)[1]
    plan = result.stderr  # the plan is on stderr, results on stdout
    job_id = re.search(r"deploy (pytest-train-[0-9a-f]{6}) on local", plan).group(1)
    assert leftovers(job_id) == []


def test_two_local_jobs_at_once_do_not_collide(settings, image_by_digest, tmp_path):
    plans = [
        deployment.plan(
            settings,
            job=str(write_job(tmp_path / str(i), steps=50)),
            image=image_by_digest,
            cluster="local",
        )
        for i in range(2)
    ]
    assert plans[0].job_id != plans[1].job_id
    results: dict[int, object] = {}

    def run(i: int) -> None:
        try:
            results[i] = deployment.run(
                settings, plans[i], on_event=lambda _: None, on_line=lambda _: None
            )
        except Exception as e:  # reported by the assertion below
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    assert results == {i: str(tmp_path / str(i) / "out" / "model") for i in range(2)}
    assert all(Path(str(r) + ".pdiparams").is_file() for r in results.values())


def test_a_release_that_does_not_exist_is_refused_before_anything_runs(registry_env, tmp_path):
    """``--release`` goes through paddlecd.release.promote.find against the real registry: an
    unknown release is a ConfigError (exit 2) and no container or network is created."""
    settings = project_settings(tmp_path / "state", registry=registry_env)
    with pytest.raises(ConfigError, match="unknown release 9.9.9-cpu"):
        deployment.plan(
            settings, job=str(write_job(tmp_path, steps=10)), release="9.9.9-cpu", cluster="local"
        )
    # only this release's: the other xdist worker's jobs come and go meanwhile (a whole-engine
    # before/after comparison failed in CI when one of them started a rank)
    mine = {"label": "paddlecd.io/release=9.9.9-cpu"}
    client = engine.client()
    assert client.containers.list(all=True, filters=mine) == []
    assert client.networks.list(filters=mine) == []


def test_a_variant_the_images_label_contradicts_is_refused(registry_env, tmp_path):
    """``deploy --image <digest> --variant V`` reads the image's ``io.paddlecd.variant`` label from
    the real registry, as verify does: a cpu image with ``--variant cu126`` is refused by name (a
    trial: it planned a GPU job on a CPU image); the label's own variant and no ``--variant``
    pass."""
    from paddlecd.registry.client import client_for

    from support.oci_images import push_image

    settings = project_settings(tmp_path / "state", registry=registry_env)
    digest = push_image(client_for(settings), "paddlecd/labelled",
                        labels={"io.paddlecd.variant": "cpu"})
    image = f"{registry_env.host}/paddlecd/labelled@{digest}"
    with pytest.raises(ConfigError, match=r"is variant 'cpu', not 'cu126'"):
        deployment.resolve(settings, release=None, image=image, variant="cu126")
    assert deployment.resolve(settings, release=None, image=image, variant="cpu").variant == "cpu"
    assert deployment.resolve(settings, release=None, image=image, variant=None).variant == "cpu"


def test_container_options_mirror_the_pod(tmp_path):
    """Each local rank gets the pod's uid, limits, shm and DNS name; GPU ranks get disjoint cards.
    (No GPU here: the device requests are checked as built, not run.)"""
    from paddlecd.cluster import jobfile, local
    from paddlecd.cluster.render import Target

    spec = jobfile.load(write_job(tmp_path, steps=1)).with_overrides(gpus=2)
    target = Target(
        reference="127.0.0.1:5000/x@sha256:" + "a" * 64, variant="cu126", release="1.4.0-cu126"
    )
    opts = [
        engine._run_kwargs(local._container(spec, target, "job-1a2b3c", rank)) for rank in (0, 1)
    ]

    assert [o["device_requests"][0]["DeviceIDs"] for o in opts] == [["0", "1"], ["2", "3"]]
    assert opts[1]["networking_config"]["job-1a2b3c"]["Aliases"] == ["job-1a2b3c-1.job-1a2b3c"]
    assert (opts[1]["user"], opts[1]["shm_size"], opts[1]["mem_limit"], opts[1]["nano_cpus"]) == (
        "1000:1000",
        256 * 2**20,
        2 * 2**30,
        10**9,
    )
    assert opts[1]["environment"]["JOB_COMPLETION_INDEX"] == "1"
    assert opts[1]["environment"]["PADDLE_MASTER"] == "job-1a2b3c-0.job-1a2b3c:36543"


def test_deploy_runs_a_promoted_release_resolved_to_its_digest(
    registry_env, paddle_image, tmp_path
):
    """The whole path behind ``invoke deploy --release 1.0.0-cpu``: the Paddle image pushed as a
    candidate, evidence recorded as verify writes it, promoted with paddlecd.release.promote
    (registry-side copy), then resolved by release.find to release-repo@digest, pulled by digest
    with credentials from DOCKER_CONFIG, and trained on for real."""
    import uuid

    from paddlecd import files
    from paddlecd.image import candidate
    from paddlecd.release import promote as release
    from paddlecd.signing import keys
    from paddlecd.verify import evidence, registry_store

    uid = uuid.uuid4().hex[:8]
    private, public = keys.keygen(tmp_path / "keys")
    settings = config.load(
        {
            "state_dir": str(tmp_path / "state"),
            "registry.repository": f"ci/cluster-{uid}",
            "release.repository": f"release/cluster-{uid}",
            "verify.signing_key": str(private),
            "release.trusted_keys": str(public),
        },
        root=ROOT,
    )
    engine.tag(paddle_image, f"{settings.candidate_repo}:cpu-test")
    digest = engine.push(f"{settings.candidate_repo}:cpu-test")
    candidate.save_candidate(
        settings,
        "cpu",
        reference=f"{settings.candidate_repo}@{digest}",
        digest=digest,
        tag="cpu-test",
    )
    record = evidence.Evidence(
        digest=digest,
        reference=f"{settings.candidate_repo}@{digest}",
        variant="cpu",
        passed=True,
        created=files.now_iso(),
        versions={"paddle": "3.0.0"},
        checks=tuple(
            evidence.Check(name=f"{m}/t", passed=True, duration_s=0.1)
            for m in evidence.REQUIRED_CHECKS
        ),
    )
    evidence.save(settings, record)
    # signed, attached to the digest, as verify does
    registry_store.publish(settings, record, tmp_path)
    release.promote(settings, variant="cpu", version="1.0.0", execute=True)

    plan = deployment.plan(
        settings, job=str(write_job(tmp_path, steps=50)), release="1.0.0-cpu", cluster="local"
    )
    assert plan.target.reference == f"{settings.release_repo}@{digest}"
    assert plan.manifests[1]["metadata"]["labels"]["paddlecd.io/release"] == "1.0.0-cpu"
    try:
        location = deployment.run(settings, plan, on_event=lambda _: None, on_line=lambda _: None)
    finally:
        for ref in (f"{settings.candidate_repo}:cpu-test", plan.target.reference):
            engine.remove_image(ref)
    assert Path(location + ".pdiparams").is_file()


def test_deploy_json_is_the_model_a_script_hands_to_upload(image_by_digest, tmp_path):
    """`deploy --json` prints one document (rank logs and the plan go to stderr) naming
    the job, the image digest and the model prefix it wrote, as demo.sh reads them."""
    import json

    job = write_job(tmp_path, steps=50)
    result = invoke("deploy", "--image", image_by_digest, "--job", str(job), "--cluster", "local",
                    "--json", timeout=600,
                    env=clean_env(drop=("PADDLECD_",), PADDLECD_STATE_DIR=str(tmp_path / "state")))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    doc = json.loads(result.stdout)
    assert doc["executed"] is True and doc["digest"] == image_by_digest.split("@")[1]
    assert doc["model"] == str(tmp_path / "out" / "model")
    assert doc["output_path"] == str(tmp_path / "out")
    assert Path(doc["model"] + ".pdiparams").is_file() and "[rank 1]" in result.stderr
    assert leftovers(doc["job_id"]) == []


def test_ctrl_c_stops_the_ranks_at_once_and_removes_them(image_by_digest, tmp_path):
    """Trial 7: Ctrl-C of ``deploy --cluster local`` waited for the ranks (the thread pool's exit
    joined each rank's wait) and the job trained to its end before the run said "interrupted".
    Now the ranks are stopped: exit 130 while they still train, nothing of the job left."""
    import signal
    import subprocess

    from support import INVOKE

    job = write_job(tmp_path, steps=10_000_000)  # hours: only a stop ends it within the test
    env = clean_env(drop=("PADDLECD_",), PADDLECD_STATE_DIR=str(tmp_path / "state"))
    run = subprocess.Popen([INVOKE, "deploy", "--image", image_by_digest, "--job", str(job),
                            "--cluster", "local"], cwd=ROOT, env=env, text=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        seen = []
        for line in run.stderr:  # the plan, then the ranks' streamed logs
            seen.append(line)
            if line.startswith("[rank 1]"):
                break
        assert any(x.startswith("[rank 1]") for x in seen), "".join(seen)[-3000:]
        run.send_signal(signal.SIGINT)
        _, rest = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
    err = "".join(seen) + rest
    assert run.returncode == 130, err[-3000:]
    assert "error: interrupted" in err and "final_loss" not in err
    job_id = re.search(r"deploy (pytest-train-[0-9a-f]{6}) on local", err).group(1)
    assert leftovers(job_id) == []


def test_an_input_claim_that_names_no_volume_is_refused_at_the_plan(image_by_digest, settings,
                                                                    tmp_path):
    """Trial 9: ``data: {claim: nosuchvol}`` on --cluster local ran ("succeeded") on an empty
    folder, and Docker left the volume it created. The plan (dry-run too) refuses it, making
    nothing; a volume that exists is mounted as before."""
    import uuid

    name = f"paddlecd-test-{uuid.uuid4().hex[:8]}"
    job = write_job(tmp_path, steps=5)
    doc = yaml.safe_load(job.read_text())
    job.write_text(yaml.safe_dump({**doc, "data": {"claim": name, "mountPath": "/data"}}))
    docker = engine.client()
    with pytest.raises(ConfigError, match=f"data.claim '{name}' names no volume of the engine"):
        deployment.plan(settings, job=str(job), image=image_by_digest, cluster="local")
    assert not engine.volume_exists(name)
    docker.volumes.create(name)
    try:
        plan = deployment.plan(settings, job=str(job), image=image_by_digest, cluster="local")
        assert plan.spec.data.claim == name
    finally:
        docker.volumes.get(name).remove()
