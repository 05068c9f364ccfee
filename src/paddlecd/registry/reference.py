"""Image references: ``[registry/]repository[:tag][@digest]``, parsed once and carried as values.

The grammar is distribution's reference grammar (github.com/distribution/reference, ``regexp.go``):
the first path component is a registry when it contains ``.`` or ``:`` or is ``localhost``;
otherwise the registry is Docker Hub (``docker.io``) and one-component names get the ``library/``
prefix, as the Docker CLI does. Docker Hub's API endpoint is ``registry-1.docker.io``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from paddlecd.errors import ConfigError, quoted

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"

# distribution/reference regexp.go: path components, tag and digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_DOMAIN = re.compile(
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?\.?)+(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?"
)
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")  # \w would also admit non-ASCII letters
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")
SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")  # what paddlecd itself writes and reads back
REPOSITORY_RULE = ("repository names are lower-case components [a-z0-9]+ joined by '.', '_', "
                   "'__' or '-'s, separated by '/' (distribution-spec name grammar), 255 "
                   "characters at most")
TAG_RULE = "tags are [A-Za-z0-9_][A-Za-z0-9._-]{0,127}: 128 characters at most (distribution spec)"
_HINT = ("use [registry[:port]/]repository[:tag][@sha256:<64 hex>], "
         "e.g. 127.0.0.1:5000/paddlecd/paddle:cpu")


@dataclass(frozen=True)
class Reference:
    """A parsed image reference.

    Attributes:
        registry: ``host[:port]`` as written (``docker.io`` for Docker Hub).
        repository: path inside the registry (``library/ubuntu``, ``paddlecd/paddle``).
        tag: the tag, or None (a digest-only reference).
        digest: ``sha256:<hex>``, or None.
    """

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    @property
    def name(self) -> str:
        """``registry/repository`` without tag or digest."""
        return f"{self.registry}/{self.repository}"

    @property
    def api_host(self) -> str:
        """The host serving the distribution API (Docker Hub's is ``registry-1.docker.io``)."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def identifier(self) -> str:
        """What goes after ``/manifests/``: the digest when present, else the tag."""
        return self.digest or self.tag or "latest"

    def by_digest(self, digest: str) -> Reference:
        """The same repository pinned to ``digest`` (tag dropped): ``host/repo@sha256:…``."""
        return replace(self, tag=None, digest=check_digest(digest))

    def with_tag(self, tag: str) -> Reference:
        """The same repository at ``tag`` (digest dropped).

        Raises:
            ConfigError: ``tag`` breaks the tag grammar (:func:`check_tag`).
        """
        return replace(self, tag=check_tag(tag), digest=None)


def check_repository(name: str, *, what: str = "repository") -> str:
    r"""Return repository ``name`` (``ml/paddle``) if the distribution spec allows it, else raise.

    The rule is distribution-spec's ``<name>`` grammar,
    ``[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`` (spec.md "Pulling
    manifests"): registries refuse anything else with NAME_INVALID, so it is refused here first.

    Args:
        name: the repository path, without registry host or tag.
        what: what the name is, for the message (``setting 'registry.repository'``).

    Raises:
        ConfigError: with the rule, naming the first offending character when it is upper-case.
    """
    if _REPOSITORY.fullmatch(name or "") and len(name) <= 255:
        return name
    why = " (capitals are not allowed)" if name != name.lower() else ""
    raise ConfigError(f"{what} {quoted(name)} is not a valid repository name{why}",
                      REPOSITORY_RULE)


def check_tag(tag: str, *, what: str = "tag") -> str:
    """Return ``tag`` if the distribution spec allows it (``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}``).

    Raises:
        ConfigError: with the rule and the tag's length when it is too long.
    """
    if _TAG.fullmatch(tag or ""):
        return tag
    why = f" ({len(tag)} characters)" if 128 < len(tag or "") <= 160 else ""
    raise ConfigError(f"{what} {quoted(tag, 160)} is not a valid image tag{why}", TAG_RULE)


def check_digest(digest: str) -> str:
    """Return ``digest`` if it is ``sha256:<64 lowercase hex>`` (or sha512), else raise
    ConfigError."""
    if not _DIGEST.fullmatch(digest or ""):
        raise ConfigError(
            f"invalid digest {quoted(digest)}",
            "a digest is sha256: followed by 64 lowercase hex digits"
        )
    return digest


def parse_reference(ref: str, *, default_tag: str | None = "latest") -> Reference:
    """Parse ``[registry/]repository[:tag][@digest]``.

    Args:
        ref: the reference text, e.g. ``127.0.0.1:5000/paddlecd/paddle:cpu`` or ``ubuntu``.
        default_tag: tag used when neither tag nor digest is given (Docker uses ``latest``).

    Returns:
        a :class:`Reference`; ``str()`` of it parses back to an equal value.

    Raises:
        ConfigError: empty, upper-case repository, bad tag or digest, a bare digest (no
            repository), name longer than 255 characters.
    """
    text = (ref or "").strip()
    if re.fullmatch(r"sha256:[0-9a-fA-F]*", text):  # would parse as repository "sha256", a tag
        raise ConfigError(f"image reference {quoted(ref)} is a digest without its repository",
                          "give host/repository@sha256:<digest>, as push prints it")
    rest, at, digest = text.partition("@")
    if at and not digest:  # a trial: "repo@" (an unset $DIGEST) was read as repo:latest
        raise ConfigError(f"invalid image reference {ref[:200]!r}: nothing after '@'",
                          "give host/repository@sha256:<digest>, as push prints it")
    if digest:
        check_digest(digest)
    registry, path = _split_registry(rest, ref)
    path, tag = _split_tag(path, ref)
    if not _REPOSITORY.fullmatch(path) or len(f"{registry}/{path}") > 255:
        caps = " (capitals are not allowed)" if path != path.lower() else ""
        raise ConfigError(f"invalid image reference {quoted(ref)}: bad repository "
                          f"{quoted(path)}{caps}", REPOSITORY_RULE)
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return Reference(registry, path, tag or (None if digest else default_tag), digest or None)


def _split_registry(rest: str, ref: str) -> tuple[str, str]:
    first, slash, path = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN.fullmatch(first):
            raise ConfigError(f"invalid image reference {quoted(ref)}: bad registry "
                              f"{quoted(first)}", _HINT)
        registry = DOCKER_HUB if first in ("index.docker.io", DOCKER_HUB_API) else first
        return registry, path
    if not rest:
        raise ConfigError(f"invalid image reference {quoted(ref)}: empty", _HINT)
    return DOCKER_HUB, rest


def _split_tag(path: str, ref: str) -> tuple[str, str | None]:
    name, colon, tag = path.rpartition(":")
    if not colon or "/" in tag:
        return path, None
    if not _TAG.fullmatch(tag):
        raise ConfigError(f"invalid image reference {quoted(ref)}: bad tag {quoted(tag)}", TAG_RULE)
    return name, tag
