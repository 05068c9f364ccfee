"""The configuration cascade (paddlecd.config): order, errors with a "did you mean"."""

from __future__ import annotations

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError


def test_config_cascade_order(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("registry: {url: file.example:1, repository: team/paddle}\nstate_dir: /s1\n")
    s = config.load({"registry.url": "flag.example:3"}, root=tmp_path,
                    environ={"PADDLECD_REGISTRY_URL": "env.example:2", "PADDLECD_STATE_DIR": "/s2"})
    assert s.registry.url == "flag.example:3"           # flags beat environment
    assert s.state_dir == "/s2"                          # environment beats the project file
    assert s.registry.repository == "team/paddle"        # project file beats defaults
    assert s.candidate_repo == "flag.example:3/team/paddle"


@pytest.mark.parametrize("yaml_text,environ,fragment", [
    ("registry: {urll: x}", {}, "did you mean 'registry.url'"),
    ("", {"PADDLECD_REGISTRY_INSECURE": "maybe"}, "is not a bool"),
    ("", {"PADDLECD_VERIFY_CPU_RANKS": "two"}, "is not an integer"),
    ("", {"PADDLECD_VERIFY_TIMEOUT": "-5"}, "must be greater than 0"),
    ("registry: [1]", {}, "must be a mapping"),
    ("registry: {url: [unclosed", {}, "not valid YAML"),
])
def test_config_errors(tmp_path, yaml_text, environ, fragment):
    (tmp_path / "paddlecd.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ=environ)
    assert fragment in e.value.cause + (e.value.hint or "")


def test_config_secrets_are_not_settings(tmp_path):
    s = config.load(root=tmp_path, environ={"PADDLECD_REGISTRY_PASSWORD": "hunter2", "PADDLECD_REGISTRY_USERNAME": "u"})
    assert "hunter2" not in repr(s)


@pytest.mark.parametrize("url", ["http://127.0.0.1:5000", "registry.example/team"])
def test_registry_url_is_host_and_port_only(tmp_path, url):
    with pytest.raises(ConfigError) as e:
        config.load({"registry.url": url}, root=tmp_path, environ={})
    assert "give host[:port] only" in e.value.cause


def test_misspelt_section_in_project_file_suggests_the_section(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("regsitry: {url: x}\n")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.hint == "did you mean 'registry'?"


def test_container_side_variables_are_not_mistaken_for_settings(tmp_path):
    s = config.load(root=tmp_path, environ={"PADDLECD_MODEL": "/output/model", "PADDLECD_UPDATE_GOLDEN": "1"})
    assert s.registry.url == "127.0.0.1:5000"
