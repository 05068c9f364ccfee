"""Registry credentials and the token protocol, for :mod:`paddlecd.registry.client`.

Credentials come from the standard places only (DESIGN.md: Docker config.json or env):
``PADDLECD_REGISTRY_USERNAME`` / ``PADDLECD_REGISTRY_PASSWORD`` in the environment, else Docker's
``config.json`` (``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``) read as the Docker CLI
reads it (docker/cli ``getConfiguredCredentialStore``): ``credHelpers.<host>``, else ``credsStore``,
and only when the helper has no entry, ``auths.<host>``: a stale plaintext ``auths`` entry never
beats the store ``docker push`` uses. The lookup itself is docker-py's ``docker.auth``,
which runs ``docker-credential-<name> get`` (docker/docker-credential-helpers protocol) and parses
its stdout only: a helper's warnings on stderr go to the terminal, never into the JSON. This module
is the one place besides :mod:`paddlecd.engine` that imports docker-py, and only ``docker.auth``
(a config-file and helper reader, no engine client), the ``docker.errors`` it raises and
``docker.credentials``, whose helper runner it gives a time limit (:data:`HELPER_TIMEOUT_S`).

Token auth follows the distribution token specification
(distribution.github.io/distribution/spec/auth/token/): a 401 carries
``WWW-Authenticate: Bearer realm=…,service=…,scope=…``; the client GETs the realm with ``service``
and one ``scope`` parameter per scope, using basic auth when it has credentials, and sends
``Authorization: Bearer <token>`` (the response's ``token``, or ``access_token``). Secrets are held
in memory only and never appear in messages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd.errors import ConfigError, RegistryAuthError
from paddlecd.files import environ_value, json_problem, kind_of, read_regular

USERNAME_ENV = "PADDLECD_REGISTRY_USERNAME"
PASSWORD_ENV = "PADDLECD_REGISTRY_PASSWORD"
HELPER_TIMEOUT_S = 60.0
"""How long one ``docker-credential-<name>`` call may take before it is killed and named. docker-py
(``docker/credentials/store.py`` ``_execute``) and the Docker CLI wait for ever; a helper that waits
on a locked keyring or a prompt with no terminal hung every registry task without a word (trial 12).
Cloud helpers (ecr-login, gcloud) that fetch a token answer in seconds."""
_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')


@dataclass(frozen=True)
class Credentials:
    """A username and secret. ``repr`` hides the secret so it cannot leak through logs or
    tracebacks."""

    username: str
    password: str = field(repr=False)
    source: str = field(
        default="Docker config.json", compare=False
    )  # where they came from, for error hints (never the secret)

    @property
    def identity_token(self) -> bool:
        """Docker stores OAuth refresh tokens with the username ``<token>``."""
        return self.username == "<token>"


@dataclass(frozen=True)
class Challenge:
    """A parsed ``WWW-Authenticate`` header: ``scheme`` (lower-case) and its parameters."""

    scheme: str
    params: Mapping[str, str]


def parse_challenge(header: str) -> Challenge:
    """Parse ``WWW-Authenticate`` (RFC 7235), e.g. ``Bearer realm="https://a/token",service="reg"``.

    Quoted values may contain commas; only the first challenge is used (registries send one).
    """
    scheme, _, rest = (header or "").strip().partition(" ")
    params = {
        k.lower(): (q if q else bare).replace('\\"', '"') for k, q, bare in _PARAM.findall(rest)
    }
    return Challenge(scheme.lower(), params)


def scope(repository: str, actions: str = "pull,push") -> str:
    """A token scope: ``repository:<name>:<actions>`` (distribution token scope grammar)."""
    return f"repository:{repository}:{actions}"


def token_params(challenge: Challenge, scopes: Iterable[str]) -> list[tuple[str, str]]:
    """Query parameters for the token request: ``service`` and each scope (one parameter each)."""
    params = [("service", challenge.params["service"])] if "service" in challenge.params else []
    return params + [("scope", s) for s in scopes]


def docker_config_path() -> Path:
    """``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``."""
    base = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    return Path(base) / "config.json"


def env_credentials(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """Credentials from ``PADDLECD_REGISTRY_USERNAME``/``PADDLECD_REGISTRY_PASSWORD``, or None when
    neither is set.

    Raises:
        ConfigError: only one of the two is set, or one is set but empty (an unset CI secret
            expands to "": it must not fall back to config.json without a word).
    """
    user, password = environ_value(USERNAME_ENV, environ), environ_value(PASSWORD_ENV, environ)
    if bool(user) != bool(password):
        raise ConfigError(f"only one of {USERNAME_ENV} and {PASSWORD_ENV} is set",
                          "set both (or neither, to use docker login's config.json)")
    return Credentials(user, password, f"{USERNAME_ENV}/PASSWORD") if user and password else None


def engine_credentials(settings: Any, reference: str) -> Credentials | None:
    """The credentials to hand the engine API when it pulls ``reference``: the
    ``PADDLECD_REGISTRY_*`` pair when the reference's registry is a configured one
    (``registry.url``, ``release.registry``); else, when config.json names no helper for the
    host, its ``auths`` entry as :func:`find_credentials` reads it (plain username/password
    fields too, which docker-py's reader drops); else None, and docker-py runs the helper.
    Every pull (build's base, verify, artifacts.check, local deploy) takes this one rule; the
    registry client applies the same (client_for).

    Raises:
        ConfigError: half of the environment pair is set, or ``reference`` is malformed.
        RegistryAuthError: docker-py would read config.json and its helper for the host is not on
            PATH (:func:`check_helper`; a trial: artifacts.check said "Credentials store error …
            start dockerd", exit 4, where every other task named the helper, exit 5).
    """
    from paddlecd.registry.reference import parse_reference

    creds = env_credentials()
    host = parse_reference(reference).registry
    if creds and host in (settings.registry.url, settings.release.registry):
        return creds
    check_helper(host)
    cfg = docker_config()
    if cfg is not None and not cfg.get_credential_store(host):
        # an auths entry, handed over as the registry client reads it: docker-py's own reader
        # drops one written as plain username/password fields (_with_plain_fields)
        return _from_config(cfg, host, docker_config_path())
    return None


def find_credentials(host: str, *, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """Credentials for registry ``host`` (``host[:port]``, ``docker.io`` for the hub), or None.

    Order: the environment pair, then config.json as the Docker CLI reads it (module docstring).
    A missing config.json means no credentials (the registry's 401 then says so, with the
    ``docker login`` hint); one that cannot be read is an error naming it (the Docker CLI only
    warns, and then a push fails as unauthorised with no word of the file).

    Raises:
        ConfigError: half of the environment pair is set; config.json is unreadable or not JSON;
            an ``auths`` entry is malformed (not base64, no ``user:password``).
        RegistryAuthError: the configured credential helper is missing or fails (naming it).
    """
    from_env = env_credentials(environ)
    if from_env:
        return from_env
    path = docker_config_path()
    cfg = docker_config(path)
    return None if cfg is None else _from_config(cfg, host, path)


def _from_config(cfg: Any, host: str, path: Path) -> Credentials | None:
    """``host``'s credentials in the loaded config.json ``cfg`` (its helper's, else its
    ``auths`` entry's), as :func:`find_credentials` reads them."""
    from docker import auth as docker_auth
    from docker import errors as docker_errors

    helper = cfg.get_credential_store(host)
    try:
        with warnings.catch_warnings():  # docker-py warns about a missing helper; we raise instead
            warnings.simplefilter("ignore")
            found = docker_auth.resolve_authconfig(cfg, host)
    # ValueError: not JSON; TypeError, AttributeError: JSON that is no object (a trial: a helper
    # answering null or a list ended in docker-py's TypeError traceback)
    except (docker_errors.DockerException, ValueError, KeyError, TypeError, AttributeError) as e:
        raise _helper_error(str(helper), host, path, e) from e
    # A store's answer carries ServerAddress (docker.auth); an auths entry does not.
    source = f"docker-credential-{helper}" if found and "ServerAddress" in found else str(path)
    if found and "ServerAddress" in found:
        # docker.auth maps the helper's Username and Secret to these keys as they came
        odd = next((k for k in ("Username", "Password", "IdentityToken")
                    if found.get(k) is not None and not isinstance(found[k], str)), None)
        if odd:  # a trial: Username {"a": 1} was sent on, and the 401 blamed the credentials
            field = "Secret" if odd in ("Password", "IdentityToken") else odd
            raise RegistryAuthError(
                f"credential helper {source} (for {host}, from {path}) answered a {field} that "
                f"is not text (a JSON {_json_kind(found[odd])})",
                f"check it with: echo {host} | {source} get; the helper protocol's Username "
                "and Secret are strings")
    creds = _credentials(found or {}, source)
    if creds is None and found and "ServerAddress" in found and not found.get("IdentityToken"):
        user = found.get("Username") or found.get("username")
        secret = found.get("Password") or found.get("password")
        if user or secret:  # a trial: Username "" with a Secret was "no credentials: docker login"
            raise RegistryAuthError(
                f"credential helper {source} (for {host}, from {path}) answered without a "
                f"{'Secret' if user else 'Username'}",
                f"check it with: echo {host} | {source} get; or log in again with it")
    return creds


def check_helper(host: str) -> None:
    """Refuse a credential helper for ``host`` (``credHelpers.<host>``, else ``credsStore``) that
    is not on PATH, without running it: the engine refuses it on every pull and push whether or
    not the registry asks for auth, while the registry client runs it on a 401 only, so a missing
    helper would fail verify and pass promote on an open registry.

    Raises:
        ConfigError: config.json is broken (:func:`docker_config`).
        RegistryAuthError: the helper is not on PATH (naming it, the host and the file).
    """
    path = docker_config_path()
    cfg = docker_config(path)
    helper = cfg.get_credential_store(host) if cfg is not None else None
    if helper and not shutil.which(f"docker-credential-{helper}"):
        raise _helper_error(str(helper), host, path, LookupError(helper))


def docker_config(path: Path | None = None) -> Any:
    """Docker's config.json (default :func:`docker_config_path`) read as docker-py reads it (its
    ``AuthConfig``), or None when there is none. docker-py reads the same file whenever it makes
    an engine client, so the engine module checks it here first (a broken file is then named).

    Raises:
        ConfigError: unreadable, not JSON, or an ``auths`` entry that is not base64 of
            ``user:password`` (naming the file); ``DOCKER_CONFIG`` names a file.
    """
    path = path or docker_config_path()
    folder = os.environ.get("DOCKER_CONFIG")
    if folder and path.parent == Path(folder) and path.parent.is_file():
        # a trial: DOCKER_CONFIG=~/.docker/config.json said ".../config.json/config.json: Not a
        # directory", hint "remove it" (the file was fine; the variable names a folder)
        example = f" ({path.parent.parent})" if path.parent.name == "config.json" else ""
        raise ConfigError(f"DOCKER_CONFIG {folder} is a file, not a folder",
                          f"point DOCKER_CONFIG at the folder that holds config.json{example}, "
                          "or unset it")
    if path.is_symlink() and not path.exists():  # trial 19: read as absent, then a 401
        raise ConfigError(f"Docker config {path} is {kind_of(path)}, which does not exist",
                          "mount or create the file it names, or remove the link")
    try:
        raw = json.loads(read_regular(path, "Docker config"))  # never a named pipe: it blocks
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:  # ValueError: not JSON (UnicodeDecodeError included)
        why = e.strerror if isinstance(e, OSError) else json_problem(e)
        raise ConfigError(f"Docker config {path}: {why}",
                          "fix the file, or remove it and run docker login again") from e
    # imported here: loading docker-py's package costs ~0.1 s and importing paddlecd.cluster or
    # the registry client must not pull in a client library (tests/unit/test_boundaries.py)
    from docker import auth as docker_auth
    from docker import errors as docker_errors

    _check_shape(raw, path)
    _limit_helpers()
    try:
        return docker_auth.AuthConfig.load_config(None, _with_plain_fields(raw))
    except (docker_errors.InvalidConfigFile, ValueError) as e:  # binascii.Error: not base64
        hint = "fix or remove the entry (docker login rewrites it)"
        why = e if isinstance(e, docker_errors.InvalidConfigFile) else (
            f"an 'auths' entry is not base64 of user:password ({e})")
        raise ConfigError(f"Docker config {path}: {why}", hint) from e


def _with_plain_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with each ``auths`` entry that holds ``username`` and ``password`` but no ``auth``
    given the ``auth`` they make (base64 of ``user:password``). The Docker CLI reads such an
    entry (docker/cli ``configfile``: ``AuthConfig`` has ``username``/``password`` fields, and
    ``auth`` is decoded only when set); docker-py drops it (a trial: "no credentials for …: run
    docker login", with the pair in the file)."""
    import base64

    auths = raw.get("auths") or {}
    plain = {host: {**entry, "auth": base64.b64encode(
                 f"{entry['username']}:{entry['password']}".encode()).decode()}
             for host, entry in auths.items()
             if not entry.get("auth") and isinstance(entry.get("username"), str)
             and isinstance(entry.get("password"), str) and entry["username"]
             and entry["password"] and not entry.get("identitytoken")}
    # an empty "auth" is no credentials to the Docker CLI; docker-py failed to split it (a
    # trial: "an 'auths' entry is not base64 of user:password" where docker pull worked)
    empty = {host: {k: v for k, v in entry.items() if k != "auth"}
             for host, entry in auths.items() if entry.get("auth") == "" and host not in plain}
    return {**raw, "auths": {**auths, **plain, **empty}} if plain or empty else raw


def _limit_helpers() -> None:
    """Give every credential helper docker-py runs (our lookups and the engine client's pushes,
    pulls and builds alike) a time limit of :data:`HELPER_TIMEOUT_S`, by replacing
    ``docker.credentials.Store`` (looked up by ``docker.auth`` at each use) with a subclass that
    runs the helper through :func:`paddlecd.proc.run`. docker-py 7.1.0 (pinned) has no option for
    it. Idempotent."""
    from docker import credentials as docker_credentials

    if docker_credentials.Store.__name__ != "_TimedStore":
        docker_credentials.Store = _timed_store(docker_credentials.Store)


class _HelperExit(Exception):
    """A helper's non-zero exit, shaped as docker-py's ``process_store_error`` and
    :func:`_helper_error` read subprocess's ``CalledProcessError``: ``returncode`` and ``output``
    (its stdout, bytes)."""

    def __init__(self, returncode: int, output: bytes):
        super().__init__(f"exit {returncode}")
        self.returncode, self.output = returncode, output


def _timed_store(base: type) -> type:
    """``base`` (docker-py's ``Store``) with ``_execute`` run under a time limit; a non-zero exit
    keeps docker-py's meaning (``process_store_error``: "credentials not found" is no entry)."""
    from docker.credentials import errors as store_errors

    from paddlecd import proc

    class _TimedStore(base):  # type: ignore[misc, valid-type]
        def _execute(self, subcmd: str, data_input: bytes) -> bytes:
            if self.exe is None:
                raise store_errors.StoreError(f"{self.program} not installed or not available "
                                              "in PATH")
            server = data_input.decode("utf-8", "replace")[:200]
            try:
                result = proc.run([self.exe, subcmd], stdin=data_input, env=self.environment,
                                  stdout_only=True, check=False, timeout=HELPER_TIMEOUT_S,
                                  error=RegistryAuthError,
                                  what=f"credential helper {self.program} (asked for {server})")
            except RegistryAuthError as e:  # killed at the limit: no exit status
                raise RegistryAuthError(
                    e.cause, f"check it with: echo {server} | {self.program} {subcmd} (it must "
                    "answer without a prompt: unlock its keyring or log in), or remove it from "
                    f"credHelpers/credsStore in {docker_config_path()}") from e
            if result.returncode != 0:
                failed = _HelperExit(result.returncode, result.stdout.encode())
                raise store_errors.process_store_error(failed, self.program) from failed
            return result.stdout.encode()

    return _TimedStore


def _check_shape(raw: Any, path: Path) -> None:
    """Refuse what the Docker CLI's typed reader refuses (docker/cli cli/config/configfile
    ``ConfigFile``: ``auths`` a map of objects whose ``auth`` is a string, ``credsStore`` a string,
    ``credHelpers`` a map of strings); docker-py's reader ends in AttributeError/TypeError on it.

    Raises:
        ConfigError: naming the file and the key.
    """
    def bad(key: str, want: str) -> ConfigError:
        return ConfigError(f"Docker config {path}: {key} is not {want}",
                           "fix or remove the entry (docker login rewrites it)")

    if not isinstance(raw, dict):
        raise bad("the top level", "a JSON object")
    auths = raw.get("auths", {})
    if not isinstance(auths, dict):
        raise bad("'auths'", "an object of registry -> {auth: ...}")
    for host, entry in auths.items():
        if not isinstance(entry, dict):
            raise bad(f"auths[{host[:80]!r}]", "an object whose auth is a string")
        for key in ("auth", "identitytoken"):  # a trial: a number as identitytoken was said
            if not isinstance(entry.get(key, ""), str):  # to be the auth
                raise bad(f"auths[{host[:80]!r}].{key}", "a string")
        if entry.get("auth"):  # as docker-py decodes it (auth.decode_auth), never printed
            why = _auth_problem(entry["auth"])
            if why:  # trial 19: "(not enough values to unpack (expected 2, got 1))", no host
                raise ConfigError(f"Docker config {path}: an 'auths' entry is not base64 of "
                                  f"user:password: auths[{host[:80]!r}].auth {why}",
                                  "fix or remove the entry (docker login rewrites it)")
    if not isinstance(raw.get("credsStore", ""), str):
        raise bad("'credsStore'", "a helper name (a string)")
    helpers = raw.get("credHelpers", {})
    if not isinstance(helpers, dict) or not all(isinstance(v, str) for v in helpers.values()):
        raise bad("'credHelpers'", "an object of registry -> helper name")


def _auth_problem(auth: str) -> str | None:
    """What keeps ``auth`` (an ``auths`` entry's) from being base64 of ``user:password`` as
    docker-py reads it (``base64.b64decode``, split at the first ``:``, UTF-8), or None."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(auth)
    except (binascii.Error, ValueError):
        return "is not base64"
    if b":" not in decoded:
        return "decodes to no user:password (no ':' in it)"
    try:
        decoded.decode("utf-8")
    except UnicodeDecodeError:
        return "decodes to no UTF-8 text"
    return None


def _json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type: ``object``, ``array``, ``number``, ``boolean``…"""
    return {dict: "object", list: "array", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def _credentials(found: Mapping[str, Any], source: str) -> Credentials | None:
    """docker.auth's answer (``IdentityToken``, or ``Username``/``Password`` in either case)."""
    if found.get("IdentityToken"):
        return Credentials("<token>", found["IdentityToken"], source)
    user = found.get("Username") or found.get("username")
    password = found.get("Password") or found.get("password")
    return Credentials(user, password, source) if user and password else None


# The error lines of the credential helper protocol (docker/docker-credential-helpers,
# credentials/error.go), the only helper output an error quotes.
_HELPER_ERRORS = frozenset({"credentials not found in native keychain",
                            "no credentials server URL", "no credentials username"})


def _not_found(exe: str) -> str:
    """Why ``exe`` (which ``shutil.which`` did not find) cannot run: a file of that name on PATH
    that is not executable (a trial: that was "is not on PATH"), or none at all."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = Path(folder or ".") / exe
        if candidate.is_file():
            return f"is at {candidate} but not executable (chmod +x {candidate})"
    return "is not on PATH"


def _helper_error(helper: str, host: str, path: Path, e: Exception) -> RegistryAuthError:
    """One line naming the helper and why it failed: not on PATH, or its exit status and output."""
    exe = f"docker-credential-{helper}"
    # docker.auth wraps the helper's StoreError, which wraps subprocess's CalledProcessError
    failed = e.__cause__.__cause__ if e.__cause__ else None
    if failed is not None and hasattr(failed, "returncode"):
        said = (failed.output or b"").decode("utf-8", "replace").strip().splitlines()
        # stdout is where a helper writes credentials: only the protocol's own error lines are
        # quoted, anything else is withheld (trials: a helper that printed its JSON answer, then
        # exited 3, had the password shown; one whose error text held the secret, the same)
        known = said and said[0].strip() in _HELPER_ERRORS
        why = f"exited {failed.returncode}" + (
            f": {said[0].strip()}" if known
            else ": (its output withheld: a helper's output may hold credentials; run the check "
                 "below to see it)" if said else "")
    elif not shutil.which(exe):
        why = _not_found(exe)
    else:
        inner = next((x for x in (e, e.__cause__, e.__context__)
                      if isinstance(x, (KeyError, ValueError))), None)  # trial 19: "(KeyError)"
        what = (f"no {str(inner.args[0])[:40]!r} field" if isinstance(inner, KeyError) and
                inner.args else "not JSON" if isinstance(inner, ValueError) else "unreadable")
        why = f"answered something other than the helper protocol's JSON ({what})"
    return RegistryAuthError(
        f"credential helper {exe} (for {host}, from {path}) {why}",
        f"check it with: echo {host} | {exe} get; or remove it from credHelpers/credsStore "
        f"in {path}")
