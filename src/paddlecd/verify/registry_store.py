"""Attestations in the registry: verify publishes one per run; promotion finds, checks, copies them.

A run's signed attestation is written in the layouts ``verify.attestation_layouts`` names
(:mod:`paddlecd.registry.cosign`): a Sigstore bundle referrer of the image (cosign v3, Kyverno
``SigstoreBundle``, sigstore-js) and the envelope appended to cosign's ``sha256-<hex>.att`` tag
(cosign, Kyverno ``Cosign``, policy-controller). Its JUnit XML and smoke log, named by sha256 in
the signed predicate, go into a referrer of their own (readers of a bundle referrer require
exactly one layer). Finding them in every layout, the paddlecd v1 artifact of images attested
before included, is :mod:`paddlecd.verify.stored`. None is ever replaced, so a failing run cannot
be hidden by a passing one (:func:`paddlecd.verify.attestation.choose`: the newest run decides).
The local evidence file under the state folder stays as a cache for the machine that ran verify;
promotion reads the registry.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from paddlecd.config import Settings, attestation_layouts
from paddlecd.errors import AttestationError, SigningKeyError
from paddlecd.registry import cosign, referrers
from paddlecd.registry.client import RegistryClient, client_for
from paddlecd.registry.reference import Reference, parse_reference
from paddlecd.signing import keys
from paddlecd.signing.bundle import BUNDLE_TYPE, from_bundle, to_bundle
from paddlecd.signing.dsse import Attestation
from paddlecd.verify.attestation import (
    PREDICATE_TYPE,
    VerifiedAttestation,
    _record,
    choose,
    sign,
)
from paddlecd.verify.stored import (  # noqa: F401 - the layouts' names, re-exported
    ARTIFACT_TYPE,
    BUNDLE_FILE,
    BYPRODUCTS_TYPE,
    ENVELOPE_FILE,
    ENVELOPE_TYPE,
    JUNIT_TYPE,
    LAYOUT_NAMES,
    LOG_TYPE,
    STATEMENT,
    Run,
    runs,
    statement_sha,
)

# What makes an attestation check refuse a promotion (``--force --reason`` overrides any of them).
REFUSALS = (AttestationError, SigningKeyError)


def publish(settings: Settings, evidence: Mapping[str, Any] | Any, out_dir: Path) -> Attestation:
    """Sign ``evidence`` with the configured key and push it about its image, in the layouts of
    ``verify.attestation_layouts``, after a referrer holding its JUnit XML and smoke log.

    Reads ``out_dir/junit.xml`` and ``out_dir/smoke.log`` (their sha256 signed) and writes local
    copies of the envelope and the bundle to ``out_dir/attestation.{dsse,sigstore}.json``.

    Returns:
        the :class:`Attestation`, ``location`` = where the first layout holds it
        (``host/repo@sha256:…`` of the bundle referrer, or the ``.att`` tag's manifest).

    Raises:
        SigningKeyError: no usable signing key. ConfigError: a bad layout setting.
        RegistryError: the registry refused a blob or a manifest.
    """
    record = _record(evidence)
    ref = parse_reference(record["reference"])
    layouts = attestation_layouts(settings)
    junit, log = (_read(out_dir / name) for name in ("junit.xml", "smoke.log"))
    att = sign(record, keys.signer(settings), junit=junit, log=log)
    bundle, created = to_bundle(att), str(record.get("created", ""))
    client = client_for(settings, ref.registry)
    subject = client.resolve(ref.repository, ref.identifier)
    referrers.push(
        client, ref.repository, subject, artifact_type=BYPRODUCTS_TYPE,
        layers=[referrers.Layer(JUNIT_TYPE, junit, "junit.xml"),
                referrers.Layer(LOG_TYPE, log, "smoke.log")],
        annotations={cosign.CREATED: created, STATEMENT: statement_sha(att)},
    )
    stored = []
    if "bundle" in layouts:
        pushed = referrers.push(
            client, ref.repository, subject, artifact_type=BUNDLE_TYPE,
            layers=[referrers.Layer(BUNDLE_TYPE, bundle, BUNDLE_FILE)],
            annotations=cosign.bundle_annotations(PREDICATE_TYPE, created),
        )
        stored.append(f"{ref.name}@{pushed.digest}")
    if "att" in layouts:
        known = _envelopes(client, ref.repository, subject.digest, att) if stored else []
        stored.append(cosign.write_att(client, ref.repository, subject.digest,
                                       [att.envelope, *known], PREDICATE_TYPE))
    (out_dir / ENVELOPE_FILE).write_bytes(att.envelope)
    (out_dir / BUNDLE_FILE).write_bytes(bundle)
    return dataclasses.replace(att, location=stored[0])


def _envelopes(client: RegistryClient, repository: str, digest: str,
               att: Attestation) -> list[bytes]:
    """The envelopes of ``digest``'s other verify-attestation bundle referrers signed by the key of
    ``att``: what the ``.att`` tag should list besides ``att``
    (:func:`paddlecd.registry.cosign.write_att`). A referrer that does not parse is left out
    (promotion reports it from the referrer), and so is one of another predicate type: the
    ``.att`` layers carry the verify predicate's ``predicateType`` annotation, and push's SLSA
    provenance listed there was read back by evidence.show as a rejected verify run (a trial)."""
    def read(c: RegistryClient, ref: referrers.Referrer) -> bytes | None:
        layers = c.get_manifest(repository, ref.digest).json().get("layers") or []
        try:
            other = from_bundle(referrers.read_blob(c, repository, layers[0]["digest"]))
        except (AttestationError, IndexError, KeyError):
            return None
        if other.statement.get("predicateType") != PREDICATE_TYPE:
            return None  # another kind of bundle about this image (push's SLSA provenance)
        return other.envelope if other.hint in att.keyids else None

    listed = referrers.referrers(client, repository, digest, BUNDLE_TYPE)
    return [e for e in client.each(read, listed) if e and e != att.envelope]


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def check(
    settings: Settings, client: RegistryClient, repository: str, digest: str, variant: str | None
) -> VerifiedAttestation:
    """The attestation that allows promoting ``digest`` from ``repository``, by the rule of
    :func:`~paddlecd.verify.attestation.choose` over every run signed by a trusted key.

    Raises:
        SigningKeyError: no trusted keys. AttestationError subclasses: none found, none verifies
            (the
            newest problem is raised), or the newest verified run does not allow a promotion.
        RegistryError: the registry failed.
    """
    found = runs(client, repository, digest, keys.trusted(settings))
    verified = [r.verified for r in found if r.verified]
    problems = [r.problem for r in found if r.problem]
    if not verified and problems:
        raise problems[-1]
    return choose(
        verified,
        digest=digest,
        variant=variant,
        max_age_hours=settings.release.evidence_max_age_hours,
        require_nodes=settings.release.require_nodes,
    )


def copy(
    dst: RegistryClient,
    src: RegistryClient,
    from_repo: str,
    to_repo: str,
    attestation: VerifiedAttestation,
    *,
    ready: Callable[[], None] = lambda: None,
) -> Counter[str]:
    """Copy every place ``attestation`` is stored (its referrers, manifests and blobs, and its
    envelopes in the ``.att`` tag; the image's provenance referrers are listed with it,
    :func:`paddlecd.verify.stored.runs`) into ``to_repo`` of ``dst``, listed there as the
    candidate lists them; the image must be there once ``ready`` returns
    (:func:`paddlecd.registry.referrers.copy_all`). A manifest verified from ``src`` is not fetched
    again (the client keeps what it read by digest).

    Returns:
        counts per outcome (``present``/``mounted``/``copied``).
    """
    def one(group: list[str]) -> tuple[Counter[str], RegistryClient, RegistryClient]:
        d, s, counts = dst.twin(), src.twin(), Counter[str]()
        listed = []
        for where in group:
            name, manifest_digest = where.rsplit("@", 1)
            if name.endswith(".att"):
                counts += cosign.copy_att(d, s, from_repo, to_repo, attestation.digest,
                                          manifest_digest, ready=ready)
            else:
                listed.append(manifest_digest)
        if listed:
            counts += referrers.copy_all(d, s, from_repo, to_repo, listed, ready=ready)
        return counts, d, s

    # The .att tag and the referrers at once, with clients of their own (a copy uses
    # client.each itself), so they add no round trips to a promotion. The referrers one after
    # the other, in the order verify wrote them (JUnit/log first), and then one write of the
    # sha256-<hex> index listing them all (cosign reads it; two writers at once could drop an
    # entry, so there is one writer).
    places = attestation.stored or (str(attestation.location),)
    groups = [g for g in ([p for p in places if p.rsplit("@", 1)[0].endswith(".att")],
                          [p for p in reversed(places) if not p.rsplit("@", 1)[0].endswith(".att")])
              if g]
    with ThreadPoolExecutor(len(groups)) as pool:
        done = list(pool.map(one, groups))
    counts: Counter[str] = Counter()
    for tally, d, s in done:
        counts += tally
        dst.stats.update(d.stats)
        src.stats.update(s.stats)
    return counts


def lookup(settings: Settings, ref: Reference) -> list[Run]:
    """Every attestation of the image ``ref`` (``host/repo@sha256:…``, or a tag resolved once).

    A release name (``1.4.0-cpu``) is resolved by :func:`paddlecd.release.query.evidence_of`, which
    calls this: verify never depends on the release room.

    Raises:
        SigningKeyError: no trusted keys. RegistryError: the registry failed.
    """
    client = client_for(settings, ref.registry)
    return runs(
        client,
        ref.repository,
        ref.digest or client.resolve(ref.repository, ref.identifier).digest,
        keys.trusted(settings),
    )
