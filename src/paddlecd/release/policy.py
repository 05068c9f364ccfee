"""Release versions, release tags and the moving-tag rules, on the ``semver`` package.

For version ``X.Y.Z`` of variant ``V`` a promotion writes the immutable tag ``X.Y.Z-V`` and the
moving tags ``X.Y-V``, ``X-V`` and ``latest-V``. Precedence is Semantic Versioning 2.0.0 §11
(semver.org): numeric identifiers compare as numbers (1.10.0 > 1.9.0), a pre-release is lower than
its release (1.5.0-rc.1 < 1.5.0), pre-release identifiers compare left to right, numeric below
alphanumeric. ``semver.Version`` implements exactly that; nothing here compares strings.

Rules:

* a moving tag only moves forward: it is re-pointed when the promoted version is higher than the
  version it points at now, so out-of-order promotions end on the highest version;
* a pre-release (``1.5.0-rc.1``) gets only its immutable tag and never moves a moving tag;
* a rollback re-points the moving tags of its target version back to it — the one way back — and
  later promotions move forward from there;
* the first promotion of a version claims it; a later claim with another digest is void (clobber).

:func:`fold` replays ledger actions in ledger order into the state the tags must have; the
release module writes that state and checks it (which is what makes re-runs converge).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import semver

from paddlecd.errors import ConfigError, quoted

Part = Literal["major", "minor", "patch"]
_FORMAT = "use X.Y.Z (Semantic Versioning 2.0.0), e.g. 1.4.0 or 1.5.0-rc.1"


def parse_version(text: str) -> semver.Version:
    """Parse a release version strictly.

    Raises:
        ConfigError: ``v1.4`` (leading ``v``), ``1.4`` (missing patch), ``01.2.3`` (leading zero),
            spaces around it (``"1.2.3 "``), build metadata (``+…`` cannot be in an image tag and
            has no precedence, semver §10).
    """
    text = text or ""
    if text != text.strip():  # "1.2.3 " is a typo or a script's stray newline, never 1.2.3
        raise ConfigError(f"invalid version {quoted(text)}: it has spaces around it",
                          f"{_FORMAT}, with nothing around it")
    if text[:1] in ("v", "V"):
        rest = text[1:]
        fixed = rest if re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", rest) else None
        raise ConfigError(f"invalid version {quoted(text)}: no 'v' prefix in release versions",
                          f"{_FORMAT}" + (f": {fixed}" if fixed else ""))
    try:
        version = semver.Version.parse(text)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"invalid version {quoted(text)}: {_why_not_semver(text)}",
                          _FORMAT) from e
    if version.build:
        raise ConfigError(
            f"invalid version {text!r}: build metadata ('+{version.build}') cannot be in a tag",
            "drop the '+…' part; use a pre-release (-rc.1) to distinguish builds",
        )
    return version


def check_not_a_release_name(version: semver.Version, names: Iterable[str], *,
                             flag: str = "--version") -> None:
    """Refuse a version whose pre-release is a variant name (``1.0.0-cpu``): that is the name of
    a release (``<version>-<variant>``), and promoted as a version it made the tag
    ``1.0.0-cpu-cpu``, or ``1.0.0-cu126-cpu`` for a CPU image (a trial).

    Raises:
        ConfigError: naming ``flag``, the variant and the version meant.
    """
    pre = str(version.prerelease or "").lower()  # 1.0.0-CPU too (trial 8: tag 1.0.0-CPU-cpu)
    for name in sorted(names, key=len, reverse=True):
        if pre == name.lower() or pre.endswith("-" + name.lower()):
            meant = str(version)[:-len(name) - 1]
            raise ConfigError(f"{flag} {version}: '{name}' is a variant, and {version} the name "
                              f"of release {meant} of it", f"give the version alone: {flag} "
                              f"{meant} --variant {name}")


def _why_not_semver(text: str) -> str:
    """Which part of a version ``semver`` refused: the X.Y.Z core or the pre-release (semver §9).

    ``1.0.0-`` or ``1.0.0-rc..1`` have a valid core; saying "not MAJOR.MINOR.PATCH" about them
    points at the wrong part.
    """
    core, dash, pre = text.partition("-")
    core = core.partition("+")[0]
    if not re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", core):
        return "not MAJOR.MINOR.PATCH without leading zeros"
    pre = pre.partition("+")[0]
    if dash and not pre:
        return "an empty pre-release after '-'"
    bad = [i for i in pre.split(".") if not re.fullmatch(r"[0-9A-Za-z-]+", i)
           or (i.isdigit() and len(i) > 1 and i[0] == "0")]
    if bad:
        return (f"pre-release identifier {bad[0]!r} is not [0-9A-Za-z-]+ "
                "(non-empty, ASCII, no leading zero if numeric)")
    return "not Semantic Versioning 2.0.0"


def release_tag(version: semver.Version, variant: str) -> str:
    """The immutable tag: ``X.Y.Z[-pre]-V``."""
    return f"{version}-{variant}"


def moving_tags(version: semver.Version, variant: str) -> list[str]:
    """The moving tags a release may move, most specific first; none for a pre-release."""
    if version.prerelease:
        return []
    return [
        f"{version.major}.{version.minor}-{variant}",
        f"{version.major}-{variant}",
        f"latest-{variant}",
    ]


def parse_release_tag(tag: str, variant: str) -> semver.Version | None:
    """The version of an immutable release tag of ``variant``, or None for any other tag."""
    suffix = f"-{variant}"
    if not tag.endswith(suffix):
        return None
    try:
        version = semver.Version.parse(tag[: -len(suffix)])
    except ValueError:
        return None
    return None if version.build else version


def bump(releases: Iterable[semver.Version], part: Part) -> semver.Version:
    """The next version after the highest existing release (pre-releases ignored); from 0.0.0 if
    none.

    Raises:
        ConfigError: ``part`` is not major, minor or patch.
    """
    if part not in ("major", "minor", "patch"):
        raise ConfigError(f"invalid --bump {quoted(part)}", "use --bump major, minor or patch")
    finals = [v for v in releases if not v.prerelease]
    return max(finals, default=semver.Version(0, 0, 0)).next_version(part)


@dataclass(frozen=True)
class Action:
    """One ledger action: ``kind`` promote/rollback, ``version``, ``digest``, ordered by ``key``."""

    kind: Literal["promote", "rollback"]
    version: semver.Version
    digest: str
    key: str


class HistoryNeeded(Exception):
    """A fold from a checkpoint's :class:`State` met a version it knows only as claimed (its
    digest is not in that state): the caller must fold the whole history instead."""


@dataclass
class State:
    """Where releases and moving tags stand: ``releases`` {version: digest}, ``moving`` {tag:
    version}, ``void`` keys of actions that did not apply (a clobbering promotion, a rollback to no
    release).

    A state read from a ledger checkpoint (:mod:`paddlecd.release.ledger`) is partial:
    ``releases`` holds only the versions its moving tags name, and ``claimed`` every version the
    history claims, so a fold from it stays exact for new versions and raises
    :class:`HistoryNeeded` for an old one.
    """

    releases: dict[semver.Version, str] = field(default_factory=dict)
    moving: dict[str, semver.Version] = field(default_factory=dict)
    void: list[str] = field(default_factory=list)
    claimed: frozenset[semver.Version] = frozenset()

    def claim(self, version: semver.Version) -> str | None:
        """The digest that claimed ``version``, None when unclaimed.

        Raises:
            HistoryNeeded: a partial state knows the claim but not its digest.
        """
        digest = self.releases.get(version)
        if digest is None and version in self.claimed:
            raise HistoryNeeded(str(version))
        return digest

    def digest_of(self, tag: str) -> str | None:
        """The digest moving ``tag`` must point at, or None when it must not exist yet."""
        version = self.moving.get(tag)
        return self.releases.get(version) if version is not None else None


def fold(actions: Iterable[Action], variant: str, start: State | None = None) -> State:
    """Replay ``actions`` in ``key`` order into the :class:`State` the tags of ``variant`` must
    have, from ``start`` (a checkpoint's state: the fold of every action before these) or from
    nothing.

    Raises:
        HistoryNeeded: an action names a version ``start`` knows only as claimed.
    """
    state = State(releases=dict(start.releases), moving=dict(start.moving),
                  void=list(start.void), claimed=start.claimed) if start else State()
    for a in sorted(actions, key=lambda a: a.key):
        claimed = state.claim(a.version)
        if a.kind == "promote":
            if claimed is not None and claimed != a.digest:
                state.void.append(a.key)
                continue
            state.releases[a.version] = a.digest
            for tag in moving_tags(a.version, variant):
                current = state.moving.get(tag)
                if current is None or a.version > current:
                    state.moving[tag] = a.version
        elif claimed is None or a.version.prerelease:
            state.void.append(a.key)
        else:
            for tag in moving_tags(a.version, variant):
                state.moving[tag] = a.version
    return state
