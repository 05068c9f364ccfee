"""The engine module without a daemon: decoding push streams (an error chunk after progress still
fails, STYLE §6) and picking a BuildKit-capable docker CLI explicitly."""

from __future__ import annotations

import pytest

from paddlecd import engine
from paddlecd.errors import EngineError, RegistryAuthError, RegistryError


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


def test_push_stream_auth_error_is_typed():
    raw = [b'{"status":"Preparing","id":"a"}\n{"error":"unauthorized: authentication required"}\n']
    with pytest.raises(RegistryAuthError):
        engine.decode_stream(iter(raw), what="pushing r/x:1")


def test_push_stream_success_returns_messages():
    msgs = engine.decode_stream(
        iter([{"status": "Pushed", "id": "a"}, {"aux": {"Digest": "sha256:" + "1" * 64}}]), what="p"
    )
    assert msgs[-1]["aux"]["Digest"].startswith("sha256:")


def test_builder_is_picked_explicitly():
    b = engine.pick_builder()
    assert "BuildKit" in b.description or "DOCKER_BUILDKIT=1" in b.description


def test_builder_refuses_a_cli_without_buildkit(tmp_path):
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n[ \"$1\" = version ] && echo 28.2.2 && exit 0\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(EngineError) as e:
        engine.pick_builder(str(fake))
    assert "no BuildKit-capable docker CLI" in e.value.cause
