"""The Kubernetes namespace as kubectl picks it: cluster.namespace when set, else the
kubeconfig context's, else the in-cluster service account's, else ``default``. Real kubeconfig files
read by the kubernetes client; no API server is contacted."""

from __future__ import annotations

import pytest
import yaml

from paddlecd import config
from paddlecd.cluster import k8s
from paddlecd.deployment import stage as deploy
from paddlecd.errors import ClusterError, ConfigError

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "team",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [
        {"name": "team", "context": {"cluster": "c", "user": "u", "namespace": "ml-train"}},
        {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "batch"}},
        {"name": "bare", "context": {"cluster": "c", "user": "u"}}],
}


@pytest.fixture
def kubeconfig(tmp_path, monkeypatch):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def settings_with(root, **cluster):
    return config.load({f"cluster.{k}": v for k, v in cluster.items()}, root=root, environ={})


def plan_settings(root):
    """Settings for a plan of an image on 127.0.0.1:5000, where no registry answers here: the
    variant-label check tries once (not the default 4 times with back-off, ~3.5 s a request) and
    leaves the image to the run, as it does after any number of tries."""
    return config.load({"registry.push_retries": 1}, root=root, environ={})


def test_unset_by_default(tmp_path):
    assert settings_with(tmp_path).cluster.namespace is None


def test_the_current_context_namespace(kubeconfig, tmp_path):
    assert k8s.namespace(settings_with(tmp_path)) == "ml-train"


def test_the_chosen_context_namespace(kubeconfig, tmp_path):
    assert k8s.namespace(settings_with(tmp_path, context="other")) == "batch"
    assert k8s.namespace(settings_with(tmp_path, context="bare")) == "default"


@pytest.mark.parametrize(("change", "context", "why"), [
    ({"current-context": "ghost"}, None, "no context named 'ghost' in it"),
    ({}, "nope", "no context named 'nope' (cluster.context)"),
    ({"contexts": [{"name": "team", "context": {"cluster": "gone", "user": "u"}}]}, None,
     "no cluster named 'gone' in it"),
    ({"contexts": [{"name": "team", "context": {"cluster": "c", "user": "u",
                                                "namespace": "Bad_NS"}}]}, None,
     "context 'team' has namespace 'Bad_NS': not a namespace name"),
    ({"contexts": [{"name": "team", "context": {"cluster": "c", "user": "u",
                                                "namespace": ["a"]}}]}, None,
     "context 'team' has namespace \"['a']\": not a namespace name"),
])
def test_a_kubeconfig_naming_what_it_does_not_hold_is_refused(kubeconfig, tmp_path, change,
                                                              context, why):
    """Trial 4: a current-context or cluster.context that names no context planned into
    "namespace default" (exit 0), and a namespace Bad_NS or a list was put in the manifests.
    kubectl refuses both (``context "ghost" does not exist``; namespaces are RFC 1123 labels)."""
    kubeconfig.write_text(yaml.safe_dump({**KUBECONFIG, **change}))
    with pytest.raises(ClusterError) as e:
        k8s.namespace(settings_with(tmp_path, **({"context": context} if context else {})))
    assert e.value.cause == f"kubeconfig {kubeconfig}: {why}" or e.value.cause.startswith(
        f"kubeconfig {kubeconfig}: {why}"), e.value.cause


def test_the_setting_wins(kubeconfig, tmp_path):
    assert k8s.namespace(settings_with(tmp_path, namespace="prod")) == "prod"


def test_in_cluster_service_account_without_kubeconfig(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    sa = tmp_path / "namespace"
    sa.write_text("ml-pods\n")
    assert k8s.namespace(settings_with(tmp_path), service_account_namespace=sa) == "ml-pods"
    none = tmp_path / "no-such-file"
    assert k8s.namespace(settings_with(tmp_path), service_account_namespace=none) == "default"


def test_the_plan_and_its_manifests_use_it(kubeconfig, tmp_path, project_root, monkeypatch):
    monkeypatch.chdir(project_root)
    s = plan_settings(project_root)
    image = "127.0.0.1:5000/paddlecd/paddle@sha256:" + "a" * 64
    p = deploy.plan(s, job=str(project_root / "examples" / "train.yaml"), image=image,
                    variant="cpu", cluster="k8s")
    assert p.namespace == "ml-train"
    assert {m["metadata"]["namespace"] for m in p.manifests} == {"ml-train"}
    assert "Kubernetes namespace ml-train" in p.describe()[0]


@pytest.mark.parametrize("text, why", [
    ("[]\n", "its top level is not a mapping"), ("5\n", "its top level is not a mapping"),
    # a re-trial: this one was said to be "not a mapping" at its top level too
    ("apiVersion: v1\nclusters: 5\n", "'clusters' is not a list of mappings"),
    # trial 7: a string was iterated by the client ("Expected key name in …/o"), and a -data
    # field that is no base64 was binascii.Error's traceback in deploy, doctor and verify
    ("clusters: oops\n", "'clusters' is not a list of mappings"),
    ("clusters:\n- name: c1\n  cluster: {server: 'https://x:6443', "
     "certificate-authority-data: '!!!notbase64'}\n", "cluster 'c1': certificate-authority-data "
     "is not base64"),
    ("users:\n- name: u1\n  user: {client-key-data: 'a b'}\n",
     "user 'u1': client-key-data is not base64"),
    ("contexts:\n- name: x\n  context: 5\n", "context 'x': 'context' is not a mapping"),
])
def test_a_kubeconfig_that_is_not_a_mapping_is_named(tmp_path, monkeypatch, text, why):
    """A trial: ``KUBECONFIG`` naming a file holding ``[]`` gave namespace ``default`` at
    dry-run and the client's "list indices must be integers" at deploy."""
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    monkeypatch.setenv("KUBECONFIG", str(path))
    for call in (lambda: k8s.namespace(settings_with(tmp_path)),
                 lambda: k8s.connect(settings_with(tmp_path))):
        with pytest.raises(ClusterError) as e:
            call()
        assert e.value.cause.startswith(f"kubeconfig {path} is not a kubeconfig: {why}")


def test_local_runs_refuse_more_nodes_than_one_machine_holds(tmp_path, project_root, monkeypatch):
    """A trial: ``--cluster local --nodes 512`` got as far as resolving the release;
    the bound is checked before any registry is asked (none runs here)."""
    monkeypatch.chdir(project_root)
    with pytest.raises(ConfigError, match=r"--nodes 512: --cluster local starts one container"):
        deploy.plan(settings_with(project_root), job=str(project_root / "examples/train.yaml"),
                    release="1.0.0-cpu", nodes=512, cluster="local")


def test_the_plan_says_a_host_folder_output_gets_a_root_init_container(kubeconfig, tmp_path,
                                                                        project_root, monkeypatch):
    """examples/train.yaml writes to a host folder: on Kubernetes the plan names the CAP_CHOWN
    init container (cluster/render.py; hostPath has no fsGroup ownership management, the official
    HostPathVolumeSource schema), and only for the writable mount, before anything is created."""
    monkeypatch.chdir(project_root)
    s = plan_settings(project_root)
    image = "127.0.0.1:5000/paddlecd/paddle@sha256:" + "a" * 64
    job = str(project_root / "examples" / "train.yaml")
    lines = deploy.plan(s, job=job, image=image, variant="cpu", cluster="k8s").describe()
    assert lines[-1] == ("  owner     init container own-output (root, CAP_CHOWN only) gives "
                         "/output to uid 1000 (hostPath; a claim needs none)")
    local = deploy.plan(s, job=job, image=image, variant="cpu", cluster="local").describe()
    assert not any(line.startswith("  owner") for line in local)
