"""Looking releases up: by name (``1.4.0-cu126``), as a list, or one with its ledger history.

Releases are what the ledger of the release repository says was promoted (void claims excluded);
their tags are reported as the registry has them, and :func:`find` resolves the immutable tag in the
registry itself, so both answer for what is really there.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import semver

from paddlecd.config import Settings
from paddlecd.errors import ConfigError, NotFoundError
from paddlecd.image import variants
from paddlecd.registry.reference import Reference, parse_reference
from paddlecd.release import ledger
from paddlecd.release.ledger import Record
from paddlecd.release.plan import actions_of, current, currents, target
from paddlecd.release.policy import State, fold, parse_version, release_tag
from paddlecd.verify import registry_store


@dataclass(frozen=True)
class Release:
    """A release: ``version``, ``variant``, ``digest`` and ``reference``
    (``host/repo@sha256:…``)."""

    version: str
    variant: str
    digest: str
    reference: str


def split_release_tag(settings: Settings, tag: str) -> tuple[semver.Version, str]:
    """``"1.4.0-cu126"`` → (1.4.0, ``cu126``) using the known variants.

    Raises:
        ConfigError: a bare variant name, no known variant suffix, a moving tag (``1.4-cu126``,
            ``latest-cu126``), bad version.
    """
    names = sorted(variants.load(settings), key=len, reverse=True)
    variant = next((n for n in names if tag.endswith(f"-{n}") and len(tag) > len(n) + 1), None)
    if variant is None and tag in names:
        raise ConfigError(f"'{tag}' is a variant, not a release",
                          f"name a release: X.Y.Z-{tag} (see: invoke release.list)")
    if variant is None and not re.match(r"v?\d+\.\d+", tag):  # cpu-5dc125f: a build tag
        raise ConfigError(f"'{tag}' is not a release (X.Y.Z-<variant>)",
                          "see: invoke release.list; variants: " + ", ".join(names))
    if variant is None:
        raise ConfigError(
            f"'{tag}' names no known variant",
            "a release is X.Y.Z-<variant>, variants: " + ", ".join(names),
        )
    prefix = tag[: -len(variant) - 1]
    if prefix == "latest" or re.fullmatch(r"\d+(\.\d+)?", prefix):
        raise ConfigError(
            f"'{tag}' is a moving tag, not a release",
            f"pass the immutable release tag X.Y.Z-{variant} (see invoke release.list)",
        )
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
        raise ConfigError(
            f"unknown release {release} in {ref.name}", "see: invoke release.list"
        ) from e
    return Release(str(version), variant, digest, str(ref.by_digest(digest)))


def history(settings: Settings, variant: str | None = None) -> list[Record]:
    """Every ledger record of the release repository (of ``variant``), oldest first."""
    client, ref = target(settings)
    return ledger.read(client, ref.repository, variant)


def list_releases(settings: Settings, variant: str | None = None) -> list[tuple[Record, list[str]]]:
    """Releases as (promotion record, tags), by variant then version.

    The tags are the release's moving tags **as the registry has them**, not as the ledger folds
    them (no phantom releases): a moving tag the ledger assigns to the release but the
    registry lacks is listed as ``"<tag> (missing)"``, one the registry points elsewhere as
    ``"<tag> (on <version or digest>)"``, and a missing immutable tag as ``"<X.Y.Z-V> (missing)"``.
    A re-run of the promotion (or rollback) writes them. Costs: one tag list, each variant's
    checkpoint plus the records outside it, one HEAD per moving tag.

    Raises:
        ConfigError: an unknown ``variant`` (an error, not an empty list).
    """
    if variant:
        variants.get(settings, variant)
    return [(r, tags) for r, tags, _ in _rows(settings, variant)]


def _rows(settings: Settings, variant: str | None,
          version: semver.Version | None = None) -> list[tuple[Record, list[str], list[Record]]]:
    """(promotion record, tags as the registry has them, its history) per release, of ``variant``
    (None: every variant in the tag list) and ``version`` (None: every version).

    With both given (``release.show 1.4.0-cpu``) nothing is listed: the ledger is read
    by name (:func:`paddlecd.release.ledger.read_by_name`) and the release tag is asked for by
    name; otherwise one tag list serves the ledger read and the release tags.
    """
    client, ref = target(settings)
    by_name = ledger.read_by_name(client, ref.repository, variant) if variant and version else None
    tags = None if by_name else client.list_tags(ref.repository)
    out = []
    for name in [variant] if variant else ledger.variants_in(tags or []):
        view = by_name or ledger.read_view(client, ref.repository, name, tags or [])
        records = list(view.records)
        state = fold(actions_of(records), name)
        firsts = {}
        for r in records:
            if r.action == "promote" and r.id not in state.void:
                if version is None or semver.Version.parse(r.version) == version:
                    firsts.setdefault((r.version, r.digest), r)
        if not firsts:
            continue
        have_now = currents(client, ref.repository, sorted(state.moving))
        on = {t: _registry_version(have_now[t], state.moving[t], state)
              for t in sorted(state.moving)}
        for r in firsts.values():
            v = semver.Version.parse(r.version)
            immutable = release_tag(v, name)
            there = immutable in tags if tags is not None else bool(
                current(client, ref.repository, immutable))
            marks = [] if there else [f"{immutable} (missing)"]
            for t, (have, digest) in on.items():
                if have == v:
                    marks.append(t)
                elif state.moving[t] == v:
                    where = "missing" if digest is None else f"on {have or digest}"
                    marks.append(f"{t} ({where})")
            out.append((r, marks, [h for h in records if h.version == r.version]))
    return sorted(out, key=lambda x: (x[0].variant, semver.Version.parse(x[0].version)))


def _registry_version(digest: str | None, assigned: semver.Version,
                      state: State) -> tuple[semver.Version | None, str | None]:
    """(release the registry's ``digest`` belongs to, the digest): the ledger's own assignment when
    the digests agree, else the highest release with that digest, else None (a foreign digest)."""
    if digest is None or state.releases.get(assigned) == digest:
        return (assigned if digest else None), digest
    same = [v for v, d in state.releases.items() if d == digest]
    return (max(same) if same else None), digest


def show(settings: Settings, version: str) -> list[tuple[Record, list[str], list[Record]]]:
    """Release ``version`` (``1.4.0`` or ``1.4.0-cpu``) per variant: (record, tags, its history).

    Tags as in :func:`list_releases` (as the registry has them; missing ones marked).

    Raises:
        ConfigError: invalid version, or no such release.
    """
    wanted_variant = None
    if (
        "-" in version
    ):  # 1.4.0-cpu names a variant; 1.5.0-rc.1 alone is a pre-release of any variant
        with contextlib.suppress(ConfigError):
            parsed, wanted_variant = split_release_tag(settings, version)
            version = str(parsed)
    v = parse_version(version)
    rows = _rows(settings, wanted_variant, v)
    if not rows:
        raise ConfigError(
            f"no release {version}" + (f"-{wanted_variant}" if wanted_variant else ""),
            "see: invoke release.list",
        )
    return rows


def evidence_of(settings: Settings, target: str) -> tuple[Reference, list[registry_store.Run]]:
    """The attestations of ``target``: ``host/repo@sha256:…``, an image by tag (``host/repo:tag``,
    resolved to its digest), or a release (``1.4.0-cpu``) looked up in the release repository.
    Returns the image reference (by digest) and its runs, newest last.

    Raises:
        ConfigError: bad reference, unknown release, or a local image ID where a manifest
            digest belongs. SigningKeyError: no trusted keys.
        NotFoundError: no such tag, repository or manifest. RegistryError: the registry failed.
    """
    if "@" in target or target.startswith("sha256:"):  # a bare digest is named as one
        from paddlecd import engine
        from paddlecd.registry.client import client_for, image_id_error

        if target.startswith("sha256:"):  # trial 19: a local image ID was "a digest without
            pushed = engine.local_repo_digests(target)  # its repository", no more
            if pushed is not None and not any(p.endswith(f"@{target}") for p in pushed):
                named = image_id_error("", target, pushed)
                raise ConfigError(f"{target[:80]} is an image ID (the config blob's digest, "
                                  "docker inspect .Id), not a manifest digest", named.hint)
        ref = engine.refuse_image_id(parse_reference(target))
        # the image itself first (trial 19: a digest no registry holds was "no attestation",
        # hint "run invoke verify", which then failed on the 404)
        client_for(settings, ref.registry).resolve(ref.repository, str(ref.digest))
    elif "/" in target:  # an image by tag (repo:tag): resolved once, as verify does
        from paddlecd.registry.client import pin

        ref = pin(settings, target)
    else:
        try:  # the name alone: a broken Docker config met while resolving it is no naming slip
            split_release_tag(settings, target)
        except ConfigError as e:  # what else the target may be, where a digest or image will do
            raise ConfigError(e.cause, f"{e.hint}; or an image: host/repo@sha256:… or "  # never
                              "host/repo:tag") from e  # a bare sha256:… (a trial: refused)
        ref = parse_reference(find(settings, target).reference)
    return ref, registry_store.lookup(settings, ref)
