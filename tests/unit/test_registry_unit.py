"""Registry client pieces that need no server: reference grammar, Accept list, challenges,
credentials."""

from __future__ import annotations

import base64
import json

import pytest

from paddlecd.config import load
from paddlecd.errors import ConfigError, RegistryAuthError
from paddlecd.registry import auth as registry_auth
from paddlecd.registry.auth import Credentials, find_credentials, parse_challenge, token_params
from paddlecd.registry.client import ACCEPT, RegistryClient, client_for, parse_reference

D = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "text, registry, repository, tag, digest",
    [
        ("ubuntu", "docker.io", "library/ubuntu", "latest", None),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", None),
        ("paddlepaddle/paddle:3.0.0-gpu", "docker.io", "paddlepaddle/paddle", "3.0.0-gpu", None),
        ("index.docker.io/library/python:3.11", "docker.io", "library/python", "3.11", None),
        ("127.0.0.1:5000/paddlecd/paddle:cpu", "127.0.0.1:5000", "paddlecd/paddle", "cpu", None),
        ("localhost/a/b/c", "localhost", "a/b/c", "latest", None),
        (f"reg.example.com/ci/paddle@{D}", "reg.example.com", "ci/paddle", None, D),
        (
            f"reg.example.com:443/ci/paddle:1.4.0-cpu@{D}",
            "reg.example.com:443",
            "ci/paddle",
            "1.4.0-cpu",
            D,
        ),
    ],
)
def test_parse_reference(text, registry, repository, tag, digest):
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        digest,
    )
    assert parse_reference(str(ref)) == ref


def test_docker_hub_api_host_and_by_digest():
    ref = parse_reference("ubuntu:22.04")
    assert ref.api_host == "registry-1.docker.io"
    assert str(ref.by_digest(D)) == f"docker.io/library/ubuntu@{D}"
    assert ref.by_digest(D).identifier == D
    assert str(parse_reference("127.0.0.1:5000/x:1").with_tag("2")) == "127.0.0.1:5000/x:2"


@pytest.mark.parametrize("bad", ["", "UPPER/case", "repo:bad tag", "repo@sha256:short", "a//b",
                                 "reg:5000/repo:" + "t" * 200, "repo@md5:" + "a" * 32, "-lead/x",
                                 # trial 13: an unset $DIGEST after @ was read as repo:latest
                                 "127.0.0.1:6097/t/paddle@", "a/b@"])
def test_parse_reference_rejects_malformed(bad):
    with pytest.raises(ConfigError, match="invalid"):
        parse_reference(bad)


def test_accept_lists_all_four_manifest_types():
    for media_type in ("application/vnd.docker.distribution.manifest.v2+json",
                       "application/vnd.docker.distribution.manifest.list.v2+json",
                       "application/vnd.oci.image.manifest.v1+json",
                       "application/vnd.oci.image.index.v1+json"):
        assert media_type in ACCEPT.split(", ")


def test_parse_bearer_challenge_with_commas_in_quotes():
    c = parse_challenge('Bearer realm="https://auth.example/token",service="registry.example",'
                        'scope="repository:ci/paddle:pull,push"')
    assert c.scheme == "bearer"
    assert c.params == {"realm": "https://auth.example/token", "service": "registry.example",
                        "scope": "repository:ci/paddle:pull,push"}
    assert token_params(c, ["repository:a:pull,push", "repository:b:pull"]) == [
        ("service", "registry.example"),
        ("scope", "repository:a:pull,push"),
        ("scope", "repository:b:pull"),
    ]


def test_parse_basic_challenge():
    c = parse_challenge('Basic realm="paddlecd"')
    assert (c.scheme, c.params["realm"]) == ("basic", "paddlecd")


def _write_config(tmp_path, monkeypatch, cfg):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("PADDLECD_REGISTRY_USERNAME", raising=False)
    monkeypatch.delenv("PADDLECD_REGISTRY_PASSWORD", raising=False)


def test_credentials_from_docker_config_auths(tmp_path, monkeypatch):
    auth = base64.b64encode(b"ci:pa:ss").decode()
    _write_config(tmp_path, monkeypatch, {"auths": {"https://reg.example:5000": {"auth": auth},
                                                    "https://index.docker.io/v1/": {"auth": auth}}})
    assert find_credentials("reg.example:5000") == Credentials("ci", "pa:ss")
    assert find_credentials("docker.io") == Credentials("ci", "pa:ss")
    assert find_credentials("other.example") is None


def test_credentials_env_wins_and_secret_is_hidden(tmp_path, monkeypatch):
    _write_config(tmp_path, monkeypatch, {"auths": {}})
    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "bot")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "hunter2")
    creds = find_credentials("any.example")
    assert creds == Credentials("bot", "hunter2")
    assert "hunter2" not in repr(creds)
    load(root=tmp_path)  # the credential variables are not rejected as unknown settings


def test_credentials_from_helper(tmp_path, monkeypatch):
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    helper.write_text(
        '#!/bin/sh\nread server\necho "{\\"Username\\":\\"u-$server\\",\\"Secret\\":\\"s\\"}"\n'
    )
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helper.parent}:/usr/bin:/bin")
    _write_config(
        tmp_path, monkeypatch, {"credHelpers": {"reg.example": "fake"}, "credsStore": "missing"}
    )
    assert find_credentials("reg.example") == Credentials("u-reg.example", "s")
    with pytest.raises(RegistryAuthError, match="docker-credential-missing .*is not on PATH"):
        find_credentials("other.example")  # the store is not installed: docker push fails too


def test_client_for_schemes(tmp_path):
    s = load({"registry.url": "127.0.0.1:5999"}, root=tmp_path, environ={})
    assert client_for(s).base == "http://127.0.0.1:5999/v2/"
    s = load(
        {"registry.url": "127.0.0.1:5999", "registry.ca_file": "/tmp/ca.crt"},
        root=tmp_path,
        environ={},
    )
    assert client_for(s).base == "https://127.0.0.1:5999/v2/"
    assert client_for(s, "reg.example").base == "https://reg.example/v2/"
    assert RegistryClient("docker.io").base == "https://registry-1.docker.io/v2/"


def test_scope_grammar():
    assert registry_auth.scope("ci/paddle") == "repository:ci/paddle:pull,push"
    assert registry_auth.scope("ci/paddle", "pull") == "repository:ci/paddle:pull"


def test_client_for_release_registry_settings(tmp_path):
    s = load({"registry.url": "127.0.0.1:5999", "release.registry": "rel.example:5443",
              "release.ca_file": "/tmp/rel-ca.crt"}, root=tmp_path, environ={})
    c = client_for(s, "rel.example:5443")
    assert c.base == "https://rel.example:5443/v2/" and c.verify == "/tmp/rel-ca.crt"
    s = load(
        {"release.registry": "rel.example", "release.insecure": "true"}, root=tmp_path, environ={}
    )
    assert client_for(s, "rel.example").base == "http://rel.example/v2/"


def test_env_registry_credentials_go_only_to_the_configured_registry(tmp_path, monkeypatch):
    """PADDLECD_REGISTRY_USERNAME/PASSWORD must not be sent to another registry (e.g. Docker Hub for
    a base)."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # empty: no config.json
    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "alice")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "s3cret")
    s = load({"registry.url": "registry.example:5000"}, root=tmp_path, environ={})
    assert client_for(s).credentials.username == "alice"
    assert client_for(s, "docker.io").credentials is None
    assert client_for(s, "other.example").credentials is None
