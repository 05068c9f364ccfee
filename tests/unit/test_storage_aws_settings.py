"""AWS settings given the standard way win over paddlecd's fallbacks: retries and
checksum behaviour from the environment or the AWS profile reach the botocore client unless the
project sets storage.checksum_mode itself. The client is built for real; nothing is sent."""

from __future__ import annotations

import os

import pytest

from paddlecd.artifacts.storage import open_store
from paddlecd.config import StorageSettings
from paddlecd.errors import ConfigError


@pytest.fixture
def aws(tmp_path, monkeypatch):
    """A clean AWS environment whose shared config file is ``aws.config`` (written by the test)."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    (tmp_path / "aws-config").write_text("")
    return tmp_path / "aws-config"


def _config(**settings):
    settings = StorageSettings(endpoint_url="http://127.0.0.1:9", region="us-east-1", **settings)
    store = open_store("s3://models", settings)
    cfg = store.client.meta.config
    return cfg.retries, cfg.request_checksum_calculation, cfg.response_checksum_validation


def test_fallbacks_when_nothing_is_given(aws):
    # botocore's retries max_attempts=3 means 4 attempts in all
    retries = {"mode": "standard", "total_max_attempts": 4}
    assert _config() == (retries, "when_required", "when_required")


def test_environment_wins(aws, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "9")
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    retries = {"mode": "adaptive", "total_max_attempts": 9}
    assert _config() == (retries, "when_supported", "when_required")


def test_one_environment_variable_leaves_the_other_fallbacks(aws, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    assert _config()[0] == {"mode": "standard", "total_max_attempts": 2}


def test_profile_wins(aws, monkeypatch):
    aws.write_text("[profile ci]\nmax_attempts = 6\nretry_mode = legacy\n"
                   "response_checksum_validation = when_supported\n")
    monkeypatch.setenv("AWS_PROFILE", "ci")
    retries = {"mode": "legacy", "total_max_attempts": 6}
    assert _config() == (retries, "when_required", "when_supported")


def test_storage_checksum_mode_given_beats_the_environment(aws, monkeypatch):
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    monkeypatch.setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_supported")
    assert _config(checksum_mode="when_required")[1:] == ("when_required", "when_required")


def test_unknown_profile_is_a_config_error(aws, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "nope")
    with pytest.raises(ConfigError, match="AWS profile not found") as e:
        _config()
    assert "AWS_PROFILE" in e.value.hint


@pytest.mark.parametrize("name, value, fragment", [
    ("AWS_REQUEST_CHECKSUM_CALCULATION", "bogus", "request_checksum_calculation"),
    ("AWS_RESPONSE_CHECKSUM_VALIDATION", "bogus", "response_checksum_validation"),
    ("AWS_RETRY_MODE", "bogus", "bogus"),
    ("AWS_MAX_ATTEMPTS", "abc", "'abc'"),
])
def test_an_aws_value_botocore_refuses_is_one_line_naming_the_variable(aws, monkeypatch, name,
                                                                         value, fragment):
    """A trial: these ended doctor and upload in botocore's traceback, and
    AWS_MAX_ATTEMPTS=abc was blamed on storage.endpoint_url."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as e:
        _config()
    assert e.value.cause.startswith("the AWS configuration is refused by botocore: ")
    assert fragment in e.value.cause and "endpoint_url" not in e.value.cause
    assert name in e.value.hint
