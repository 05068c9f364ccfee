"""promote --digest: a malformed digest is named as a digest, a tag as a tag (release.plan)."""

from __future__ import annotations

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError
from paddlecd.release import plan


@pytest.fixture
def settings(tmp_path):
    return config.load(root=tmp_path, environ={"PADDLECD_REGISTRY_URL": "127.0.0.1:1",
                                               "PADDLECD_STATE_DIR": str(tmp_path / "s")})


@pytest.mark.parametrize("digest", ["md5:" + "a" * 32, "SHA256:" + "A" * 64, "sha256:abc"])
def test_a_malformed_digest_is_not_called_a_tag(settings, monkeypatch, digest):
    monkeypatch.setattr(plan, "current", lambda *a, **k: None)  # no registry is asked
    with pytest.raises(ConfigError) as e:
        plan._source(settings, "cpu", digest)
    assert "is a tag" not in e.value.cause
    assert "invalid digest" in e.value.cause
    assert "64 lowercase hex" in e.value.hint


def test_a_tag_is_still_called_a_tag(settings, monkeypatch):
    monkeypatch.setattr(plan, "current", lambda *a, **k: None)
    with pytest.raises(ConfigError, match="is a tag, not a digest"):
        plan._source(settings, "cpu", "cpu-abc1234")
