"""What differs on podman, read without a daemon: which engine answers (its /version), the pushed
digest from podman's status line, names as Docker lists them, the plain-HTTP refusal as one line,
and the ``engine.kind`` setting. The messages are podman 4.3.1's, recorded on this machine; the
real service runs in tests/integration/test_podman.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from paddlecd import config, engine
from paddlecd.errors import ConfigError, EngineError, RegistryError

from support import ROOT

PODMAN_VERSION = {  # GET /version of `podman system service` 4.3.1 (Debian 12), trimmed
    "Platform": {"Name": "linux/amd64/debian-12"},
    "Components": [{"Name": "Podman Engine", "Version": "4.3.1"},
                   {"Name": "Conmon", "Version": "conmon version 2.1.6"}],
    "Version": "4.3.1", "ApiVersion": "1.41",
}
DOCKER_VERSION = {  # GET /version of Debian's docker.io 20.10, trimmed
    "Platform": {"Name": ""},
    "Components": [{"Name": "Engine", "Version": "20.10.24+dfsg1"},
                   {"Name": "containerd", "Version": "1.6.20~ds1"}],
    "Version": "20.10.24+dfsg1", "ApiVersion": "1.41",
}
DIGEST = "sha256:" + "2f" * 32


def test_the_version_answer_tells_podman_from_docker():
    assert engine.kind_of(PODMAN_VERSION) == "podman"
    assert engine.kind_of(DOCKER_VERSION) == "docker"
    assert engine.kind_of({"Platform": {"Name": "Podman Engine"}}) == "podman"
    assert engine.kind_of({}) == "docker"


class _Api:
    def __init__(self, messages):
        self.messages = messages

    def push(self, repo, **kwargs):
        return iter(self.messages)


def _push_with(monkeypatch, messages):
    fake = SimpleNamespace(api=_Api(messages))
    monkeypatch.setattr(engine, "client", lambda: fake)
    return engine.push("127.0.0.1:5999/x/app:t1")


def test_podmans_push_stream_gives_the_digest_in_its_last_status_line(monkeypatch):
    """podman sends no ``aux`` message (pkg/api/handlers/compat/images_push.go)."""
    messages = [{"status": "The push refers to repository [127.0.0.1:5999/x/app:t1]"},
                {"status": f"t1: digest: {DIGEST} size: 343"}]
    assert _push_with(monkeypatch, messages) == DIGEST


def test_a_push_stream_without_any_digest_fails_by_name(monkeypatch):
    with pytest.raises(RegistryError, match="reported no digest"):
        _push_with(monkeypatch, [{"status": "The push refers to repository [x]"}])


def test_a_plain_http_registry_podman_does_not_trust_is_one_line_with_the_fix(monkeypatch):
    text = ('trying to reuse blob sha256:80 at destination: pinging container registry '
            '127.0.0.1:5999: Get "https://127.0.0.1:5999/v2/": http: server gave HTTP response '
            'to HTTPS client')
    with pytest.raises(RegistryError) as e:
        _push_with(monkeypatch, [{"status": "The push refers to repository [x]"},
                                 {"errorDetail": {"message": text}, "error": text}])
    assert e.value.cause == ("pushing 127.0.0.1:5999/x/app:t1: 127.0.0.1:5999 speaks plain HTTP "
                             "and the engine expects HTTPS")
    assert 'location = "127.0.0.1:5999" insecure = true' in e.value.hint
    assert "\n" not in e.value.cause + e.value.hint


@pytest.mark.parametrize(("listed", "docker_lists"), [
    ("docker.io/library/paddlecd-rootfs:bookworm", "paddlecd-rootfs:bookworm"),
    ("docker.io/paddlepaddle/paddle:3.0.0", "paddlepaddle/paddle:3.0.0"),
    ("docker.io/library/x@" + DIGEST, "x@" + DIGEST),
    ("127.0.0.1:5000/paddlecd/paddle:cpu-1a2b", "127.0.0.1:5000/paddlecd/paddle:cpu-1a2b"),
    ("docker.io/x:1", "docker.io/x:1"),  # not a name Docker would shorten this way
])
def test_names_come_back_as_docker_lists_them(listed, docker_lists):
    assert engine.short_name(listed) == docker_lists


def test_engine_kind_is_a_setting_with_its_values_checked(tmp_path):
    settings = config.load({}, root=ROOT, environ={"PADDLECD_ENGINE_KIND": "podman"})
    assert settings.engine.kind == "podman"
    assert config.load({}, root=ROOT, environ={}).engine.kind == "auto"
    with pytest.raises(ConfigError,
                       match=r"'engine.kind' \(the flag\) is 'Podman': not auto, docker or podman"):
        config.load({"engine.kind": "Podman"}, root=ROOT, environ={})


def test_podmans_socket_is_the_default_host_of_kind_podman(monkeypatch):
    assert engine.default_host("auto") == engine.DOCKER_HOST_DEFAULT
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    assert engine.default_host("podman") == "unix:///run/podman/podman.sock"
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert engine.default_host("podman") == "unix:///run/user/1000/podman/podman.sock"


def test_a_kind_that_does_not_answer_is_one_line_naming_both(monkeypatch, tmp_path):
    """engine.kind podman, Docker on DOCKER_HOST: refused before anything runs."""
    class FakeClient:
        api = SimpleNamespace(timeout=600)  # docker-py's APIClient, whose timeout client() sets

        def ping(self):
            return True

        def version(self):
            return DOCKER_VERSION

        def close(self):
            pass

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    monkeypatch.setattr(engine.docker, "from_env", lambda **kw: FakeClient())
    engine.select("podman")
    try:
        with pytest.raises(EngineError) as e:
            engine.client()
        assert e.value.cause == ("engine.kind is podman but unix:///var/run/docker.sock answers "
                                 "as docker")
        assert "PADDLECD_ENGINE_KIND" in e.value.hint
    finally:
        engine.select("auto")
        engine.client.cache_clear()


def test_gpus_asked_of_podman_are_refused_before_any_container_is_made(monkeypatch):
    """podman 4.3.1 drops HostConfig.DeviceRequests silently (measured: the created container's
    DeviceRequests is null), so a GPU verify would run its checks on no GPU."""
    monkeypatch.setattr(engine, "kind", lambda: "podman")
    monkeypatch.setattr(engine, "client", lambda: pytest.fail("no container may be created"))
    spec = engine.ContainerSpec(image="r/x@sha256:" + "a" * 64, gpus="all")
    with pytest.raises(EngineError, match="drops GPU device requests") as e, engine.container(spec):
        pass
    assert "engine.kind: docker" in e.value.hint


def test_podman_not_answering_says_how_to_start_podman(monkeypatch, tmp_path):
    def refuse(**kwargs):
        raise engine.docker.errors.DockerException(  # docker-py's words, as trial 21 met them
            "Error while fetching server API version: ('Connection aborted.', "
            "FileNotFoundError(2, 'No such file or directory'))")

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(engine.docker, "from_env", refuse)
    engine.select("podman")
    try:
        with pytest.raises(EngineError) as e:
            engine.client()
        assert e.value.cause == (  # trial 21: was docker-py's text with Python's reprs
            "connecting to the podman engine (unix:///run/podman/podman.sock): no engine "
            "answered (no such file or directory (errno 2))")
        assert e.value.hint.startswith("start it: podman system service --time=0")
    finally:
        engine.select("auto")
        engine.client.cache_clear()


@pytest.mark.timeout(60)  # a regression waits docker-py's 600 s, then fails here
def test_an_engine_that_takes_the_connection_and_never_answers_is_named_within_the_ping_limit(
        tmp_path, monkeypatch):
    """Trial 11: a socket that accepted and never answered left every task silent for 600 s
    (docker-py's transfer timeout on the first ping), then hinted "start it"."""
    import socket
    import threading
    import time

    path = tmp_path / "hung.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    held = []
    threading.Thread(target=lambda: [held.append(server.accept()) for _ in range(4)],
                     daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    monkeypatch.setattr(engine, "PING_TIMEOUT_S", 1)
    monkeypatch.setattr(engine, "_wanted", "auto")
    engine.reset_client()
    start = time.monotonic()
    try:
        with pytest.raises(EngineError, match="took the connection and gave no answer within 1 s"
                           ) as e:
            engine.client()
    finally:
        server.close()
        engine.reset_client()
    assert time.monotonic() - start < 20 and "hung or overloaded" in e.value.hint
