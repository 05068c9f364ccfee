"""``invoke deploy`` / ``invoke cluster.render`` as a user runs them: bad input exits non-zero with
one line and a hint, and nothing reaches the cluster. The "cluster" is a scripted Kubernetes API
over real HTTP (no API server can run here, see test_cluster_k8s.py); it records every request.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from support import ROOT, clean_env, invoke
from support.k8s_api import ScriptedAPI

IMAGE = "registry.example.com/paddlecd/release@sha256:" + "4f" * 32


@pytest.fixture
def cluster_env(tmp_path):
    """Environment whose kubeconfig points at an empty scripted API (a request is recorded)."""
    api = ScriptedAPI({})
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "s",
        "clusters": [{"name": "s", "cluster": {"server": api.url}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "s", "context": {"cluster": "s", "user": "u"}}],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    yield (
        api,
        clean_env(drop=("PADDLECD_",), KUBECONFIG=str(tmp_path / "kubeconfig"), HOME=str(tmp_path),
                  PADDLECD_STATE_DIR=str(tmp_path / "state"),  # the stage's log goes there
                  # registry.example.com does not resolve: the variant-label check asks once, not
                  # 4 times with 3.5 s of back-off, then leaves the image to the run
                  PADDLECD_REGISTRY_PUSH_RETRIES="1"),
    )
    api.close()


def job_file(tmp_path: Path, **changes) -> str:
    data = {
        "name": "t",
        "command": {"script": "/opt/t.py"},
        "output": {"claim": "out", "mountPath": "/output"},
        "resources": {"memory": "2Gi", "shm": "1Gi"},
        **changes,
    }
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(data))
    return str(tmp_path / "train.yaml")


@pytest.mark.parametrize(
    "args, cause",
    [
        (
            ["--image", IMAGE, "--gpus-per-node", "8"],
            "--gpus-per-node 8: GPUs per node requested on the CPU variant 'cpu'",
        ),
        (["--image", "registry.example.com/paddlecd/release:1.4.0-cpu"], "is a tag, not a digest"),
        (["--release", "1.4-cpu"], "is a moving tag, not a release"),
        (["--release", "1.4.0-cpu", "--image", IMAGE], "give exactly one of --release"),
        (["--image", IMAGE, "--nodes", "two"], "--nodes must be a whole number"),
        # a re-trial: Python's int() read these as 10 and 2
        (["--image", IMAGE, "--nodes", "1_0"], "--nodes must be a whole number, got '1_0'"),
        (["--image", IMAGE, "--nodes", "\uff12"], "--nodes must be a whole number"),
        (["--image", IMAGE, "--nodes", "600"], "--nodes 600 is outside 1..512"),
        (["--image", IMAGE, "--kind", "mpijob"], "unknown --kind 'mpijob'"),
        (["--image", IMAGE, "--variant", "cu999"], "unknown variant 'cu999'"),
    ],
)
def test_bad_input_exits_2_and_touches_no_cluster(cluster_env, tmp_path, args, cause):
    api, env = cluster_env
    result = invoke("deploy", "--cluster", "k8s", "--job", job_file(tmp_path), *args, env=env)
    assert result.returncode == 2, result.stderr
    assert cause in result.stderr and "hint:" in result.stderr
    assert api.requests == []


def test_impossible_job_file_exits_2(cluster_env, tmp_path):
    api, env = cluster_env
    job = job_file(tmp_path, resources={"memory": "1Gi", "shm": "4Gi"}, resoures={})
    result = invoke("deploy", "--cluster", "k8s", "--job", job, "--image", IMAGE, env=env)
    assert (
        result.returncode == 2
        and "unknown key 'resoures'" in result.stderr
        and "did you mean 'resources'" in result.stderr
    )
    result = invoke(
        "deploy",
        "--cluster",
        "k8s",
        "--job",
        job_file(tmp_path, resources={"memory": "1Gi", "shm": "4Gi"}),
        "--image",
        IMAGE,
        env=env,
    )
    assert result.returncode == 2 and "shm 4Gi is larger than resources.memory 1Gi" in result.stderr
    assert api.requests == []


def test_dry_run_prints_plan_and_manifests_without_a_cluster(tmp_path):
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "absent"), "HOME": str(tmp_path)}
    result = invoke(
        "deploy",
        "--cluster",
        "k8s",
        "--job",
        job_file(tmp_path),
        "--image",
        IMAGE,
        "--nodes",
        "3",
        "--dry-run",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "create    Service/t-" in result.stderr and "dry run: nothing created" in result.stderr
    docs = list(yaml.safe_load_all(result.stdout))  # only the manifests: `> job.yaml` works
    assert [d["kind"] for d in docs] == ["Service", "Job"] and docs[1]["spec"]["completions"] == 3


def test_dry_run_json_is_the_deployment_and_its_manifests(tmp_path):
    """A script reads the job id, the digest and the model location from stdout."""
    import json

    env = {
        **os.environ,
        "KUBECONFIG": str(tmp_path / "absent"),
        "HOME": str(tmp_path),
        "PADDLECD_CLUSTER_NAMESPACE": "ml",
    }
    result = invoke(
        "deploy",
        "--cluster",
        "k8s",
        "--job",
        job_file(tmp_path),
        "--image",
        IMAGE,
        "--nodes",
        "2",
        "--dry-run",
        "--json",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # one document; the plan is on stderr
    assert "dry run: nothing created" in result.stderr
    assert doc["job_id"].startswith("t-") and doc["executed"] is False
    assert doc["reference"] == IMAGE and doc["digest"] == "sha256:" + "4f" * 32
    assert doc["model"] == "claim:out/model" and doc["output_claim"] == "out"
    assert doc["output_path"] is None and doc["release"] is None and doc["namespace"] == "ml"
    assert [m["kind"] for m in doc["manifests"]] == ["Service", "Job"]
    assert doc["manifests"][1]["metadata"]["name"] == doc["job_id"]


def test_a_missing_kubeconfig_exits_9_before_anything_is_created(tmp_path):
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "absent"), "HOME": str(tmp_path),
           "PADDLECD_STATE_DIR": str(tmp_path / "state")}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    result = invoke(
        "deploy", "--cluster", "k8s", "--job", job_file(tmp_path), "--image", IMAGE, env=env
    )
    assert result.returncode == 9
    assert (
        f"error: no kubeconfig: {tmp_path / 'absent'} does not exist, and this is not a pod in "
        "a cluster" in result.stderr and "hint: set KUBECONFIG" in result.stderr
    ), result.stderr


def test_cluster_render_writes_one_file_per_object(tmp_path):
    out = tmp_path / "manifests"
    result = invoke(
        "cluster.render",
        "--job",
        job_file(tmp_path),
        "--image",
        IMAGE,
        "--kind",
        "paddlejob",
        "--out",
        str(out),
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    [path] = sorted(out.iterdir())
    assert (
        path.name.startswith("00-paddlejob-t-")
        and yaml.safe_load(path.read_text())["kind"] == "PaddleJob"
    )


def test_render_refuses_cluster_local_and_writes_nothing(cluster_env, tmp_path):
    """Trial 7: ``cluster.render --cluster local`` wrote Kubernetes manifests without a word."""
    api, env = cluster_env
    result = invoke("cluster.render", "--job", job_file(tmp_path), "--image", IMAGE, "--cluster",
                    "local", "--out", str(tmp_path / "m"), env=env)
    assert result.returncode == 2 and "writes Kubernetes manifests only" in result.stderr
    assert not (tmp_path / "m").exists() and api.requests == []


def test_deploy_of_an_artifact_manifest_is_refused_before_anything_runs(tmp_path):
    """Trial 21: ``deploy --image <the release's Sigstore bundle referrer>`` planned a dry run
    (exit 0) and the run failed on the pull's "unsupported media type
    application/vnd.oci.empty.v1+json", hint "check the registry is up and has space". A stub
    registry serves the artifact manifest (the real referrers: tests/integration/)."""
    import hashlib
    import http.server
    import json as json_
    import threading

    from paddlecd import config
    from paddlecd import deployment as deploy
    from paddlecd.errors import ConfigError

    body = json_.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
                   "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest()},
        "layers": []}).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path.endswith(digest) else 404)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"127.0.0.1:{server.server_address[1]}"
        s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
        with pytest.raises(ConfigError) as e:
            deploy.resolve(s, release=None, image=f"{host}/p/release@{digest}", variant=None)
        assert e.value.cause == (f"{host}/p/release@{digest} is an artifact "
                                 "(application/vnd.dev.sigstore.bundle.v0.3+json), not an image")
    finally:
        server.shutdown()
