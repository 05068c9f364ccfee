"""Docker credentials read as the Docker CLI reads them, with real helper executables.

Each test writes a ``docker-credential-<name>`` shell script onto PATH (the helper protocol:
``get`` with the server on stdin, JSON ``{"Username", "Secret"}`` on stdout, "credentials not found
in native keychain" on stdout with a non-zero exit when it has none) and a config.json, then asks
paddlecd which credentials it would send.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from paddlecd.errors import ConfigError, RegistryAuthError
from paddlecd.registry.auth import Credentials, find_credentials
from paddlecd.registry.client import RegistryClient

STALE = base64.b64encode(b"old-user:old-pass").decode()


@pytest.fixture
def docker_home(tmp_path, monkeypatch):
    """DOCKER_CONFIG and a bin folder first on PATH; no PADDLECD_REGISTRY_* credentials."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.delenv("PADDLECD_REGISTRY_USERNAME", raising=False)
    monkeypatch.delenv("PADDLECD_REGISTRY_PASSWORD", raising=False)
    return tmp_path


def config(home: Path, cfg: dict) -> None:
    (home / "config.json").write_text(json.dumps(cfg))


def helper(home: Path, name: str, body: str) -> Path:
    """A helper script; ``$server`` is what it was asked about; calls are logged to calls-<name>."""
    path = home / "bin" / f"docker-credential-{name}"
    path.write_text(f'#!/bin/sh\nread server\necho "$1 $server" >> "{home}/calls-{name}"\n{body}\n')
    path.chmod(0o755)
    return path


def answers(user: str, secret: str = "s3cret") -> str:
    return f"echo '{{\"ServerURL\":\"'$server'\",\"Username\":\"{user}\",\"Secret\":\"{secret}\"}}'"


NONE = 'echo "credentials not found in native keychain"; exit 1'


def test_credentials_store_is_used(docker_home):
    helper(docker_home, "store", answers("from-store"))
    config(docker_home, {"credsStore": "store"})
    creds = find_credentials("reg.example:5000")
    assert creds == Credentials("from-store", "s3cret")
    assert creds.source == "docker-credential-store"
    assert (docker_home / "calls-store").read_text() == "get reg.example:5000\n"


def test_store_beats_a_stale_auths_entry_as_docker_push_does(docker_home):
    helper(docker_home, "store", answers("from-store"))
    config(docker_home, {"credsStore": "store", "auths": {"reg.example": {"auth": STALE}}})
    assert find_credentials("reg.example") == Credentials("from-store", "s3cret")


def test_auths_entry_is_used_when_the_store_has_none(docker_home):
    helper(docker_home, "store", NONE)
    auths = {"https://reg.example/v1/": {"auth": STALE}}
    config(docker_home, {"credsStore": "store", "auths": auths})
    assert find_credentials("reg.example") == Credentials("old-user", "old-pass")
    assert find_credentials("other.example") is None


def test_per_host_helper_beats_the_store(docker_home):
    helper(docker_home, "store", answers("from-store"))
    helper(docker_home, "ecr", answers("AWS"))
    config(docker_home, {"credsStore": "store", "credHelpers": {"reg.example": "ecr"}})
    assert find_credentials("reg.example") == Credentials("AWS", "s3cret")
    assert find_credentials("other.example") == Credentials("from-store", "s3cret")


def test_docker_hub_is_asked_under_its_index_url(docker_home):
    helper(docker_home, "store", answers("hubber"))
    config(docker_home, {"credsStore": "store"})
    assert find_credentials("docker.io") == Credentials("hubber", "s3cret")
    assert (docker_home / "calls-store").read_text() == "get https://index.docker.io/v1/\n"


def test_identity_token_from_a_store(docker_home):
    helper(docker_home, "store", answers("<token>", "refresh-tok"))
    config(docker_home, {"credsStore": "store"})
    creds = find_credentials("reg.example")
    assert creds is not None and creds.identity_token and creds.password == "refresh-tok"


def test_warnings_on_stderr_do_not_make_us_anonymous(docker_home):
    helper(docker_home, "noisy", "echo 'WARNING: keyring is slow' >&2\n" + answers("noisy-user"))
    config(docker_home, {"credsStore": "noisy"})
    assert find_credentials("reg.example") == Credentials("noisy-user", "s3cret")


def test_a_failing_helper_is_a_clear_error_naming_it(docker_home):
    helper(docker_home, "locked", 'echo "error: the keychain is locked"; exit 3')
    config(docker_home, {"credHelpers": {"reg.example": "locked"}})
    with pytest.raises(RegistryAuthError) as info:
        find_credentials("reg.example")
    cause = info.value.cause
    assert "docker-credential-locked" in cause and "exited 3" in cause
    assert "its output withheld" in cause  # its words may hold a secret (trial 16)
    assert "docker-credential-locked get" in info.value.hint


def test_a_helper_that_answers_garbage_or_is_missing_is_named(docker_home):
    helper(docker_home, "garbage", "echo 'not json at all'")
    config(docker_home, {"credsStore": "garbage"})
    with pytest.raises(RegistryAuthError, match="docker-credential-garbage .*helper protocol"):
        find_credentials("reg.example")
    config(docker_home, {"credsStore": "desktop"})
    with pytest.raises(RegistryAuthError, match="docker-credential-desktop .*not on PATH"):
        find_credentials("reg.example")


def test_env_credentials_win_and_the_helper_is_not_run(docker_home, monkeypatch):
    helper(docker_home, "store", answers("from-store"))
    config(docker_home, {"credsStore": "store"})
    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "bot")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "pw")
    assert find_credentials("reg.example") == Credentials("bot", "pw")
    assert not (docker_home / "calls-store").exists()


def test_no_helper_runs_until_the_registry_asks_for_credentials(docker_home):
    """A registry that never answers 401 is read without running (or failing on) any helper."""
    import http.server
    import threading

    class Open(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b'{"name": "ci/p", "tags": ["a"]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    helper(docker_home, "locked", "exit 3")
    config(docker_home, {"credsStore": "locked"})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Open)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        c = RegistryClient(f"127.0.0.1:{httpd.server_address[1]}", insecure=True)
        assert c.list_tags("ci/p") == ["a"]
    finally:
        httpd.shutdown()
    assert not (docker_home / "calls-locked").exists()


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "not JSON: expecting property name enclosed in double quotes at line 1"),
        ("<html>", "not JSON (it starts with '<')"),
        (json.dumps({"auths": {"reg.example:5000": {"auth": "%%%not-base64"}}}),
         "an 'auths' entry is not base64 of user:password"),
        # a re-trial: these ended in AttributeError/TypeError tracebacks from docker-py
        (json.dumps({"auths": ["x"]}), "'auths' is not an object"),
        (json.dumps({"auths": {"reg.example:5000": {"auth": 12}}}),
         "auths['reg.example:5000'].auth is not a string"),
        (json.dumps({"auths": {"reg.example:5000": "x"}}),
         "auths['reg.example:5000'] is not an object whose auth is a string"),
        # trial 7: a good auth beside a number as identitytoken was called a bad auth
        (json.dumps({"auths": {"reg.example:5000": {"auth": "Ym9iOnM=", "identitytoken": 5}}}),
         "auths['reg.example:5000'].identitytoken is not a string"),
        (json.dumps({"credsStore": 5}), "'credsStore' is not a helper name"),
        (json.dumps([1]), "the top level is not a JSON object"),
        # trial 19: base64 of the password alone was "(not enough values to unpack (expected 2,
        # got 1))", the registry unnamed; the password itself is never printed
        (json.dumps({"auths": {"reg.example:5000": {"auth": "UzNjcjN0LXQxOWItUHch"}}}),
         "an 'auths' entry is not base64 of user:password: auths['reg.example:5000'].auth "
         "decodes to no user:password (no ':' in it)"),
        (json.dumps({"auths": {"reg.example:5000": {"auth": "%%%not-base64"}}}),
         "an 'auths' entry is not base64 of user:password: auths['reg.example:5000'].auth is "
         "not base64"),
    ],
)
def test_a_broken_config_json_is_named_not_ignored(docker_home, text, why):
    """A trial: a config.json that is not JSON was silently ignored (the push then failed as
    unauthorised), and an auths entry that is not base64 gave binascii.Error."""
    from paddlecd.errors import ConfigError

    (docker_home / "config.json").write_text(text)
    with pytest.raises(ConfigError) as e:
        find_credentials("reg.example:5000")
    assert e.value.cause.startswith(f"Docker config {docker_home / 'config.json'}: {why}")
    assert "docker login" in e.value.hint and "S3cr3t" not in e.value.cause


def test_a_dangling_config_json_link_is_named_not_read_as_absent(docker_home):
    """Trial 19: config.json linking to an unmounted CI secret was read as no config, and the
    registry's 401 said "run docker login"."""
    from paddlecd.errors import ConfigError

    (docker_home / "config.json").symlink_to("/nonexistent/t19b.json")
    with pytest.raises(ConfigError) as e:
        find_credentials("reg.example:5000")
    assert e.value.cause == (f"Docker config {docker_home / 'config.json'} is a symbolic link "
                             "(to /nonexistent/t19b.json), which does not exist")


def test_docker_config_naming_a_file_is_named_as_the_variable(docker_home, monkeypatch):
    """Trial 4: ``DOCKER_CONFIG=~/.docker/config.json`` said ".../config.json/config.json: Not a
    directory" and hinted to remove the (fine) file."""
    config(docker_home, {"auths": {}})
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_home / "config.json"))
    with pytest.raises(ConfigError) as e:
        find_credentials("reg.example:5000")
    assert e.value.cause == f"DOCKER_CONFIG {docker_home / 'config.json'} is a file, not a folder"
    assert f"holds config.json ({docker_home})" in e.value.hint
    assert json.loads((docker_home / "config.json").read_text()) == {"auths": {}}


def test_no_config_json_means_no_credentials(docker_home):
    assert find_credentials("reg.example:5000") is None


def test_the_engine_client_names_a_broken_config_json_before_docker_py_reads_it(docker_home):
    """A trial: push, doctor and verify ended in docker-py's binascii.Error traceback (its client
    reads config.json when it is made)."""
    from paddlecd import engine
    from paddlecd.errors import ConfigError

    config(docker_home, {"auths": {"reg.example:5000": {"auth": "bm9jb2xvbg=="}}})  # no colon
    engine.client.cache_clear()
    try:
        with pytest.raises(ConfigError, match="an 'auths' entry is not base64 of user:password"):
            engine.client()
    finally:
        engine.client.cache_clear()


def test_every_registry_client_names_a_broken_config_json_up_front(docker_home, tmp_path):
    """A trial: promote on a registry without auth went ahead with a config.json that
    is not JSON (it was read only on a 401), where push refused it."""
    from paddlecd import config as project_config
    from paddlecd.errors import ConfigError
    from paddlecd.registry.client import client_for

    (docker_home / "config.json").write_text("{not json")
    settings = project_config.load({"registry.url": "127.0.0.1:1"}, root=tmp_path, environ={})
    with pytest.raises(ConfigError, match="not JSON"):
        client_for(settings)


@pytest.mark.parametrize("key", ["credHelpers", "credsStore"])
def test_every_registry_client_names_a_helper_missing_from_path_up_front(docker_home, tmp_path,
                                                                         monkeypatch, key):
    """A third trial: with a helper not on PATH, verify failed (the engine runs the helper on
    every pull) while promote, release.list, evidence.show and deploy --dry-run went ahead on
    an open registry (the client runs it on a 401 only). The helper is not run here; the
    environment pair, used before any helper for the configured registry, skips the check."""
    from paddlecd import config as project_config
    from paddlecd.registry.client import client_for

    entry = {"127.0.0.1:1": "t3absent"} if key == "credHelpers" else "t3absent"
    (docker_home / "config.json").write_text(json.dumps({key: entry}))
    settings = project_config.load({"registry.url": "127.0.0.1:1"}, root=tmp_path, environ={})
    with pytest.raises(RegistryAuthError) as e:
        client_for(settings)
    assert e.value.cause == (f"credential helper docker-credential-t3absent (for 127.0.0.1:1, "
                             f"from {docker_home / 'config.json'}) is not on PATH")
    assert e.value.exit_code == 5
    monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "u")
    monkeypatch.setenv("PADDLECD_REGISTRY_PASSWORD", "p")
    client_for(settings)


def test_a_pull_names_a_missing_helper_as_the_registry_client_does(docker_home, tmp_path):
    """Trial 4: artifacts.check's pull said "Credentials store error: StoreError(…)" with the
    hint "start dockerd" (exit 4), where verify, promote and deploy named the helper (exit 5).
    Every pull takes engine_credentials, which now checks the helper first."""
    from paddlecd import config as settings_of
    from paddlecd.errors import RegistryAuthError
    from paddlecd.registry.auth import engine_credentials

    config(docker_home, {"credsStore": "nothere"})
    s = settings_of.load({"state_dir": str(tmp_path / "s")}, root=tmp_path, environ={})
    with pytest.raises(RegistryAuthError) as e:
        engine_credentials(s, "127.0.0.1:5084/paddlecd/paddle@sha256:" + "a" * 64)
    assert "docker-credential-nothere" in e.value.cause and "127.0.0.1:5084" in e.value.cause
    assert e.value.exit_code == 5


HANGS = 'echo $$ > "$(dirname "$0")/../hung.pid"; exec sleep 600'


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_a_helper_that_never_answers_is_killed_and_named(docker_home, monkeypatch):
    """Trial 12: a helper waiting on a locked keyring hung every registry task without a word
    (docker-py and the Docker CLI wait for ever). It is killed at the limit and named."""
    import time

    from paddlecd.registry import auth

    monkeypatch.setattr(auth, "HELPER_TIMEOUT_S", 1.0)
    helper(docker_home, "locked", HANGS)
    config(docker_home, {"credHelpers": {"reg.example": "locked"}})
    started = time.monotonic()
    with pytest.raises(RegistryAuthError) as info:
        find_credentials("reg.example")
    assert time.monotonic() - started < 30
    assert "docker-credential-locked" in info.value.cause and "reg.example" in info.value.cause
    assert "within 1s" in info.value.cause
    assert "echo reg.example | docker-credential-locked get" in info.value.hint
    assert _gone(int((docker_home / "hung.pid").read_text()))


def test_the_engine_clients_own_helper_calls_have_the_limit_too(docker_home, monkeypatch):
    """docker-py's APIClient runs the helper itself for a push or pull without auth_config and
    for a build's X-Registry-Config; after paddlecd has read config.json (engine.client does it
    before it makes a client) those calls are limited as well. No engine is needed: the client is
    never asked to connect."""
    import docker
    from docker import auth as docker_auth

    from paddlecd.registry import auth

    monkeypatch.setattr(auth, "HELPER_TIMEOUT_S", 1.0)
    helper(docker_home, "locked", HANGS)
    config(docker_home, {"credsStore": "locked"})
    auth.docker_config()
    api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.43")
    with pytest.raises(RegistryAuthError, match="docker-credential-locked .*within 1s"):
        docker_auth.get_config_header(api, "reg.example")


def test_an_auths_entry_of_plain_username_and_password_is_read_as_docker_reads_it(docker_home):
    """Trial 13: ``auths: {host: {username, password}}`` (no ``auth``): the Docker CLI sends
    the pair (docker/cli configfile decodes ``auth`` only when set); docker-py dropped it and
    every task said "no credentials for host: run docker login"."""
    from types import SimpleNamespace

    from paddlecd.registry.auth import engine_credentials

    config(docker_home, {"auths": {"reg.example:5000": {"username": "ci", "password": "pw"},
                                   "other.example": {"username": "only-a-user"},
                                   "empty.example": {"auth": ""}}})
    assert find_credentials("reg.example:5000") == Credentials("ci", "pw")
    assert find_credentials("other.example") is None
    assert find_credentials("empty.example") is None  # no credentials, as the Docker CLI reads it
    settings = SimpleNamespace(registry=SimpleNamespace(url="127.0.0.1:5000"),
                               release=SimpleNamespace(registry=None))
    assert engine_credentials(settings, "reg.example:5000/app:1") == Credentials("ci", "pw")


def test_a_failing_helper_that_printed_its_credentials_has_them_withheld(docker_home):
    """Trial 14: a helper that printed its JSON answer and then exited 3 had the password
    quoted in every task's error (release.list, lock)."""
    helper(docker_home, "leaky", answers("tester", "T14b-S3cr3t-77") + "; exit 3")
    config(docker_home, {"credHelpers": {"reg.example": "leaky"}})
    with pytest.raises(RegistryAuthError) as info:
        find_credentials("reg.example")
    assert "exited 3" in info.value.cause and "withheld" in info.value.cause
    assert "S3cr3t" not in info.value.cause + info.value.hint


def test_a_helper_on_path_that_is_not_executable_is_named_so(docker_home, tmp_path, monkeypatch):
    """Trial 15: a helper file on PATH without its execute bit was "is not on PATH"."""
    from paddlecd import config as project_config
    from paddlecd.registry.client import client_for

    bin_dir = tmp_path / "t15bin"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-t15plain"
    helper.write_text("#!/bin/sh\necho '{}'\n")
    helper.chmod(0o644)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (docker_home / "config.json").write_text(json.dumps({"credsStore": "t15plain"}))
    settings = project_config.load({"registry.url": "127.0.0.1:1"}, root=tmp_path, environ={})
    with pytest.raises(RegistryAuthError) as e:
        client_for(settings)
    assert e.value.cause.endswith(f"is at {helper} but not executable (chmod +x {helper})")


@pytest.mark.parametrize("answer", ["echo null", "echo '[1, 2]'", "echo '\"a string\"'"])
def test_a_helper_answering_json_that_is_no_object_is_named(docker_home, answer):
    """Trial 16: a helper answering JSON null or a list ended in docker-py's TypeError
    traceback."""
    helper(docker_home, "odd", answer)
    config(docker_home, {"credsStore": "odd"})
    with pytest.raises(RegistryAuthError, match="docker-credential-odd .*helper protocol's JSON"):
        find_credentials("reg.example")


@pytest.mark.parametrize(("answer", "what"), [("echo '{\"Username\": \"u\"}'", "no 'Secret' field"),
                                              ("echo 'not json'", "not JSON")])
def test_a_helper_answer_missing_a_field_says_which_in_words(docker_home, answer, what):
    """Trial 19: the reason was a bare Python class name, "(KeyError)"."""
    helper(docker_home, "half", answer)
    config(docker_home, {"credsStore": "half"})
    with pytest.raises(RegistryAuthError) as e:
        find_credentials("reg.example")
    assert "Error)" not in e.value.cause, e.value.cause
    assert e.value.cause.endswith(f"answered something other than the helper protocol's JSON "
                                  f"({what})"), e.value.cause


def test_a_failing_helper_s_own_words_are_withheld_but_the_protocol_s_are_quoted(docker_home):
    """Trial 16: a helper that exited 1 with the secret inside its error text had it printed."""
    helper(docker_home, "talks", "echo 'cannot refresh OutLeak-S3cret-77'; exit 1")
    config(docker_home, {"credsStore": "talks"})
    with pytest.raises(RegistryAuthError) as info:
        find_credentials("reg.example")
    assert "withheld" in info.value.cause and "S3cret" not in info.value.cause + info.value.hint
    helper(docker_home, "talks", "echo 'no credentials server URL'; exit 1")
    with pytest.raises(RegistryAuthError, match="exited 1: no credentials server URL$"):
        find_credentials("reg.example")
    # the protocol's "not found" is no error: no entry, as docker-py and the Docker CLI read it
    helper(docker_home, "talks", "echo 'credentials not found in native keychain'; exit 1")
    assert find_credentials("reg.example") is None


def test_a_helper_answering_an_empty_username_is_named(docker_home):
    """Trial 16: a helper answering ``Username: ""`` with a Secret got a 401 hinted "no
    credentials … run docker login", though a helper had answered."""
    helper(docker_home, "half", answers(""))
    config(docker_home, {"credsStore": "half"})
    with pytest.raises(RegistryAuthError) as info:
        find_credentials("reg.example")
    assert info.value.cause.endswith("answered without a Username")
    assert "s3cret" not in info.value.cause + info.value.hint


@pytest.mark.parametrize(("fields", "what"), [
    ('"Username":{"a":1},"Secret":"s3cretObj"', "a Username that is not text (a JSON object)"),
    ('"Username":"u","Secret":[1]', "a Secret that is not text (a JSON array)"),
    ('"Username":7,"Secret":"s3cretObj"', "a Username that is not text (a JSON number)")])
def test_a_helper_answering_a_username_or_secret_that_is_not_text_is_named(docker_home, fields,
                                                                          what):
    """Trial 17: a helper answering ``Username: {"a": 1}`` was used without a word, and the
    registry's 401 was blamed on the credentials."""
    helper(docker_home, "odd", f"echo '{{\"ServerURL\":\"'$server'\",{fields}}}'")
    config(docker_home, {"credsStore": "odd"})
    with pytest.raises(RegistryAuthError) as info:
        find_credentials("reg.example")
    assert info.value.cause.endswith(f"answered {what}"), info.value.cause
    assert "s3cret" not in info.value.cause + info.value.hint
