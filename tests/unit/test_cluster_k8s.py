"""Kubernetes submit + watch against scripted API responses over real HTTP.

No Kubernetes API server can run on the test machines, so these tests start a small real HTTP
server (http.server in a thread on 127.0.0.1) that replays API responses recorded in the shape a
v1.30 API server returns them (tests/data/cluster/k8s-api.json), and point a real kubeconfig at it.
The official ``kubernetes`` client, our translation of its errors and the watch logic run unchanged;
only the API server is scripted. Scenarios: creation, pod pending on GPUs, image pull error,
success (with rank 0's log streamed), failure at the backoff limit, a refused Job create (the
Service is removed again), a PaddleJob, a missing CRD, a missing kubeconfig.
"""

from __future__ import annotations

import os

import pytest
import yaml

from paddlecd import config
from paddlecd.cluster import jobfile, k8s, watch
from paddlecd.cluster.render import Target, render
from paddlecd.errors import ClusterError

from support import ROOT
from support.k8s_api import API, ROLE, ScriptedAPI, role_allows

DATA = ROOT / "tests" / "data" / "cluster"
NS, JOB = "ml-train", "ernie-ft-0a1b2c"
SERVICES = f"/api/v1/namespaces/{NS}/services"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
PADDLEJOBS = f"/apis/kubeflow.org/v1/namespaces/{NS}/paddlejobs"


@pytest.fixture
def cluster_api(tmp_path, monkeypatch):
    """Start a ScriptedAPI with the given routes and point $KUBECONFIG at it."""
    servers = []

    def start(routes) -> ScriptedAPI:
        api = ScriptedAPI(routes)
        servers.append(api)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "scripted",
            "clusters": [{"name": "scripted", "cluster": {"server": api.url}}],
            "users": [{"name": "ci", "user": {"token": "scripted-token"}}],
            "contexts": [{"name": "scripted", "context": {"cluster": "scripted", "user": "ci"}}],
        }
        (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        return api

    yield start
    for s in servers:
        s.close()


def _kubeconfig(tmp_path, monkeypatch, text: str):
    """``text`` as the only kubeconfig (``$KUBECONFIG``), outside any cluster; its path."""
    path = tmp_path / "config"
    path.write_text(text)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return path


def manifests(kind: str = "job") -> list[dict]:
    spec = jobfile.load(DATA / "jobs" / "gpu-eight.yaml").with_overrides(nodes=2)
    target = Target(
        reference="registry.example.com/paddlecd/release@sha256:" + "4f" * 32,
        variant="cu126",
        release="1.4.0-cu126",
        revision="0" * 40,
    )
    return render(
        spec, target, job_id=JOB, kind=kind, namespace=NS, pull_secret="paddlecd-registry"
    )


def run(kind: str = "job", pending_timeout: float = 60.0) -> tuple[list[str], list[str]]:
    """Submit and watch ``manifests(kind)`` through the kubeconfig; returns (events, log lines)."""
    events: list[str] = []
    lines: list[str] = []
    api = k8s.connect(config.load(root=DATA, environ={}))
    try:
        ms = manifests(kind)
        watch.submit(api, ms, on_event=events.append)
        watch.watch(
            api,
            ms,
            on_event=events.append,
            on_line=lines.append,
            poll=0.01,
            pending_timeout=pending_timeout,
            secret="paddlecd-registry",
        )
    finally:
        api.close()
    return events, lines


CREATE = {
    ("POST", SERVICES): [(201, API["service_created"])],
    ("POST", JOBS): [(201, API["job_created"])],
    ("DELETE", f"{SERVICES}/{JOB}"): [(200, API["deleted"])],
    ("DELETE", f"{JOBS}/{JOB}"): [(200, API["deleted"])],
}


def test_success_creates_service_then_job_and_streams_rank_zero(cluster_api):
    """The status is read by a plain GET of the Job (its body carries ``status``): RBAC treats
    ``jobs/status`` as a resource of its own (kubernetes.io/docs/reference/access-authn-authz/rbac,
    "Referring to resources"), so a Role with ``get`` on ``jobs`` suffices."""
    api = cluster_api(
        {
            **CREATE,
            ("GET", PODS): [
                (200, API["pods_creating"]),
                (200, API["pods_running"]),
                (200, API["pods_succeeded"]),
            ],
            ("GET", f"{JOBS}/{JOB}"): [(200, API["job_active"])] * 2
            + [(200, API["job_complete"])],
            # a Role granting get on jobs but not on jobs/status: the plain get carries status
            ("GET", f"{JOBS}/{JOB}/status"): [(403, API["forbidden_job"])],
            ("GET", f"{PODS}/{JOB}-0-x7k2p/log"): [(200, API["log_rank0_ok"])],
        }
    )
    events, lines = run()

    assert api.calls("POST") == [SERVICES, JOBS] and api.calls("DELETE") == []
    assert f"{JOBS}/{JOB}/status" not in api.calls("GET")  # needs no RBAC on jobs/status
    posted = [q for m, p, q in api.requests if m == "GET" and p == PODS]
    assert all("labelSelector=paddlecd.io%2Fjob%3Dernie-ft-0a1b2c" in q for q in posted)
    assert f"created Service {NS}/{JOB}" in events and f"Job {NS}/{JOB} completed" in events
    assert f"pod {JOB}-0-x7k2p: Running" in events and f"pod {JOB}-1-q9z4m: Succeeded" in events
    assert "[rank 0] rank 0/2 final_loss=0.000102" in lines


def test_pods_pending_on_gpus_are_named_and_the_job_is_deleted(cluster_api):
    api = cluster_api(
        {
            **CREATE,
            ("GET", PODS): [(200, API["pods_pending_gpu"])],
            ("GET", f"{JOBS}/{JOB}"): [(200, API["job_active"])],
        }
    )
    with pytest.raises(ClusterError) as info:
        run(pending_timeout=0)

    assert "unschedulable" in info.value.cause and "Insufficient nvidia.com/gpu" in info.value.cause
    assert "not enough free GPUs" in info.value.hint
    assert api.calls("DELETE") == [f"{JOBS}/{JOB}", f"{SERVICES}/{JOB}"]


def test_an_unschedulable_pod_is_only_reported_before_the_timeout(cluster_api):
    cluster_api(
        {
            **CREATE,
            ("GET", PODS): [(200, API["pods_pending_gpu"])] * 2 + [(200, API["pods_succeeded"])],
            ("GET", f"{JOBS}/{JOB}"): [(200, API["job_active"])] * 2
            + [(200, API["job_complete"])],
            ("GET", f"{PODS}/{JOB}-0-x7k2p/log"): [(200, API["log_rank0_ok"])],
        }
    )
    events, _ = run(pending_timeout=60)
    assert sum("unschedulable" in e for e in events) == 2  # once per pod, not once per poll
    assert events[-1] == f"Job {NS}/{JOB} completed"


def test_an_image_pull_error_is_named_with_the_pull_secret_hint(cluster_api):
    api = cluster_api(
        {
            **CREATE,
            ("GET", PODS): [(200, API["pods_image_pull"])],
            ("GET", f"{JOBS}/{JOB}"): [(200, API["job_active"])],
        }
    )
    with pytest.raises(ClusterError) as info:
        run()

    assert info.value.cause.startswith(f"image pull error on pod {JOB}-0-x7k2p: ErrImagePull")
    assert "Secret 'paddlecd-registry' in namespace ml-train" in info.value.hint
    assert api.calls("DELETE") == [f"{JOBS}/{JOB}", f"{SERVICES}/{JOB}"]


def test_failure_at_the_backoff_limit_carries_rank_zero_log_tail(cluster_api):
    cluster_api(
        {
            **CREATE,
            ("GET", PODS): [(200, API["pods_failed"])],
            ("GET", f"{JOBS}/{JOB}"): [(200, API["job_failed_backoff"])],
            ("GET", f"{PODS}/{JOB}-0-x7k2p/log"): [(200, API["log_rank0_failed"])],
        }
    )
    with pytest.raises(ClusterError) as info:
        run()

    assert (
        info.value.cause
        == f"Job {NS}/{JOB} failed: BackoffLimitExceeded: "
        "Job has reached the specified backoff limit"
    )
    assert (
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/ft.yaml'" in info.value.hint
    )


def test_a_retried_rank_zero_is_followed_into_its_replacement_pod(cluster_api):
    """backoffLimit > 0: the Job replaces a failed rank 0 pod; the watch streams the new pod's log
    too."""
    import copy

    replaced = copy.deepcopy(API["pods_succeeded"])
    replaced["items"][0]["metadata"]["name"] = f"{JOB}-0-r3tr1"
    api = cluster_api(
        {
            **CREATE,
            ("GET", PODS): [(200, API["pods_failed"])] * 2 + [(200, replaced)],
            ("GET", f"{JOBS}/{JOB}"): [(200, API["job_active"])] * 2
            + [(200, API["job_complete"])],
            ("GET", f"{PODS}/{JOB}-0-x7k2p/log"): [(200, API["log_rank0_failed"])],
            ("GET", f"{PODS}/{JOB}-0-r3tr1/log"): [(200, API["log_rank0_ok"])],
        }
    )
    events, lines = run()

    assert [p for p in api.calls("GET") if p.endswith("/log")] == [
        f"{PODS}/{JOB}-0-x7k2p/log",
        f"{PODS}/{JOB}-0-r3tr1/log",
    ]
    assert lines.index("[rank 0] LAUNCH ERROR 2026-11-29 15:45:31,101 Exit code 1") < lines.index(
        "[rank 0] saved /output/model"
    )
    assert events[-1] == f"Job {NS}/{JOB} completed"


def test_a_refused_job_create_removes_the_service_again(cluster_api):
    api = cluster_api({**CREATE, ("POST", JOBS): [(403, API["forbidden_job"])]})
    with pytest.raises(ClusterError) as info:
        run()

    assert info.value.cause.startswith(
        f"creating Job {NS}/{JOB}: 403 Forbidden: jobs.batch is forbidden"
    )
    assert "RBAC" in info.value.hint
    assert api.calls("POST") == [SERVICES, JOBS] and api.calls("DELETE") == [f"{SERVICES}/{JOB}"]


def test_a_paddlejob_is_created_as_a_custom_object_and_watched(cluster_api):
    """A plain GET of the custom object returns its status too (the CRD's status subresource,
    kubeflow.org_paddlejobs.yaml @ 374e88af2d28 ``subresources: status``, is a separate RBAC
    resource)."""
    api = cluster_api(
        {
            ("POST", PADDLEJOBS): [(201, API["paddlejob_created"])],
            ("GET", PODS): [(200, API["pods_paddlejob_running"])],
            ("GET", f"{PADDLEJOBS}/{JOB}"): [
                (200, API["paddlejob_running"]),
                (200, API["paddlejob_succeeded"]),
            ],
            # RBAC on paddlejobs only (docs/kubernetes.md): paddlejobs/status is not needed
            ("GET", f"{PADDLEJOBS}/{JOB}/status"): [(403, API["forbidden_job"])],
            ("GET", f"{PODS}/{JOB}-worker-0/log"): [(200, API["log_rank0_ok"])],
        }
    )
    events, lines = run("paddlejob")

    assert api.calls("POST") == [PADDLEJOBS]
    assert f"{PADDLEJOBS}/{JOB}/status" not in api.calls("GET")
    assert (
        events[-1] == f"PaddleJob {NS}/{JOB} completed" and "[rank 0] saved /output/model" in lines
    )


def test_a_missing_paddlejob_crd_says_to_install_the_operator(cluster_api):
    cluster_api({("POST", PADDLEJOBS): [(404, API["paddlejob_crd_missing"])]})
    with pytest.raises(ClusterError, match="404 Not Found") as info:
        run("paddlejob")
    assert "training operator" in info.value.hint


def test_a_missing_kubeconfig_is_a_clear_cluster_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ClusterError, match="no kubeconfig: .*absent does not exist") as info:
        k8s.connect(config.load(root=DATA, environ={}))
    assert "KUBECONFIG" in info.value.hint and info.value.exit_code == 9
    # trial 20: KUBECONFIG= was the client's "Invalid kube-config file. No configuration found."
    monkeypatch.setenv("KUBECONFIG", "")
    with pytest.raises(ClusterError) as info:
        k8s.connect(config.load(root=DATA, environ={}))
    assert info.value.cause == (f"no kubeconfig: {tmp_path}/.kube/config does not exist "
                                "(KUBECONFIG is set but empty, which kubectl reads as unset), "
                                "and this is not a pod in a cluster")


@pytest.mark.parametrize(("body", "cause"), [
    (bytes(range(128, 256)) * 4, "is not UTF-8 text (byte 0)"),
    ("apiVersion: v1\nkind: Config\n".encode("utf-16"), "is not UTF-8 text (byte 0)"),
    (b"apiVersion: v1\nclusters: [\n", "is not valid YAML"),
])
def test_a_kubeconfig_that_is_not_utf8_yaml_is_named_in_deploy_its_dry_run_and_doctor(
        tmp_path, monkeypatch, body, cause):
    """Trial 20: a kubeconfig of random bytes, or saved as UTF-16, was a 62-line traceback
    (the client's UnicodeDecodeError) in deploy, its --dry-run (the namespace) and doctor."""
    path = tmp_path / "kc"
    path.write_bytes(body)
    monkeypatch.setenv("KUBECONFIG", str(path))
    settings = config.load(root=DATA, environ={})
    for read in (k8s.connect, k8s.namespace):
        with pytest.raises(ClusterError) as info:
            read(settings)
        assert info.value.cause.startswith(f"kubeconfig {path} {cause}"), info.value.cause


def test_a_file_the_kubeconfig_names_that_is_missing_is_named_with_its_entry(tmp_path,
                                                                            monkeypatch):
    """Trial 15: a kubeconfig whose cluster's certificate-authority was missing gave "no usable
    kubeconfig (File does not exist: …)", hint "set KUBECONFIG", though KUBECONFIG was set."""
    kubeconfig = _kubeconfig(
        tmp_path, monkeypatch,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1', certificate-authority: /nonexistent/ca.pem}}]\n"
        "users: [{name: u, user: {token: s3cr3tTOKEN}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    with pytest.raises(ClusterError) as e:
        k8s.connect(config.load(root=tmp_path, environ={}))
    assert e.value.cause == (f"kubeconfig {kubeconfig}: cluster 'c' certificate-authority names "
                             "/nonexistent/ca.pem, which does not exist")
    assert e.value.hint.startswith("fix that path in the kubeconfig")
    assert "s3cr3t" not in str(e.value.cause) + e.value.hint and e.value.exit_code == 9


def test_a_kubeconfig_without_a_current_context_is_named(tmp_path, monkeypatch):
    """Trial 16: ``clusters: {}`` and no current-context gave "no usable kubeconfig", hint "set
    KUBECONFIG", though KUBECONFIG was set."""
    kubeconfig = _kubeconfig(tmp_path, monkeypatch, "apiVersion: v1\nkind: Config\nclusters: {}\n")
    with pytest.raises(ClusterError) as e:
        k8s.connect(config.load(root=tmp_path, environ={}))
    assert e.value.cause == f"kubeconfig {kubeconfig} has no current-context"
    assert "kubectl config use-context" in e.value.hint and e.value.exit_code == 9


@pytest.mark.parametrize("call", [k8s.connect, k8s.namespace])
def test_a_kubeconfig_that_is_not_yaml_is_named_with_its_line(tmp_path, monkeypatch, call):
    """A trial: yaml.ParserError in deploy, doctor and verify --cluster k8s."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nclusters: [\n  - {name: x\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with pytest.raises(ClusterError) as e:
        call(config.load(root=tmp_path, environ={}))
    assert e.value.cause.startswith(f"kubeconfig {kubeconfig} is not valid YAML (line 3): ")
    assert "KUBECONFIG" in e.value.hint


@pytest.mark.parametrize("call", [k8s.connect, k8s.namespace])
def test_a_kubeconfig_that_is_a_folder_is_a_cluster_error_naming_it(tmp_path, monkeypatch, call):
    """A third trial: ``KUBECONFIG=<a folder>`` ended as "error: Is a directory: …" (exit 2, the
    catch site's OSError), naming no kubeconfig."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path))
    with pytest.raises(ClusterError) as e:
        call(config.load(root=tmp_path, environ={}))
    assert e.value.cause == f"kubeconfig {tmp_path} is a folder, not a regular file"
    assert "KUBECONFIG" in e.value.hint and e.value.exit_code == 9


@pytest.mark.parametrize("kind, status_route", [("job", JOBS), ("paddlejob", PADDLEJOBS)])
def test_every_request_of_a_run_is_allowed_by_the_documented_role(cluster_api, kind, status_route):
    """docs/paddlecd-role.yaml covers each request a deploy's submit + watch sends (RBAC request
    attributes as the API server derives them, tests/support/k8s_api.py)."""
    created = {"job": {**CREATE}, "paddlejob": {
        ("POST", PADDLEJOBS): [(201, API["paddlejob_created"])]}}[kind]
    done = {"job": API["job_complete"], "paddlejob": API["paddlejob_succeeded"]}[kind]
    pods = {"job": API["pods_succeeded"], "paddlejob": API["pods_paddlejob_running"]}[kind]
    rank0 = {"job": f"{JOB}-0-x7k2p", "paddlejob": f"{JOB}-worker-0"}[kind]
    api = cluster_api({
        **created,
        ("GET", PODS): [(200, pods)],
        ("GET", f"{status_route}/{JOB}"): [(200, done)],
        ("GET", f"{PODS}/{rank0}/log"): [(200, API["log_rank0_ok"])],
    })
    run(kind)
    role = yaml.safe_load(ROLE.read_text())
    refused = [(m, p) for m, p, q in api.requests if not role_allows(role, m, p, q)]
    assert api.requests and refused == []


@pytest.mark.parametrize("call", [k8s.connect, k8s.namespace])
def test_a_current_context_the_kubeconfig_lacks_is_named(tmp_path, monkeypatch, call):
    """Trial 4: the dry-run planned into "namespace default" and connect said "no usable
    kubeconfig (Invalid kube-config file. Expected object with name ghost …)"."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "ghost",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with pytest.raises(ClusterError) as e:
        call(config.load(root=tmp_path, environ={}))
    assert e.value.cause == f"kubeconfig {kubeconfig}: no context named 'ghost' in it"
    assert "use-context" in e.value.hint and e.value.exit_code == 9


@pytest.mark.parametrize("call", [k8s.connect, k8s.namespace])
def test_a_stale_current_context_is_no_matter_when_cluster_context_names_another(
        tmp_path, monkeypatch, call):
    """Trial 12: with ``current-context: nope`` and ``cluster.context: other`` (a context the
    file has), render and the dry run said "no context named 'nope'" / "set cluster.context",
    which was set; kubectl --context other reads such a file."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "nope",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "other", "context": {"cluster": "c", "user": "u",
                                                   "namespace": "team"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings = config.load(root=tmp_path, environ={"PADDLECD_CLUSTER_CONTEXT": "other"})
    if call is k8s.namespace:
        assert call(settings) == "team"
        return
    with pytest.raises(ClusterError) as e:  # nothing answers on 127.0.0.1:1: the context is read
        call(settings)
    assert "nope" not in e.value.cause and "127.0.0.1:1" in e.value.cause


def _kubeconfig_file(path, current, server, namespace):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": f"c-{current}", "cluster": {"server": server}}],
        "users": [{"name": f"u-{current}", "user": {}}],
        "contexts": [{"name": current, "context": {"cluster": f"c-{current}",
                                                   "user": f"u-{current}",
                                                   "namespace": namespace}}]}))
    return path


@pytest.mark.parametrize("first", ["a", "b"])
def test_a_kubeconfig_list_takes_the_first_files_current_context_as_kubectl(
        tmp_path, monkeypatch, first):
    """Trial 13: with ``KUBECONFIG=a:b`` (each file its own current-context) kubectl uses a's
    (client-go: the first file to set a value wins); the client library took b's, so a deploy
    went to another cluster than ``kubectl config current-context`` named. Nothing answers on
    127.0.0.1:1 or 127.0.0.2:2: the server connect names is the one it chose."""
    files = {"a": _kubeconfig_file(tmp_path / "a", "a", "https://127.0.0.1:1", "team-a"),
             "b": _kubeconfig_file(tmp_path / "b", "b", "https://127.0.0.2:2", "team-b")}
    second = "b" if first == "a" else "a"
    monkeypatch.setenv("KUBECONFIG", f"{files[first]}{os.pathsep}{files[second]}")
    settings = config.load(root=tmp_path, environ={})
    assert k8s.namespace(settings) == f"team-{first}"
    with pytest.raises(ClusterError) as e:
        k8s.connect(settings)
    server = {"a": "127.0.0.1:1", "b": "127.0.0.2:2"}
    assert server[first] in e.value.cause and server[second] not in e.value.cause


@pytest.mark.parametrize("key", ["contexts", "clusters", "users"])
def test_a_kubeconfig_with_two_entries_of_one_name_is_named(tmp_path, monkeypatch, key):
    """Trial 13: two contexts named ``a`` in one file were read (the first taken); kubectl
    refuses the file (``duplicate name "a" in list``)."""
    path = _kubeconfig_file(tmp_path / "k", "a", "https://127.0.0.1:1", "team")
    doc = yaml.safe_load(path.read_text())
    doc[key].append(doc[key][0])
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))
    for call in (k8s.namespace, k8s.connect):
        with pytest.raises(ClusterError) as e:
            call(config.load(root=tmp_path, environ={}))
        assert e.value.cause.startswith(f"kubeconfig {path} is not a kubeconfig: two {key} are "
                                        "named")


def test_a_dry_run_namespace_without_a_current_context_fails_as_the_deploy_does(tmp_path,
                                                                               monkeypatch):
    """A dry run's namespace of a kubeconfig with no current-context was "default" (exit 0), and
    the deploy itself then refused it; with ``cluster.context`` the context's own namespace was
    ignored for "default". No API server is needed: the namespace is read from the file."""
    kubeconfig = _kubeconfig(
        tmp_path, monkeypatch,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u, namespace: team-a}}]\n")
    with pytest.raises(ClusterError) as e:
        k8s.namespace(config.load(root=tmp_path, environ={}))
    assert e.value.cause == f"kubeconfig {kubeconfig} has no current-context"
    chosen = config.load(root=tmp_path, environ={"PADDLECD_CLUSTER_CONTEXT": "x"})
    assert k8s.namespace(chosen) == "team-a"


def test_an_api_server_that_refuses_the_connection_is_named_in_our_words(tmp_path, monkeypatch):
    """Trial 20: "unreachable: [Errno 111] Connection refused", Python's text, where every
    other unreachable server is "connection refused (errno 111)". (No API server runs here:
    port 9 of this host refuses.)"""
    _kubeconfig(tmp_path, monkeypatch, yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t0ken-never-shown"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    with pytest.raises(ClusterError) as info:
        k8s.connect(config.load(root=DATA, environ={}))
    assert info.value.cause == ("Kubernetes API server https://127.0.0.1:9 unreachable: "
                                "connection refused (errno 111)")
    assert "t0ken" not in info.value.cause + info.value.hint
