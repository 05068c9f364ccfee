"""``verify --nodes 2 --cluster k8s`` against a scripted Kubernetes API server over real HTTP.

No Kubernetes API server can run on the test machines, and no GPU: as in test_cluster_k8s.py, a
small real HTTP server (tests/support/k8s_api.py) replays responses in the shape a v1.30 API
server returns them (tests/data/cluster/k8s-api.json, renamed to the verify jobs), and a real
kubeconfig points the official client at it. Our submit, watch, log collection and evidence code
run unchanged; what the pods print is scripted — in the format smoke/rendezvous.py ``--report``
prints (the same function is run on real files below). Not tested here: a real scheduler, DNS of
the headless Service, the kubelet's ``$(VAR)`` expansion, NCCL on GPUs. Manifests are validated
like deploy's: the official schemas (kubernetes-validate, strict) and the PaddleJob CRD, plus a
golden file (regenerate with PADDLECD_UPDATE_GOLDEN=1, then review the diff).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time

import kubernetes_validate
import pytest
import yaml

from paddlecd import config
from paddlecd.cluster.render import Target
from paddlecd.errors import ClusterError, ConfigError
from paddlecd.verify import nodes as multinode
from paddlecd.verify import nodes_k8s

from support import ROOT, clean_env, invoke, project_settings
from support.k8s_api import API, ROLE, ScriptedAPI, role_allows

NS, SUFFIX, RECORDED = "ml-train", "0a1b2c", "ernie-ft-0a1b2c"
IMAGE = "registry.example.com/paddlecd/release@sha256:" + "4f" * 32
JOB = nodes_k8s.job_id(SUFFIX)
GOLDEN = ROOT / "tests" / "data" / "golden" / "cluster" / "verify-nodes-2.job.yaml"
CRD = ROOT / "tests" / "data" / "cluster" / "kubeflow.org_paddlejobs.trimmed.yaml"
ALLREDUCE = {  # rank 0's result, in smoke/workers/allreduce.py's shape (2 gloo ranks)
    "world_size": 2,
    "backend": "gloo",
    "results": [
        {"elements": n, "dtype": "float32", "bytes": 4 * n, "wrong": 0, "time_us": 90.0,
         "algbw_GBps": 4 * n / 90e-6 / 1e9, "busbw_GBps": 4 * n / 90e-6 / 1e9}
        for n in (1, 1024, 65536, 1 << 20)
    ],
}
TRAIN_DP = {"world_size": 2, "losses": [1.0, 0.5, 0.0101], "single_losses": [1.0, 0.5, 0.0101]}
COLLECTIVE = {"allreduce": ALLREDUCE, "train_dp": TRAIN_DP}  # smoke/workers/collective.py's shape


def renamed(value, job: str):
    """A recorded response of job ernie-ft-0a1b2c, as the API would answer for ``job``."""
    return json.loads(json.dumps(value).replace(RECORDED, job))


def marked(file: str, data) -> str:
    return f"{nodes_k8s.MARK} {file} {json.dumps(data, separators=(',', ':'))}"


def node(rank: int, job: str) -> dict:
    return {"rank": rank, "hostname": f"{job}-{rank}", "gpu": None, "gpus": 0, "driver": None}


def pod_log(job: str, rank: int, *, result: tuple[str, dict] | None = None) -> str:
    lines = [f"rendezvous: rank {rank} on {job}-{rank}, master {job}-0.{job}:36543",
             f"LAUNCH INFO Job: {job}, mode collective, replicas 2[2:2], elastic False"]
    if result:
        lines.append(marked(*result))
    lines.append(marked(f"node-{rank}.json", node(rank, job)))
    return "\n".join(lines) + "\n"


def routes(*, pods="pods_succeeded", status="job_complete", logs=None) -> dict:
    """The API of the verify job: created, watched to ``status``, pods ``pods``, pod ``logs``."""
    job = JOB
    base, jobs = f"/api/v1/namespaces/{NS}", f"/apis/batch/v1/namespaces/{NS}/jobs"
    created = {**API["service_created"], "kind": "ConfigMap", "data": {}}
    pod_list = renamed(API[pods], job)
    names = [p["metadata"]["name"] for p in pod_list["items"]]
    logs = logs or [pod_log(job, 0, result=("collective.json", COLLECTIVE)), pod_log(job, 1)]
    return {
        ("POST", f"{base}/configmaps"): [(201, renamed(created, job))],
        ("POST", f"{base}/services"): [(201, renamed(API["service_created"], job))],
        ("POST", jobs): [(201, renamed(API["job_created"], job))],
        ("GET", f"{base}/pods?labelSelector=paddlecd.io%2Fjob%3D{job}"): [(200, pod_list)],
        ("GET", f"{jobs}/{job}"): [(200, renamed(API["job_active"], job)),
                                          (200, renamed(API[status], job))],
        **{("GET", f"{base}/pods/{n}/log"): [(200, text)] for n, text in zip(names, logs)},
        **{("DELETE", f"{base}/{kind}/{job}"): [(200, API["deleted"])]
           for kind in ("configmaps", "services")},
        ("DELETE", f"{jobs}/{job}"): [(200, API["deleted"])],
    }


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """Start a ScriptedAPI and point $KUBECONFIG at it (context namespace ml-train)."""
    servers: list[ScriptedAPI] = []

    def start(script: dict) -> ScriptedAPI:
        api = ScriptedAPI(script)
        servers.append(api)
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "scripted",
            "clusters": [{"name": "scripted", "cluster": {"server": api.url}}],
            "users": [{"name": "ci", "user": {"token": "scripted-token"}}],
            "contexts": [{"name": "scripted",
                          "context": {"cluster": "scripted", "user": "ci", "namespace": NS}}],
        }
        (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        return api

    yield start
    for s in servers:
        s.close()


def verify(tmp_path, **kw) -> tuple[multinode.NodeRun, list[str]]:
    events: list[str] = []
    ran = nodes_k8s.run_k8s(
        project_settings(tmp_path / "state"), Target(IMAGE, "cpu"), nodes=2, gpus_per_node=0,
        out=tmp_path / "out", on_event=events.append, on_line=events.append, poll=0.01,
        suffix=SUFFIX, **kw,
    )
    return ran, events


def test_both_checks_run_to_success_and_the_pod_logs_become_the_evidence(cluster, tmp_path):
    api = cluster(routes())
    ran, events = verify(tmp_path)

    assert [c.name for c in ran.checks] == list(multinode.WORKERS.values())
    assert all(c.passed for c in ran.checks), [c.message for c in ran.checks]
    allreduce, dp = ran.checks
    assert allreduce.metrics["world_size"] == 2 and allreduce.metrics["transport"] == multinode.GLOO
    assert dp.metrics["relative_difference"] == 0.0
    assert [f["rank"] for f in ran.facts] == [0, 1] and ran.transports == ()
    assert all(f["transport"] == "none/gloo" for f in ran.facts)
    posted = [p.rsplit("/", 1)[-1] for p in api.calls("POST")]
    # one job for both checks: the smoke suite first, then deploy's
    assert posted == ["configmaps", "services", "jobs"]
    assert len(api.calls("DELETE")) == 3  # its Job, Service, ConfigMap: nothing left
    for rank in (0, 1):  # every rank's log kept, as the local path keeps them
        log = (tmp_path / "out" / "logs" / "collective" / f"rank-{rank}.log").read_text()
        assert f"rendezvous: rank {rank} on {JOB}-{rank}" in log
    assert json.loads((tmp_path / "out" / "collective.json").read_text()) == COLLECTIVE
    assert f"Job {NS}/{JOB} completed" in events
    role = yaml.safe_load(ROLE.read_text())  # docs/paddlecd-role.yaml is enough for verify too
    assert [(m, p) for m, p, q in api.requests if not role_allows(role, m, p, q)] == []


def test_a_rank_that_cannot_reach_the_master_is_named_from_its_own_log(cluster, tmp_path):
    job = JOB
    failed = copy.deepcopy(API["pods_failed"])  # rank 1 exits 3; the Job then stops rank 0 (143)
    for pod, (code, at) in zip(failed["items"], [(143, "15:01:05"), (3, "15:01:00")]):
        pod["status"]["phase"] = "Failed"
        pod["status"]["containerStatuses"][0]["state"] = {"terminated": {
            "exitCode": code, "reason": "Error", "finishedAt": f"2026-11-29T{at}Z"}}
    why = (f"rendezvous: rank 1 cannot reach the master {job}-0.{job}:36543 within 60s "
           "(gaierror: [Errno -2] Name or service not known)")
    api = cluster({
        **routes(pods="pods_failed", status="job_failed_backoff",
                 logs=[pod_log(job, 0), pod_log(job, 1) + why + "\n"]),
    })
    api.routes[("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=paddlecd.io%2Fjob%3D{job}")] = [
        (200, renamed(failed, job))
    ]
    ran, _ = verify(tmp_path)

    check, dp = ran.checks  # the job failed before either part reported
    assert not check.passed and check.name == multinode.WORKERS["allreduce"]
    assert check.message.startswith(f"rank 1 (pod {job}-1-q9z4m) exited 3: {why}")
    assert "BackoffLimitExceeded" in check.message  # the Job's own verdict follows
    assert not dp.passed and dp.name == multinode.WORKERS["train_dp"]
    assert dp.message == ("not run: the job failed before its train_dp part; the cause is on "
                          "allreduce/test_allreduce_exact_sums")
    assert [f["rank"] for f in ran.facts] == [0, 1]  # facts are kept from a failed run too
    assert len(api.calls("DELETE")) == 3


def test_a_job_that_fails_in_training_keeps_the_allreduce_check(cluster, tmp_path):
    """Rank 1 crashes in the train_dp part: rank 0 had rewritten collective.json with the
    AllReduce part (smoke/workers/collective.py), which is still judged; training fails naming
    the rank and its cause."""
    failed = copy.deepcopy(API["pods_failed"])
    for pod, (code, at) in zip(failed["items"], [(143, "15:01:05"), (1, "15:01:00")]):
        pod["status"]["phase"] = "Failed"
        pod["status"]["containerStatuses"][0]["state"] = {"terminated": {
            "exitCode": code, "reason": "Error", "finishedAt": f"2026-11-29T{at}Z"}}
    crash = "RuntimeError: train_dp: rank 1 lost its gloo peer"
    partial = ("collective.json", {"allreduce": ALLREDUCE})
    api = cluster(routes(pods="pods_failed", status="job_failed_backoff",
                         logs=[pod_log(JOB, 0, result=partial), pod_log(JOB, 1) + crash + "\n"]))
    api.routes[("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=paddlecd.io%2Fjob%3D{JOB}")] = [
        (200, renamed(failed, JOB))
    ]
    ran, _ = verify(tmp_path)

    allreduce, dp = ran.checks
    assert allreduce.passed and allreduce.metrics["world_size"] == 2
    assert allreduce.metrics["transport"] == multinode.GLOO  # read from the one job's logs
    assert not dp.passed and dp.name == multinode.WORKERS["train_dp"]
    assert dp.message.startswith(
        f"the job failed after its allreduce part: rank 1 (pod {JOB}-1-q9z4m) exited 1: {crash}")
    assert "BackoffLimitExceeded" in dp.message and len(api.calls("DELETE")) == 3


def test_a_job_that_does_not_finish_in_time_fails_and_is_removed(cluster, tmp_path):
    # still running: rendezvous.py --report prints the results only once the launcher exits
    script = routes(pods="pods_running", status="job_active",
                    logs=[pod_log(JOB, 0), pod_log(JOB, 1)])
    api = cluster(script)
    started = time.monotonic()
    ran, _ = verify(tmp_path, timeout=0.3)

    assert time.monotonic() - started < 10
    check, dp = ran.checks
    assert not check.passed and f"{JOB} did not finish within 0.3s" in check.message
    assert not dp.passed and dp.message.startswith("not run: ")
    assert sorted(p.rsplit("/", 2)[-2] for p in api.calls("DELETE")) == [
        "configmaps", "jobs", "services"]


def test_kept_objects_stay_on_the_cluster(cluster, tmp_path):
    api = cluster(routes())
    events: list[str] = []
    nodes_k8s.run_k8s(
        project_settings(tmp_path / "state", **{"runtime.keep": True}), Target(IMAGE, "cpu"),
        nodes=2, gpus_per_node=0, out=tmp_path / "out", on_event=events.append,
        on_line=events.append, poll=0.01, suffix=SUFFIX,
    )
    assert api.calls("DELETE") == []


def _unreachable_cluster(tmp_path, monkeypatch) -> None:
    """A kubeconfig whose API server is a closed port (127.0.0.1:9), in $KUBECONFIG."""
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "ci", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "ci"}}],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))


def test_an_unreachable_api_server_is_one_cluster_error(tmp_path, monkeypatch):
    _unreachable_cluster(tmp_path, monkeypatch)
    with pytest.raises(ClusterError) as info:
        verify(tmp_path)
    assert "Kubernetes API server http://127.0.0.1:9 unreachable" in info.value.cause
    assert "\n" not in info.value.cause and info.value.exit_code == 9  # as deploy's
    assert not (tmp_path / "out" / "logs").exists()


def test_rendezvous_report_prints_what_results_parses(tmp_path):
    """smoke/rendezvous.py --report on a real launcher stand-in: its lines parse back."""
    out = tmp_path / "out"
    out.mkdir()
    writer = f"import json; json.dump({COLLECTIVE!r}, open({str(out / 'collective.json')!r}, 'w'))"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "smoke" / "rendezvous.py"), "--rank", "0", "--master",
         "x:1", "--out", str(out), "--report", "--", sys.executable, "-c", writer],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    found = nodes_k8s.results(proc.stdout)
    assert found["collective.json"] == COLLECTIVE and found["node-0.json"]["rank"] == 0
    bad = f"{nodes_k8s.MARK} ../evil.json {{}}\n{nodes_k8s.MARK} x.json {{"  # a path; cut short
    assert nodes_k8s.results(bad) == {}


def manifests(kind: str) -> list[dict]:
    return nodes_k8s.manifests(
        project_settings(ROOT / ".paddlecd-unused"),
        Target(reference=IMAGE, variant="cpu", release="1.4.0-cpu", revision="0" * 40),
        job_id=JOB, nodes=2, gpus_per_node=0, kind=kind, namespace=NS,
        pull_secret="paddlecd-registry",
    )


@pytest.mark.parametrize("version", ["1.28", "1.30", "1.32"])
def test_manifests_validate_against_official_schemas(version):
    ms = manifests("job")
    assert [m["kind"] for m in ms] == ["ConfigMap", "Service", "Job"]  # one job, both checks
    for m in ms:
        assert kubernetes_validate.validate(m, version, strict=True) == version


def test_the_pod_runs_the_rendezvous_precheck_on_the_configmap_suite():
    configmap, _, job = manifests("job")
    pod = job["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    assert command[:4] == ["python", "/smoke/rendezvous.py", "--rank", "$(JOB_COMPLETION_INDEX)"]
    assert command[command.index("--master") + 1] == "$(PADDLE_MASTER)"
    assert command[command.index("--") + 1 :][:3] == ["python", "-m", "paddle.distributed.launch"]
    assert command[-5:] == ["/smoke/workers/collective.py", "--out", "/out/collective.json",
                            "--device", "cpu"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["output"] == {"name": "output", "emptyDir": {}}
    assert "initContainers" not in pod  # an emptyDir is the uid's already: no root init
    items = {i["path"] for i in volumes["code"]["configMap"]["items"]}
    # every helper the workers import (_common imports _devices; the workers import _figures)
    assert {"rendezvous.py", "_common.py", "_devices.py", "_figures.py", "workers/collective.py",
            "workers/allreduce.py", "workers/train_dp.py"} <= items
    assert configmap["data"]["workers__allreduce.py"] == (
        ROOT / "smoke" / "workers" / "allreduce.py"
    ).read_text()


@pytest.mark.parametrize("flags, wait", [
    ({}, "900"),  # half of verify.timeout (1800 s): a late image pull fits
    ({"verify.timeout": 600}, "300"),
    ({"verify.rendezvous_timeout": 420}, "420"),
])
def test_the_rendezvous_wait_on_kubernetes_is_tied_to_the_deadline(flags, wait):
    """Paddle's launcher waits for the master without a bound (PaddlePaddle/Paddle
    python/paddle/distributed/launch/controllers/master.py @ a883f87f HTTPMaster.sync_peers), so
    the precheck's wait is ours: pods are not gang-scheduled, so on Kubernetes it is half the
    Job's activeDeadlineSeconds, or verify.rendezvous_timeout."""
    s = project_settings(ROOT / ".paddlecd-unused", **flags)
    for m in nodes_k8s.manifests(s, Target(IMAGE, "cpu"), job_id=JOB, nodes=2,
                                 gpus_per_node=0)[2:]:
        command = m["spec"]["template"]["spec"]["containers"][0]["command"]
        assert command[command.index("--timeout") + 1] == wait
        assert float(wait) < m["spec"]["activeDeadlineSeconds"]
    local = float(wait) if flags.get("verify.rendezvous_timeout") else 60.0  # one machine
    assert multinode.rendezvous_timeout(s, k8s=False) == local


def test_a_rendezvous_wait_past_the_deadline_is_refused():
    """The deadline would end the job first, naming no rank: refused before any request."""
    s = project_settings(ROOT / ".paddlecd-unused", **{"verify.rendezvous_timeout": 1800})
    with pytest.raises(ConfigError, match="verify.rendezvous_timeout") as info:
        multinode.rendezvous_timeout(s, k8s=True)
    assert "1800" in info.value.cause and info.value.hint


def test_the_paddlejob_validates_against_the_operator_crd():
    from test_cluster_render import crd_validator

    ms = manifests("paddlejob")
    assert [m["kind"] for m in ms] == ["ConfigMap", "PaddleJob"]
    for m in ms[1::2]:
        assert [e.message for e in crd_validator(CRD).iter_errors(m)] == []
        env = m["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
        index = next(e for e in env if e["name"] == "JOB_COMPLETION_INDEX")
        assert "training.kubeflow.org/replica-index" in index["valueFrom"]["fieldRef"]["fieldPath"]


def test_a_checkout_without_the_smoke_suite_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="the smoke suite is incomplete") as info:
        nodes_k8s.manifests(
            config.load(root=tmp_path, environ={}), Target(IMAGE, "cpu"), job_id=JOB, nodes=2,
            gpus_per_node=0,
        )
    assert ("rendezvous.py, workers/collective.py, workers/allreduce.py, workers/train_dp.py"
            in info.value.cause)


def test_manifests_match_the_golden_file():
    """The smoke files' text is replaced by a placeholder: the golden file reviews the manifests'
    shape, not smoke/'s contents (compared with the checkout above)."""
    ms = manifests("job")
    for m in ms:
        if m["kind"] == "ConfigMap":
            m["data"] = {k: "<smoke file>" for k in m["data"]}
    text = yaml.safe_dump_all(ms, sort_keys=False)
    if os.environ.get("PADDLECD_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


@pytest.mark.parametrize(
    "args, cause",
    [
        (["--dry-run"], "--dry-run is for --cluster k8s"),
        (["--cluster", "k8s", "--nodes", "1"], "--cluster k8s with --nodes 1"),
        (["--cluster", "k8s", "--nodes", "2", "--kind", "mpijob"], "--kind mpijob: not a job kind"),
        # trial: these raised a ValueError traceback (exit 1) or were accepted (exit 0)
        (["--nodes", "two"], "--nodes must be a whole number, got 'two'"),
        (["--cluster", "k8s", "--nodes", "2", "--gpus-per-node", "x", "--dry-run"],
         "--gpus-per-node must be a whole number, got 'x'"),
        (["--cluster", "k8s", "--nodes", "2", "--gpus-per-node", "-3", "--dry-run"],
         "--gpus-per-node -3 is outside 0..16"),
        (["--cluster", "k8s", "--nodes", "600", "--dry-run"], "--nodes 600 is outside 1..512"),
        (["--nodes", "600"], "--nodes 600 is outside 1..512"),
        (["--nodes", "0"], "--nodes 0: a run needs at least 1 node"),
        # trial 4: --kind job without --cluster k8s ran the local suite, the flag dropped
        (["--kind", "job"], "--kind job is for --cluster k8s"),
        (["--nodes", "2", "--kind", "paddlejob"], "--kind paddlejob is for --cluster k8s"),
    ],
)
def test_bad_verify_flags_exit_2_before_any_request(tmp_path, args, cause):
    api = ScriptedAPI({})
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "s",
        "clusters": [{"name": "s", "cluster": {"server": api.url}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "s", "context": {"cluster": "s", "user": "u"}}],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    env = clean_env(drop=("PADDLECD_",), KUBECONFIG=str(tmp_path / "kubeconfig"),
                    HOME=str(tmp_path), PADDLECD_STATE_DIR=str(tmp_path / "state"))
    try:
        result = invoke("verify", "--image", IMAGE, *args, env=env, timeout=120)
    finally:
        api.close()
    assert result.returncode == 2, result.stderr
    assert cause in result.stderr and "hint:" in result.stderr
    assert api.requests == []


def test_gpu_rank_logs_name_the_nccl_transport_per_node(tmp_path):
    """GPU-only evidence from recorded NCCL_DEBUG=INFO lines (NVIDIA/nccl's log format): each
    node's transport from its own logs, the union on the AllReduce check, the card for the
    expectation table."""
    logs = tmp_path / "logs" / "collective"  # the one job's logs: both parts on one communicator
    (logs / "rank-1").mkdir(parents=True)
    (logs / "rank-0.log").write_text(
        "gpu-a:312:340 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
        "gpu-a:312:340 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [receive] via NET/IB/0/GDRDMA\n"
    )
    (logs / "rank-1" / "workerlog.3").write_text(
        "gpu-b:99:120 [3] NCCL INFO Channel 01/0 : 11[3] -> 12[4] via SHM/direct/direct\n"
    )
    check = multinode.judge("allreduce", ALLREDUCE, world_size=2, duration_s=1.0)
    facts = [{**node(r, "j"), "gpu": "NVIDIA H100 80GB HBM3", "gpus": 8} for r in (1, 0)]
    ran = multinode.finish([check], facts, [], logs=tmp_path / "logs", gpu=True)

    assert [(f["rank"], f["transport"]) for f in ran.facts] == [(0, "IB+P2P"), (1, "SHM")]
    assert ran.transports == ("IB", "P2P", "SHM")
    assert ran.checks[0].metrics["transport"] == "IB+P2P+SHM"
    assert ran.checks[0].metrics["gpu_name"] == "NVIDIA H100 80GB HBM3"
    quiet = multinode.finish([check], [node(0, "j")], [], logs=tmp_path / "none", gpu=True)
    assert quiet.facts[0]["transport"].startswith("not reported")



def test_dry_run_pods_carry_this_checkouts_git_revision(tmp_path, monkeypatch, capsys):
    """The pods' ``paddlecd.io/git-revision`` label is the checkout's revision, as deploy's are
    (it read ``unknown``: verify --nodes built its Target without one). In process, with the
    registry look-up of ``--image`` replaced (no registry runs in the unit suite)."""
    import subprocess

    from invoke import Context

    from paddlecd.cli import image as image_tasks
    from paddlecd.verify import run as smoke

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("PADDLECD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(smoke, "target", lambda settings, variant, image: image)
    monkeypatch.setattr(smoke, "checked_labels", lambda *a, **kw: {})  # the registry's labels
    image_tasks.verify.body(Context(), image=IMAGE, cluster="k8s", nodes="2", dry_run=True,
                            json=True)
    labels = [d["metadata"]["labels"] for d in json.loads(capsys.readouterr().out)["manifests"]]
    assert labels and {lab["paddlecd.io/git-revision"] for lab in labels} == {head[:63]}


def test_an_unreachable_api_server_leaves_no_evidence_folder(tmp_path, monkeypatch):
    """verify --nodes 2 --cluster k8s through verify.run: the image's digest and labels come from
    the registry (stood in for here: no registry in unit tests;
    tests/integration/test_verify_nodes.py reads them for real), the API server is unreachable,
    and the evidence folder it would have written is not left behind empty."""
    from paddlecd.verify import run as smoke

    _unreachable_cluster(tmp_path, monkeypatch)
    monkeypatch.setattr(smoke, "target", lambda *a: IMAGE)
    monkeypatch.setattr(smoke, "_labels", lambda *a, **k: {
        "io.paddlecd.variant": "cpu", "io.paddlecd.device": "cpu"})
    settings = project_settings(tmp_path / "state")
    with pytest.raises(ClusterError):
        smoke.verify(settings, image=IMAGE, nodes=2, cluster="k8s")
    assert not (settings.state / "verify").exists() or not any(
        (settings.state / "verify").iterdir())
