"""Registry credentials and the token protocol, for :mod:`paddlecd.registry.client`.

Credentials come from the standard places only (the project design: Docker config.json or env): ``PADDLECD_REGISTRY_USERNAME`` /
``PADDLECD_REGISTRY_PASSWORD`` in the environment, else Docker's ``config.json``
(``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``): ``credHelpers.<host>``, then
``auths.<host>.auth`` (base64 ``user:password``), then ``credsStore`` — the order the Docker CLI
uses (docker/cli ``cli/config/configfile/file.go``). Helpers are ``docker-credential-<name> get``
with the server on stdin (docker/docker-credential-helpers protocol).

Token auth follows the distribution token specification (distribution.github.io/distribution/spec/auth/token/):
a 401 carries ``WWW-Authenticate: Bearer realm=…,service=…,scope=…``; the client GETs the realm with
``service`` and one ``scope`` parameter per scope, using basic auth when it has credentials, and
sends ``Authorization: Bearer <token>`` (the response's ``token``, or ``access_token``).
Secrets are held in memory only and never appear in messages.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from paddlecd import proc
from paddlecd.errors import ConfigError
from paddlecd.registry.reference import DOCKER_HUB, DOCKER_HUB_API

USERNAME_ENV = "PADDLECD_REGISTRY_USERNAME"
PASSWORD_ENV = "PADDLECD_REGISTRY_PASSWORD"
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", DOCKER_HUB, DOCKER_HUB_API)
_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')


@dataclass(frozen=True)
class Credentials:
    """A username and secret. ``repr`` hides the secret so it cannot leak through logs or tracebacks."""

    username: str
    password: str = field(repr=False)
    source: str = field(default="Docker config.json", compare=False)  # where they came from, for error hints (never the secret)

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
    params = {k.lower(): (q if q else bare).replace('\\"', '"') for k, q, bare in _PARAM.findall(rest)}
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
    """Credentials from ``PADDLECD_REGISTRY_USERNAME``/``PADDLECD_REGISTRY_PASSWORD``, or None when neither is set.

    Raises:
        ConfigError: only one of the two is set.
    """
    env = os.environ if environ is None else environ
    user, password = env.get(USERNAME_ENV), env.get(PASSWORD_ENV)
    if bool(user) != bool(password):
        raise ConfigError(f"only one of {USERNAME_ENV} and {PASSWORD_ENV} is set",
                          "set both (or neither, to use docker login's config.json)")
    return Credentials(user, password, f"{USERNAME_ENV}/PASSWORD") if user and password else None


def find_credentials(host: str, *, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """Credentials for registry ``host`` (``host[:port]``), or None when none are configured.

    Raises nothing for a missing or unreadable config file or helper: the registry's 401 then says
    what is wrong, with the ``docker login`` hint.
    """
    from_env = env_credentials(environ)
    if from_env:
        return from_env
    try:
        cfg = json.loads(docker_config_path().read_text())
    except (OSError, ValueError):
        return None
    keys = _HUB_KEYS if host in _HUB_KEYS else (host, f"https://{host}", f"http://{host}", f"https://{host}/v1/")
    helpers = cfg.get("credHelpers") or {}
    for key in keys:
        if key in helpers:
            return _from_helper(helpers[key], key)
    for key, entry in (cfg.get("auths") or {}).items():
        if _normalise(key) in map(_normalise, keys) and isinstance(entry, dict):
            found = _from_auth_entry(entry)
            if found:
                return found
    return _from_helper(cfg["credsStore"], keys[0]) if cfg.get("credsStore") else None


def _normalise(key: str) -> str:
    return re.sub(r"^https?://", "", key).split("/", 1)[0]


def _from_auth_entry(entry: Mapping[str, str]) -> Credentials | None:
    if entry.get("identitytoken"):
        return Credentials("<token>", entry["identitytoken"])
    if entry.get("auth"):
        try:
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return Credentials(user, password)
    if entry.get("username") and entry.get("password"):
        return Credentials(entry["username"], entry["password"])
    return None


def _from_helper(name: str, server: str) -> Credentials | None:
    exe = shutil.which(f"docker-credential-{name}")
    if not exe:
        return None
    result = proc.run([exe, "get"], stdin=server.encode(), check=False, stdout_only=True)
    if result.returncode != 0:
        return None
    try:
        data = json.loads(result.stdout)
        return Credentials(data["Username"], data["Secret"], "a docker credential helper")
    except (ValueError, KeyError):
        return None
