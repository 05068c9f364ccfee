"""The configuration cascade (paddlecd.config): order, errors with a "did you mean", the runtime
switches and their short aliases, warnings (not errors) for unknown PADDLECD_* variables."""

from __future__ import annotations

import json
import re

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError

from support import clean_env, invoke


def test_config_cascade_order(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text(
        "registry: {url: file.example:1, repository: team/paddle}\nstate_dir: /s1\n"
    )
    s = config.load({"registry.url": "flag.example:3"}, root=tmp_path,
                    environ={"PADDLECD_REGISTRY_URL": "env.example:2", "PADDLECD_STATE_DIR": "/s2"})
    assert s.registry.url == "flag.example:3"           # flags beat environment
    assert s.state_dir == "/s2"                          # environment beats the project file
    assert s.registry.repository == "team/paddle"        # project file beats defaults
    assert s.candidate_repo == "flag.example:3/team/paddle"


@pytest.mark.parametrize("yaml_text,environ,fragment", [
    ("registry: {urll: x}", {}, "did you mean 'registry.url'"),
    ("", {"PADDLECD_REGISTRY_INSECURE": "maybe"}, "is not true or false"),
    ("", {"PADDLECD_VERIFY_CPU_RANKS": "two"}, "is not a whole number"),
    ("", {"PADDLECD_VERIFY_TIMEOUT": "-5"}, "must be greater than 0"),
    ("registry: [1]", {}, "must be a mapping"),
    ("registry: {url: [unclosed", {}, "not valid YAML"),
    # empty is not a value (a trial: an empty variable fell back to the default)
    ("", {"PADDLECD_STATE_DIR": ""}, "setting 'state_dir' (PADDLECD_STATE_DIR) is empty"),
    ("", {"PADDLECD_VERIFY_SIGNING_KEY": "  "}, "setting 'verify.signing_key' "
                                                "(PADDLECD_VERIFY_SIGNING_KEY) is empty"),
    ("", {"PADDLECD_REGISTRY_PUSH_RETRIES": ""}, "(PADDLECD_REGISTRY_PUSH_RETRIES) is empty"),
    ("storage: {url: ''}", {}, "setting 'storage.url' ({file}: storage.url) is empty"),
    # values are typed where they are read
    ("state_dir: [1, 2]", {}, "setting 'state_dir' ({file}: state_dir) must be a single value, "
                              "got a list"),
    ("registry: {push_retries: 1.5}", {}, "push_retries): 1.5 is not a whole number"),
    ("verify: {cpu_ranks: true}", {}, "({file}: verify.cpu_ranks): true is not a whole number"),
    # a trial: 100000 ranks were accepted, the convergence checks skipped, the run "passed"
    ("", {"PADDLECD_VERIFY_CPU_RANKS": "100000"}, "'verify.cpu_ranks' (PADDLECD_VERIFY_CPU_RANKS) "
                                                "must be 1..64"),
    # a trial: these reached docker (exit 4, "start the engine") or the manifests
    ("", {"PADDLECD_VERIFY_SHM_SIZE": "lots"}, "'verify.shm_size' (PADDLECD_VERIFY_SHM_SIZE) is "
                                               "'lots': not a Docker size"),
    # trial 7: Docker took 0 as "its default" size (64 MiB), silently
    ("", {"PADDLECD_VERIFY_SHM_SIZE": "0"}, "is '0': not a Docker size above 0"),
    ("", {"PADDLECD_VERIFY_GPU_SHM_SIZE": "000g"}, "is '000g': not a Docker size above 0"),
    ("", {"PADDLECD_CLUSTER_NAMESPACE": "Bad_NS"}, "not a namespace name (RFC 1123 label"),
    ("", {"PADDLECD_CLUSTER_NAMESPACE": "n" * 64}, "not a namespace name"),
    ("", {"PADDLECD_CLUSTER_IMAGE_PULL_SECRET": "a b"}, "not a Secret name"),
    # a trial: checked only when an S3 client was made; ftp:// reached botocore (exit 8)
    ("storage: {checksum_mode: Always}", {}, "not when_required or when_supported"),
    ("", {"PADDLECD_STORAGE_ENDPOINT_URL": "ftp://127.0.0.1:1/"}, "not an http(s) URL"),
    # trial 11: a query and port 99999 reached botocore ("not a valid URI", exit 8)
    ("", {"PADDLECD_STORAGE_ENDPOINT_URL": "http://127.0.0.1:56295?x=1"}, "not an http(s) URL"),
    ("", {"PADDLECD_STORAGE_ENDPOINT_URL": "http://127.0.0.1:99999"}, "a port 1..65535"),
    # trial 13: planned for debootstrap and pip as options
    ("", {"PADDLECD_BUILD_DEBIAN_MIRROR": "--include=evil"},
     "'build.debian_mirror' (PADDLECD_BUILD_DEBIAN_MIRROR) is '--include=evil': not an http(s)"),
    ("", {"PADDLECD_BUILD_DEBIAN_MIRROR": "ftp://x y"}, "is 'ftp://x y': not an http(s) or file:"),
    ("", {"PADDLECD_BUILD_PIP_INDEX_URL": "--trusted-host=evil"},
     "'build.pip_index_url' (PADDLECD_BUILD_PIP_INDEX_URL) is not an http(s) or file: URL"),
    ("", {"PADDLECD_STORAGE_ADDRESSING_STYLE": "sideways"},
     "'sideways': not path, virtual or auto"),
    # a re-trial: Python's int()/float() took these, and nan disabled the upgrade gate
    ("", {"PADDLECD_RELEASE_MAX_SLOWDOWN": "nan"}, "'nan' is not a number"),
    ("", {"PADDLECD_VERIFY_BUSBW_FRACTION": "inf"}, "'inf' is not a number"),
    ("release: {max_slowdown: .inf}", {}, "inf is not a number"),
    ("", {"PADDLECD_VERIFY_TIMEOUT": "1_0"}, "'1_0' is not a whole number"),
    ("", {"PADDLECD_VERIFY_TIMEOUT": "1.5"}, "'1.5' is not a whole number"),  # trial 17
    ("", {"PADDLECD_RETENTION_KEEP_DAYS": " 5 "}, "' 5 ' is not a whole number"),
    ("", {"PADDLECD_VERIFY_CPU_RANKS": "\uff12"}, "is not a whole number"),
    ("", {"PADDLECD_VERIFY_BUSBW_FRACTION": "5"}, "'verify.busbw_fraction' "
                                                  "(PADDLECD_VERIFY_BUSBW_FRACTION) must be 0..1"),
    # trial 9: bounded only by "> 0", 99999999999 ended in an OverflowError traceback
    ("", {"PADDLECD_VERIFY_TIMEOUT": "99999999999"}, "'verify.timeout' (PADDLECD_VERIFY_TIMEOUT) "
                                                     "must be 1..604800, got 99999999999"),
    ("", {"PADDLECD_VERIFY_RENDEZVOUS_TIMEOUT": "9300000000"}, "must be 1..86400"),
    # trial 9: a rule no run can satisfy, whose hint was a command verify refuses
    ("release: {require_nodes: 100000}", {}, "'release.require_nodes' ({file}: "
                                             "release.require_nodes) must be 1..512"),
    ("", {"PADDLECD_STORAGE_MULTIPART_CHUNK_MB": "999999"}, "must be 5..5120"),
    # trial 15: 4 passed loading; upload refused it naming no file
    ("storage: {multipart_chunk_mb: 4}\n", {},
     "paddlecd.yaml: storage.multipart_chunk_mb) must be 5..5120"),
    ("", {"PADDLECD_REGISTRY_PUSH_RETRIES": "1000000000000"}, "must be 1..100"),
    # trial 10: Docker's int64 ShmSize overflowed ("cannot unmarshal number")
    ("", {"PADDLECD_VERIFY_SHM_SIZE": "99999999999g"}, "not a Docker size above 0 of at most 6"),
    # trial 10: a 300-character label ended in urllib3's LocationParseError traceback
    ("", {"PADDLECD_REGISTRY_URL": "a" * 300 + ":5597"}, "not host[:port]"),
])
def test_config_errors(tmp_path, yaml_text, environ, fragment):
    (tmp_path / "paddlecd.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ=environ)
    assert fragment.format(file=tmp_path / "paddlecd.yaml") in e.value.cause + (e.value.hint or "")


@pytest.mark.parametrize("environ, cause", [
    ({"PADDLECD_LOG_FORMAT": ""}, "setting 'runtime.log_format' (PADDLECD_LOG_FORMAT) is empty"),
    ({"PADDLECD_DEBUG": "no?"},
     "setting 'runtime.debug' (PADDLECD_DEBUG): 'no?' is not true or false"),
    ({"PADDLECD_RUNTIME_DEBUG": "no?"},
     "setting 'runtime.debug' (PADDLECD_RUNTIME_DEBUG): 'no?' is not true or false"),
])
def test_a_bad_value_names_the_variable_the_user_set(tmp_path, environ, cause):
    """A trial (issue 21): an empty ``PADDLECD_LOG_FORMAT`` was reported as
    ``PADDLECD_RUNTIME_LOG_FORMAT``, a variable the user never set; a bad bool said "fix the
    value" and named no variable."""
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ=environ)
    assert e.value.cause == cause
    assert "fix the value" not in e.value.hint


@pytest.mark.parametrize("environ", [
    {"PADDLECD_REGISTRY_URL": "http://u:pw123@127.0.0.1:1"},
    {"PADDLECD_REGISTRY_URL": "u:pw123@127.0.0.1:1"},
    {"PADDLECD_STORAGE_ENDPOINT_URL": "http://user:pw123@127.0.0.1:1"},
    {"PADDLECD_STORAGE_URL": "s3://user:pw123@bucket/models"},
])
def test_credentials_in_a_url_are_refused_and_never_printed(tmp_path, environ):
    """A trial (issue 21): a password in registry.url or storage.endpoint_url was printed back by
    push's and doctor's errors."""
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ=environ)
    assert "holds a user or password" in e.value.cause and "***@" in e.value.cause
    assert "pw123" not in e.value.cause + e.value.hint


def test_a_state_dir_that_is_a_file_is_refused_by_name(tmp_path):
    """A trial (issue 21): ``PADDLECD_STATE_DIR=<a file>`` ended in "Not a directory: …/keys"."""
    (tmp_path / "state").write_text("x")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_STATE_DIR": str(tmp_path / "state")})
    assert e.value.cause == f"state_dir {tmp_path / 'state'} is a file, not a folder"
    assert (tmp_path / "state").read_text() == "x"


@pytest.mark.parametrize(("value", "why"), [
    ("/usr/local/t4a-state", "is inside the system folder /usr"), ("/", "is the root folder"),
    ("/root", "is a home folder as a whole (users' keys and credentials)"),
    # trial 15: release.list took these
    ("/root/.ssh", "is inside the credential folder /root/.ssh"),
    ("/var/lib", "is a folder of system state as a whole (other programs' files)"),
])
def test_a_state_dir_in_a_system_folder_is_refused_by_the_setting_s_name(tmp_path, value, why):
    """A trial: ``PADDLECD_STATE_DIR=/usr/local/x`` was refused by keygen as "--out …/keys" and
    by upload as a "store URL" nobody gave; release.list took it."""
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_STATE_DIR": value})
    assert e.value.cause == f"state_dir {value} (PADDLECD_STATE_DIR) {why}"
    (tmp_path / "paddlecd.yaml").write_text(f"state_dir: {value}\n")
    with pytest.raises(ConfigError, match=re.escape(f"paddlecd.yaml: state_dir) {why}")):
        config.load(root=tmp_path, environ={})


def test_config_secrets_are_not_settings(tmp_path):
    s = config.load(
        root=tmp_path,
        environ={"PADDLECD_REGISTRY_PASSWORD": "hunter2", "PADDLECD_REGISTRY_USERNAME": "u"},
    )
    assert "hunter2" not in repr(s)
    assert s.warnings == ()  # read by registry.auth: known, so no warning either


@pytest.mark.parametrize("url", ["http://127.0.0.1:5000", "registry.example/team"])
def test_registry_url_is_host_and_port_only(tmp_path, url):
    with pytest.raises(ConfigError) as e:
        config.load({"registry.url": url}, root=tmp_path, environ={})
    assert "give host[:port] only" in e.value.cause


@pytest.mark.parametrize("url", ["127.0.0.1 :5397", " 127.0.0.1:5397", "127.0.0.1:5397:5397",
                                 "127.0.0.1?x=1", "127.0.0.1#frag:5397", "reg_x.example",
                                 "127.0.0.1:5000 ", "127.0.0.1:6279 x", "127.0.0.1:\t5000"])
def test_registry_url_is_a_host_name(tmp_path, url):
    """Trial 9: white space reached urllib3 ("Failed to parse", hint "check the path"), and
    '127.0.0.1?x=1' was asked on port 80 and reported as a registry that is down. Trial 17: a
    space after the port was "the port is not 1..65535"."""
    with pytest.raises(ConfigError, match="not host\\[:port\\]|has white space around it") as e:
        config.load({"registry.url": url}, root=tmp_path, environ={})
    assert e.value.cause.startswith("setting 'registry.url'")


@pytest.mark.parametrize("url", ["127.0.0.1:99999", "reg.example:0", "reg.example:http",
                                 "127.0.0.1:+5397"])
def test_registry_port_is_a_port(tmp_path, url):
    """A re-trial: 127.0.0.1:99999 reached urllib3 ("Failed to parse", hint "check the path")."""
    with pytest.raises(ConfigError, match="the port is not 1..65535"):
        config.load({"registry.url": url}, root=tmp_path, environ={})
    assert config.load({"registry.url": "[::1]:5000"}, root=tmp_path, environ={})


def test_misspelt_section_in_project_file_suggests_the_section(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("regsitry: {url: x}\n")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.hint == "did you mean 'registry'?"


def test_container_side_variables_are_not_mistaken_for_settings(tmp_path):
    s = config.load(
        root=tmp_path, environ={"PADDLECD_MODEL": "/output/model", "PADDLECD_UPDATE_GOLDEN": "1"}
    )
    assert s.registry.url == "127.0.0.1:5000"
    assert s.warnings == ("ignoring PADDLECD_MODEL: not a setting",)


# ------------------------------------------------------------------ runtime switches
def test_runtime_defaults(tmp_path):
    assert config.load(root=tmp_path, environ={}).runtime == config.RuntimeSettings(
        debug=False, keep=False, log_format="text")


def test_runtime_from_the_project_file(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("runtime: {debug: true, keep: yes, log_format: json}\n")
    s = config.load(root=tmp_path, environ={})
    assert (s.runtime.debug, s.runtime.keep, s.runtime.log_format) == (True, True, "json")


@pytest.mark.parametrize("environ", [
    {"PADDLECD_RUNTIME_DEBUG": "1", "PADDLECD_RUNTIME_KEEP": "true",
     "PADDLECD_RUNTIME_LOG_FORMAT": "json"},
    {"PADDLECD_DEBUG": "1", "PADDLECD_KEEP": "true", "PADDLECD_LOG_FORMAT": "JSON"},  # README
])
def test_runtime_from_the_environment_by_full_name_or_short_alias(tmp_path, environ):
    s = config.load(root=tmp_path, environ=environ)
    assert (s.runtime.debug, s.runtime.keep, s.runtime.log_format) == (True, True, "json")
    assert s.warnings == ()


def test_the_full_name_beats_its_alias_and_flags_beat_both(tmp_path):
    environ = {"PADDLECD_KEEP": "1", "PADDLECD_RUNTIME_KEEP": "0",
               "PADDLECD_LOG_FORMAT": "json", "PADDLECD_RUNTIME_LOG_FORMAT": "json"}
    s = config.load({"runtime.log_format": "text"}, root=tmp_path, environ=environ)
    assert s.runtime.keep is False and s.runtime.log_format == "text"
    # trial 4: the alias that lost was dropped unsaid; it is said when the two disagree
    assert s.warnings == ("ignoring PADDLECD_KEEP='1': PADDLECD_RUNTIME_KEEP='0' is set too and "
                          "wins",)


def test_a_bad_log_format_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_LOG_FORMAT": "xml"})
    assert e.value.cause == ("setting 'runtime.log_format' (PADDLECD_LOG_FORMAT) must be text or "
                             "json, got 'xml'")


def test_an_unknown_runtime_key_in_the_project_file_stays_an_error(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("runtime: {debugg: true}\n")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.hint == "did you mean 'runtime.debug'?"


def test_an_unknown_flag_stays_an_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        config.load({"registry.urll": "x"}, root=tmp_path, environ={})
    assert e.value.cause == "flags: unknown setting 'registry.urll'"


# ------------------------------------------------------------------ unknown PADDLECD_* variables
@pytest.mark.parametrize("name,warning", [
    ("PADDLECD_TOKEN", "ignoring PADDLECD_TOKEN: not a setting"),
    ("PADDLECD_REGISTRY_URLL",
     "ignoring PADDLECD_REGISTRY_URLL: not a setting (did you mean PADDLECD_REGISTRY_URL?)"),
    ("PADDLECD_REGSITRY_URL",
     "ignoring PADDLECD_REGSITRY_URL: not a setting (did you mean PADDLECD_REGISTRY_URL?)"),
    ("PADDLECD_STATE_DRI",
     "ignoring PADDLECD_STATE_DRI: not a setting (did you mean PADDLECD_STATE_DIR?)"),
    ("PADDLECD_DEBG", "ignoring PADDLECD_DEBG: not a setting (did you mean PADDLECD_DEBUG?)"),
])
def test_an_unknown_variable_is_a_warning_not_an_error(tmp_path, name, warning):
    s = config.load(root=tmp_path, environ={name: "127.0.0.1:1", "PADDLECD_VERIFY_TIMEOUT": "7"})
    assert s.warnings == (warning,)
    assert s.registry.url == "127.0.0.1:5000" and s.verify.timeout == 7  # ignored, the rest applies


def test_the_cli_prints_the_warning_and_runs(tmp_path):
    """issue 9: `PADDLECD_TOKEN=x invoke doctor` stopped with "unknown setting 'token'"."""
    env = clean_env(PADDLECD_TOKEN="x", PADDLECD_STATE_DIR=str(tmp_path))
    run = invoke("pipeline.list", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "warning: ignoring PADDLECD_TOKEN: not a setting\n"
    assert run.stdout.startswith("nightly ")


# ------------------------------------------------------------------ debug_requested
@pytest.mark.parametrize("environ,yaml_text,expected", [
    ({}, None, False),
    ({"PADDLECD_DEBUG": "1"}, None, True),
    ({"PADDLECD_DEBUG": "0"}, None, False),
    ({"PADDLECD_DEBUG": "1", "PADDLECD_RUNTIME_DEBUG": "off"}, None, False),  # full name wins
    ({}, "runtime: {debug: true}\n", True),
    ({"PADDLECD_DEBUG": "1"}, "registry: {url: [unclosed\n", True),  # load() would fail here
    ({}, "registry: {url: [unclosed\n", False),  # unreadable project file: off, no exception
    ({}, "- a list\n", False),
])
def test_debug_requested_needs_no_valid_configuration(tmp_path, environ, yaml_text, expected):
    if yaml_text is not None:
        (tmp_path / "paddlecd.yaml").write_text(yaml_text)
    assert config.debug_requested(environ, root=tmp_path) is expected


def test_null_still_means_none_for_an_optional_setting(tmp_path):
    (tmp_path / "paddlecd.yaml").write_text("storage: {url: null}\nbuild: {ca_bundle: none}\n")
    s = config.load(root=tmp_path, environ={"PADDLECD_VERIFY_SIGNING_KEY": "null"})
    assert (s.storage.url, s.build.ca_bundle, s.verify.signing_key) == (None, None, None)


@pytest.mark.parametrize("yaml_text, cause, hint", [
    ("registry: {push_retries: abc}",
     "setting 'registry.push_retries' ({file}: registry.push_retries): 'abc' is not a whole number",
     "give a whole number, e.g. 'registry: {{push_retries: 3}}' in {file}"),
    ("verify: {shm_size: lots}",
     "setting 'verify.shm_size' ({file}: verify.shm_size) is 'lots': not a Docker size",
     "fix {file}: verify.shm_size"),
    ("runtime: {log_format: xml}",
     "setting 'runtime.log_format' ({file}: runtime.log_format) must be text or json",
     "e.g. 'runtime: {{log_format: json}}' in {file}"),
    ("state_dir: ''", "setting 'state_dir' ({file}: state_dir) is empty", "give a value"),
    # trial 4: release.list and doctor took `kind: K8S`, deploy blamed a --cluster nobody gave
    ("cluster: {kind: K8S}", "setting 'cluster.kind' ({file}: cluster.kind) is 'K8S': not local "
     "or k8s", "fix {file}: cluster.kind"),
    # trial 4: botocore's refusal blamed AWS_CA_BUNDLE, which was fine
    ("storage: {region: 'us east 1!'}", "setting 'storage.region' ({file}: storage.region) is "
     "'us east 1!': not an AWS region name", "fix {file}: storage.region"),
])
def test_a_bad_value_of_the_project_file_names_the_file_and_key(tmp_path, yaml_text, cause,
                                                                 hint):
    """A trial (issue 21): a bad value written in paddlecd.yaml was reported under the
    PADDLECD_* variable of its key, which the user never set. Each value carries its origin;
    the variable set for another key changes nothing (it was module state, the last load's)."""
    (tmp_path / "paddlecd.yaml").write_text(yaml_text)
    config.load(root=tmp_path / "other", environ={"PADDLECD_LOG_FORMAT": "json"})
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    file = tmp_path / "paddlecd.yaml"
    assert e.value.cause.startswith(cause.format(file=file)), e.value.cause
    assert e.value.hint.startswith(hint.format(file=file)), e.value.hint
    assert "PADDLECD_" not in e.value.cause + e.value.hint


def test_a_list_at_the_top_level_hints_at_a_doc_that_exists(tmp_path):
    """The hint pointed at "README 'Configuration'", a section the README does not have."""
    (tmp_path / "paddlecd.yaml").write_text("- a\n")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert "top level" in e.value.cause
    assert "docs/configuration.md" in e.value.hint


def test_the_configuration_page_shows_every_setting():
    """Trial 7: the did-you-mean suggested ``release.insecure``, which docs/configuration.md's
    settings block did not show (nor ``release.ca_file``)."""
    import yaml

    from support import ROOT

    text = (ROOT / "docs" / "configuration.md").read_text()
    block = text.split("```yaml\n# paddlecd.yaml\n", 1)[1].split("```", 1)[0]
    shown = {f"{section}.{key}" if isinstance(body, dict) else section
             for section, body in yaml.safe_load(block).items()
             for key in (body if isinstance(body, dict) else [None])}
    missing = sorted(k for k in config._all_keys() if k not in shown)
    assert missing == [], missing


def test_a_ca_file_for_a_plain_http_registry_is_warned(tmp_path):
    """Trial 9: PADDLECD_REGISTRY_CA_FILE with insecure=true (plain HTTP) was ignored unsaid."""
    s = config.load({"registry.ca_file": "/nosuch/ca.pem", "registry.insecure": True},
                    root=tmp_path, environ={})
    assert s.warnings == ("registry.ca_file is set but registry.insecure is true (plain HTTP): "
                          "the CA file is not used",)
    assert config.load({"registry.ca_file": "/x.pem"}, root=tmp_path, environ={}).warnings == ()


def test_a_pip_index_url_with_a_token_is_taken_and_a_bad_one_is_never_quoted(tmp_path):
    """The pip index URL is a build secret (it may carry a token): a good one with userinfo
    loads; a bad one is refused without its value."""
    good = "https://ci:tok-pw123@pypi.internal.example/simple"
    assert config.load(root=tmp_path, environ={"PADDLECD_BUILD_PIP_INDEX_URL": good}
                       ).build.pip_index_url == good
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_BUILD_PIP_INDEX_URL": "ci:tok-pw123@x"})
    assert "pw123" not in e.value.cause + e.value.hint


@pytest.mark.parametrize("key", ["lock_file", "variants_file"])
def test_a_lock_or_variants_file_that_is_a_folder_or_pipe_is_refused_by_the_setting(tmp_path,
                                                                                     key):
    """Trial 15: PADDLECD_LOCK_FILE=<a folder> (or a FIFO) was "not a regular file (a lock
    file)", hint "delete it and run: invoke lock", exit 3: the user's folder, not a lock."""
    import os

    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    env = f"PADDLECD_{key.upper()}"
    for name, kind in (("folder", "a folder"), ("pipe", "a named pipe")):
        with pytest.raises(ConfigError) as e:
            config.load(root=tmp_path, environ={env: str(tmp_path / name)})
        assert e.value.cause == f"{key} {tmp_path / name} ({env}) is {kind}, not a file"
        assert e.value.hint.startswith(f"point {key} at the file itself")
    assert (tmp_path / "folder").is_dir() and not any((tmp_path / "folder").iterdir())
    # trial 20: the default path a folder was told to "point variants_file at the file itself
    # (default images/variants.yaml)", which it was
    default = {"lock_file": "images/lock.yaml", "variants_file": "images/variants.yaml"}[key]
    (tmp_path / default).mkdir(parents=True)
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.cause == f"{key} {tmp_path / default} (the default) is a folder, not a file"
    assert e.value.hint == (f"make {default} the file again (git checkout {default}, or remove "
                            f"what is there), or point {key} at another file")


@pytest.mark.parametrize(("value", "why"), [
    ("bundle,,att", "an empty item"), ("att,", "an empty item"), (",", "no layout"),
    ("bundle,cosign", "unknown cosign")])
def test_attestation_layouts_refuse_empty_items_as_trusted_keys_do(tmp_path, value, why):
    """Trial 16: "bundle,,att" and "att," dropped the empty item without a word."""
    with pytest.raises(ConfigError) as e:  # where settings are read, before any verify runs
        config.load(root=tmp_path, environ={"PADDLECD_VERIFY_ATTESTATION_LAYOUTS": value})
    assert e.value.cause.endswith(why)
    ok = config.load(root=tmp_path, environ={"PADDLECD_VERIFY_ATTESTATION_LAYOUTS": " att "})
    assert config.attestation_layouts(ok) == ("att",)


def test_a_number_of_thousands_of_digits_is_named_by_its_length(tmp_path):
    """Trial 16: 5,000 nines in PADDLECD_STORAGE_MAX_CONCURRENCY were "not an integer" (Python
    reads at most 4,300 digits), while 100 nines were "must be 1..64"."""
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_STORAGE_MAX_CONCURRENCY": "9" * 5000})
    assert "is a number of 5000 digits, far past any bound" in e.value.cause
    assert len(e.value.cause) < 300


def test_a_huge_setting_is_quoted_by_its_head_and_length(tmp_path):
    """A 1 MB namespace was echoed whole in its error (issue 21, class 3): a setting's error quotes
    at most 80 characters of it and says how long it is, as a repository name's does."""
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_CLUSTER_NAMESPACE": "a" * 1_000_000})
    assert "(1000000 characters)" in e.value.cause and len(e.value.cause) < 300, e.value.cause[:400]


@pytest.mark.parametrize(("text", "cause"), [
    # trial 21: Python's "dict", "True", and a number taken as a path ("variants file not
    # found: <root>/5", the setting unnamed)
    ("release: {models: {a: 1}}", "setting 'release.models' ({file}: release.models) must be a "
                                  "single value, got a mapping"),
    ("verify: {timeout: true}", "setting 'verify.timeout' ({file}: verify.timeout): true is not "
                                "a whole number"),
    ("variants_file: 5", "setting 'variants_file' ({file}: variants_file) is 5, not text"),
    ("registry: {insecure: 2}", "setting 'registry.insecure' ({file}: registry.insecure): 2 is "
                                "not true or false"),
])
def test_a_value_of_the_wrong_kind_is_named_in_the_files_words(tmp_path, text, cause):
    (tmp_path / "paddlecd.yaml").write_text(text + "\n")
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={})
    assert e.value.cause == cause.format(file=tmp_path / "paddlecd.yaml")


@pytest.mark.parametrize("value", ["file:///tmp/store2 ", " file:///tmp/store", "\tcpu"])
def test_a_text_setting_with_white_space_around_it_is_refused(tmp_path, value):
    """Trial 20: PADDLECD_STORAGE_URL='file:///tmp/t20c/store2 ' uploaded into a folder named
    'store2 ', where --to with the same value was refused."""
    with pytest.raises(ConfigError) as e:
        config.load(root=tmp_path, environ={"PADDLECD_STORAGE_URL": value})
    assert e.value.cause == (f"setting 'storage.url' (PADDLECD_STORAGE_URL) {value!r} has white "
                             "space around it")
    (tmp_path / "paddlecd.yaml").write_text(f"storage: {{url: {json.dumps(value)}}}\n")
    with pytest.raises(ConfigError, match="has white space around it"):
        config.load(root=tmp_path, environ={})
