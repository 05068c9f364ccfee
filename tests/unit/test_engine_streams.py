"""The engine module without a daemon: decoding push streams (an error chunk after progress still
fails, STYLE §6) and picking a BuildKit-capable docker CLI explicitly."""

from __future__ import annotations

import os

import pytest

from paddlecd import engine
from paddlecd.errors import (
    EngineError,
    NotFoundError,
    RegistryAuthError,
    RegistryError,
    RegistryRateLimitError,
)


def test_push_stream_error_chunk_raises_even_after_progress():
    chunks = [
        {"status": "Preparing", "id": "abc"},
        {"status": "Pushing", "id": "abc", "progress": "[=>] 1MB"},
        {"errorDetail": {"message": "blob upload unknown"}, "error": "blob upload unknown"},
    ]
    seen = []
    with pytest.raises(RegistryError) as e:
        engine.decode_stream(iter(chunks), what="pushing r/x:1", on_progress=seen.append)
    assert "blob upload unknown" in e.value.cause and len(seen) == 2


def test_a_push_answered_by_a_page_is_named_as_no_registry_answer():
    """Trial 19: a proxy's HTTP 200 sign-in page for every request made the engine's "invalid
    checksum digest format", hint "check the registry is up and has space"."""
    chunks = [{"status": "Pushing", "id": "abc"},
              {"error": "invalid checksum digest format"}]
    with pytest.raises(RegistryError) as e:
        engine.decode_stream(iter(chunks), what="pushing 127.0.0.1:6310/p/x:1")
    assert e.value.cause.startswith("pushing 127.0.0.1:6310/p/x:1: 127.0.0.1:6310 answered "
                                    "without a valid Docker-Content-Digest")
    assert e.value.hint.startswith("check 127.0.0.1:6310 is the registry and nothing between")


def test_a_pull_of_an_artifact_is_named_as_no_image():
    """Trial 21: "unsupported media type application/vnd.oci.empty.v1+json", hint "check the
    registry is up and has space; re-run to retry" (a re-run cannot help)."""
    chunks = [{"error": "unsupported media type application/vnd.oci.empty.v1+json"}]
    with pytest.raises(RegistryError) as e:
        engine.decode_stream(iter(chunks), what="pulling r/p@sha256:" + "f" * 64)
    assert "not an image the engine can run" in e.value.cause
    assert e.value.hint.startswith("give an image's digest")


def test_push_stream_auth_error_is_typed():
    raw = [b'{"status":"Preparing","id":"a"}\n{"error":"unauthorized: authentication required"}\n']
    with pytest.raises(RegistryAuthError):
        engine.decode_stream(iter(raw), what="pushing r/x:1")


def test_a_push_refused_with_config_json_credentials_names_that_file(tmp_path, monkeypatch):
    """Trial 7: with a wrong password in config.json, push hinted "run: docker login" as if no
    credentials had been given, where every other task named the file."""
    import base64
    import json

    (tmp_path / "config.json").write_text(json.dumps({"auths": {"reg.example:5000": {
        "auth": base64.b64encode(b"bob:wrong").decode()}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("PADDLECD_REGISTRY_USERNAME", raising=False)
    monkeypatch.delenv("PADDLECD_REGISTRY_PASSWORD", raising=False)
    raw = [b'{"error":"unauthorized: authentication required"}\n']
    with pytest.raises(RegistryAuthError) as e:
        engine.decode_stream(iter(raw), what="pushing reg.example:5000/x:1")
    assert e.value.hint == (f"reg.example:5000 rejected the credentials from "
                            f"{tmp_path / 'config.json'}: check them (docker login "
                            "reg.example:5000 rewrites them)")


HTML_413 = ('error parsing HTTP 413 response body: invalid character \'<\' looking for beginning '
            'of value: "<html>\\r\\n<head><title>413 Request Entity Too Large</title></head>'
            '\\r\\n<body><center><h1>413 Request Entity Too Large</h1></center></body></html>"')


@pytest.mark.parametrize(
    "text, kind, cause, hint",
    [
        (HTML_413, RegistryError, "HTTP 413 Request Entity Too Large — a proxy in front of",
         "client_max_body_size"),
        ('error parsing HTTP 502 response body: invalid character \'<\': "<html><title>502 Bad '
         'Gateway</title></html>"', RegistryError, "HTTP 502 with a HTML (502 Bad Gateway) body",
         "registry behind the proxy is down"),
        # trial 17: a cut JSON error body was "a HTML body — not the registry's answer"
        ('error parsing HTTP 400 response body: unexpected end of JSON input: "{\\"errors\\":'
         '[{\\"code\\":\\"UNAUTHO"', RegistryError,
         "HTTP 400 with a cut or malformed JSON body — the answer from reg:5000 was cut short",
         "proxy or network"),
        ('error parsing HTTP 502 response body: invalid character \'B\': "Bad gateway"',
         RegistryError, "HTTP 502 with a non-JSON text body", "registry behind the proxy"),
        ("manifest invalid: manifest invalid", RegistryError, "MANIFEST_INVALID", "media type"),
        ("name unknown: repository name not known to registry", NotFoundError,
         "not found (NAME_UNKNOWN", "does not exist there"),
        ("toomanyrequests: rate limit reached", RegistryRateLimitError, "TOOMANYREQUESTS",
         "rate_limit_wait"),
        ("received unexpected HTTP status: 500 Internal Server Error", RegistryError, "HTTP 500",
         "failed internally"),
        ("denied: requested access to the resource is denied", RegistryAuthError, "denied",
         "docker login reg:5000"),
    ],
)
def test_registry_answers_inside_an_engine_stream_are_read_like_the_clients(text, kind, cause,
                                                                             hint):
    """A trial: answers arriving inside the engine's push or build stream were passed on as the
    engine's raw text (an nginx 413 page dumped whole) with one generic hint."""
    with pytest.raises(kind) as e:
        engine.decode_stream(iter([{"error": text}]), what="pushing reg:5000/p/q:1")
    assert type(e.value) is kind and cause in e.value.cause and hint in e.value.hint
    assert "<html>" not in e.value.cause


def test_push_stream_success_returns_messages():
    msgs = engine.decode_stream(
        iter([{"status": "Pushed", "id": "a"}, {"aux": {"Digest": "sha256:" + "1" * 64}}]), what="p"
    )
    assert msgs[-1]["aux"]["Digest"].startswith("sha256:")


def test_builder_is_picked_explicitly():
    b = engine.pick_builder()
    assert "BuildKit" in b.description or "DOCKER_BUILDKIT=1" in b.description


def _fake_cli(tmp_path, version: str):
    """A docker CLI that has no buildx and answers ``--version`` like the real one."""
    fake = tmp_path / version / "docker"
    fake.parent.mkdir()
    fake.write_text(
        f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'Docker version {version}, build x' && exit 0\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    return str(fake)


def test_builder_refuses_a_cli_without_buildkit(tmp_path):
    with pytest.raises(EngineError) as e:
        engine.pick_builder(_fake_cli(tmp_path, "28.2.2"))
    assert "no BuildKit-capable docker CLI" in e.value.cause


def test_builder_takes_an_old_cli_with_docker_buildkit(tmp_path):
    # the version comes from the client-only `docker --version` (Debian's suffix included)
    cli = _fake_cli(tmp_path, "20.10.24+dfsg1")
    b = engine.pick_builder(cli)
    assert b.argv == (cli, "build") and ("DOCKER_BUILDKIT", "1") in b.env
    assert "20.10 with DOCKER_BUILDKIT=1" in b.description


def test_builder_prefers_the_first_usable_cli_on_path(tmp_path, monkeypatch):
    # probes run at once; the PATH order still decides: 28.x (refused) first, then two 20.10s
    new, old1, old2 = (_fake_cli(tmp_path, v) for v in ("28.2.2", "20.10.24", "20.10.5"))
    monkeypatch.setattr(engine, "_docker_clis", lambda: [new, old1, old2])
    engine.pick_builder.cache_clear()
    try:
        assert engine.pick_builder().argv == (old1, "build")
    finally:
        engine.pick_builder.cache_clear()


def test_the_builder_probe_is_remembered_until_the_cli_changes(tmp_path, monkeypatch):
    """A new process (the in-process cache cleared) takes the probe's answer from the disk cache
    without running the CLI; rewriting the CLI (an upgrade) makes it probe again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    cli = tmp_path / "docker"

    def write(version):
        cli.write_text(f"#!/bin/sh\necho x >> {calls}\n"
                       f"[ \"$1\" = --version ] && echo 'Docker version {version}, build x' "
                       "&& exit 0\nexit 1\n")
        cli.chmod(0o755)

    write("20.10.24")
    engine.pick_builder.cache_clear()
    first = engine.pick_builder(str(cli))
    probes = len(calls.read_text().splitlines())
    assert first.argv == (str(cli), "build") and probes == 2  # buildx version, --version
    engine.pick_builder.cache_clear()
    assert engine.pick_builder(str(cli)) == first
    assert len(calls.read_text().splitlines()) == probes  # not run again
    write("20.10.25")
    os.utime(cli, ns=(1, 1))  # a different file: size/mtime change
    engine.pick_builder.cache_clear()
    assert "20.10" in engine.pick_builder(str(cli)).description
    assert len(calls.read_text().splitlines()) == probes + 2
    engine.pick_builder.cache_clear()
