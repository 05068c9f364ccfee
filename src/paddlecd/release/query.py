"""Looking releases up: by name (``1.4.0-cu126``), as a list, or one with its ledger history.

Releases are what the ledger of the release repository says was promoted (void claims excluded);
:func:`find` resolves the immutable tag in the registry itself, so it answers for what is really there.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import semver

from paddlecd.config import Settings
from paddlecd.errors import ConfigError, NotFoundError
from paddlecd.image import variants
from paddlecd.release import ledger
from paddlecd.release.ledger import Record
from paddlecd.release.plan import actions_of, target
from paddlecd.release.policy import fold, parse_version


@dataclass(frozen=True)
class Release:
    """A release: ``version``, ``variant``, ``digest`` and ``reference`` (``host/repo@sha256:…``)."""

    version: str
    variant: str
    digest: str
    reference: str


def split_release_tag(settings: Settings, tag: str) -> tuple[semver.Version, str]:
    """``"1.4.0-cu126"`` → (1.4.0, ``cu126``) using the known variants.

    Raises:
        ConfigError: no known variant suffix, a moving tag (``1.4-cu126``, ``latest-cu126``), bad version.
    """
    names = sorted(variants.load(settings), key=len, reverse=True)
    variant = next((n for n in names if tag.endswith(f"-{n}") and len(tag) > len(n) + 1), None)
    if variant is None:
        raise ConfigError(f"'{tag}' names no known variant", "a release is X.Y.Z-<variant>, variants: " + ", ".join(names))
    prefix = tag[: -len(variant) - 1]
    if prefix == "latest" or re.fullmatch(r"\d+(\.\d+)?", prefix):
        raise ConfigError(f"'{tag}' is a moving tag, not a release",
                          f"pass the immutable release tag X.Y.Z-{variant} (see invoke release.list)")
    return parse_version(prefix), variant


def find(settings: Settings, release: str) -> Release:
    """The release named ``release`` (``"1.4.0-cu126"``), resolved in the release repository.

    Raises:
        ConfigError: not a release tag (see :func:`split_release_tag`), or no such release.
    """
    version, variant = split_release_tag(settings, release)
    client, ref = target(settings)
    try:
        digest = client.resolve(ref.repository, release).digest
    except NotFoundError as e:
        raise ConfigError(f"unknown release {release} in {ref.name}", "see: invoke release.list") from e
    return Release(str(version), variant, digest, str(ref.by_digest(digest)))


def history(settings: Settings, variant: str | None = None) -> list[Record]:
    """Every ledger record of the release repository (of ``variant``), oldest first."""
    client, ref = target(settings)
    return ledger.read(client, ref.repository, variant)


def list_releases(settings: Settings, variant: str | None = None) -> list[tuple[Record, list[str]]]:
    """Releases as (promotion record, moving tags pointing at it now by the ledger), by variant
    then version.

    Raises:
        ConfigError: an unknown ``variant`` (an error, not an empty list).
    """
    if variant:
        variants.get(settings, variant)
    records = history(settings, variant)
    out = []
    for name in sorted({r.variant for r in records}):
        mine = [r for r in records if r.variant == name]
        state = fold(actions_of(mine), name)
        for r in mine:
            v = semver.Version.parse(r.version)
            if r.action == "promote" and r.id not in state.void and r == _first(mine, r):
                out.append((r, sorted(t for t, tv in state.moving.items() if tv == v)))
    return sorted(out, key=lambda x: (x[0].variant, semver.Version.parse(x[0].version)))


def _first(records: list[Record], r: Record) -> Record:
    return next(x for x in records if x.action == "promote" and x.version == r.version and x.digest == r.digest)


def show(settings: Settings, version: str) -> list[tuple[Record, list[str], list[Record]]]:
    """Release ``version`` (``1.4.0`` or ``1.4.0-cpu``) per variant: (record, moving tags, its history).

    Raises:
        ConfigError: invalid version, or no such release.
    """
    wanted_variant = None
    if "-" in version:  # 1.4.0-cpu names a variant; 1.5.0-rc.1 alone is a pre-release of any variant
        with contextlib.suppress(ConfigError):
            parsed, wanted_variant = split_release_tag(settings, version)
            version = str(parsed)
    v = parse_version(version)
    records = history(settings, wanted_variant)
    rows = [(r, tags, [h for h in records if h.variant == r.variant and h.version == r.version])
            for r, tags in list_releases(settings, wanted_variant) if semver.Version.parse(r.version) == v]
    if not rows:
        raise ConfigError(f"no release {version}" + (f"-{wanted_variant}" if wanted_variant else ""),
                          "see: invoke release.list")
    return rows
