"""docs/paddlecd-role.yaml, the Role users apply for deploy and verify on Kubernetes: valid for the
official schemas, and enough for every request paddlecd makes against the scripted API (the
scenarios of test_cluster_k8s.py and test_verify_nodes_k8s.py check their requests with it too)."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from support.k8s_api import ROLE, rbac_attributes, role_allows

NS = "ml-train"


@pytest.mark.parametrize("version", ["1.28", "1.30", "1.32"])
def test_the_role_validates_against_the_official_schemas(version):
    """rbac.authorization.k8s.io/v1 Role, strict (unknown fields fail), kubernetes-validate."""
    role = yaml.safe_load(ROLE.read_text())
    assert kubernetes_validate.validate(role, version, strict=True) == version


@pytest.mark.parametrize("method, path, query, attrs", [
    ("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", "", ("batch", "jobs", "create")),
    ("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/j", "", ("batch", "jobs", "get")),
    ("GET", f"/apis/batch/v1/namespaces/{NS}/jobs/j/status", "", ("batch", "jobs/status", "get")),
    ("GET", f"/api/v1/namespaces/{NS}/pods", "labelSelector=x", ("", "pods", "list")),
    ("GET", f"/api/v1/namespaces/{NS}/pods/p/log", "follow=true", ("", "pods/log", "get")),
    ("DELETE", f"/apis/kubeflow.org/v1/namespaces/{NS}/paddlejobs/j", "",
     ("kubeflow.org", "paddlejobs", "delete")),
    ("GET", "/version/", "", None),
])
def test_requests_map_to_rbac_attributes(method, path, query, attrs):
    """kubernetes.io/docs/reference/access-authn-authz/authorization "Determine the request verb"
    and rbac "Referring to resources" (a subresource is resource/subresource)."""
    assert rbac_attributes(method, path, query) == attrs


def test_the_role_grants_no_status_subresource_and_nothing_cluster_wide():
    """Status is read by a plain get (cluster/k8s.py job_conditions), so the Role grants no
    jobs/status or paddlejobs/status, no wildcard and no secrets (the kubelet reads the pull
    secret, not paddlecd)."""
    role = yaml.safe_load(ROLE.read_text())
    assert role["kind"] == "Role"
    assert not role_allows(role, "GET", f"/apis/batch/v1/namespaces/{NS}/jobs/j/status")
    assert not role_allows(role, "GET",
                           f"/apis/kubeflow.org/v1/namespaces/{NS}/paddlejobs/j/status")
    assert not role_allows(role, "GET", f"/api/v1/namespaces/{NS}/secrets/s")
    assert all("*" not in r["verbs"] + r["resources"] + r["apiGroups"] for r in role["rules"])
