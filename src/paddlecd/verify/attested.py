"""Attestations in the registry: verify publishes one per run; promotion finds, checks, copies them.

A run's signed attestation is written in the layouts ``verify.attestation_layouts`` names
(:mod:`paddlecd.registry.cosign`): a Sigstore bundle referrer of the image (cosign v3, Kyverno
``SigstoreBundle``, sigstore-js) and the envelope appended to cosign's ``sha256-<hex>.att`` tag
(cosign, Kyverno ``Cosign``, policy-controller). Its JUnit XML and smoke log, named by sha256 in
the signed predicate, go into a referrer of their own (readers of a bundle referrer require
exactly one layer). The paddlecd v1 artifact (envelope, JUnit and log layers) is still read, so
images attested in it stay promotable. A run found in several layouts is one run, stored in each.
None is ever replaced, so a failing run cannot be hidden by a passing one
(:func:`paddlecd.verify.attestation.choose`: the newest run decides). The local evidence file
under the state folder stays as a cache for the machine that ran verify; promotion reads the
registry.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd.config import Settings, attestation_layouts
from paddlecd.errors import AttestationError, SigningKeyError, SubjectError
from paddlecd.registry import cosign, referrers
from paddlecd.registry.client import RegistryClient, client_for
from paddlecd.registry.reference import Reference, parse_reference
from paddlecd.verify import keys
from paddlecd.verify.attestation import (
    PREDICATE_TYPE,
    Attestation,
    TrustedKey,
    VerifiedAttestation,
    _record,
    choose,
    sign,
    verify,
)
from paddlecd.verify.bundle import BUNDLE_TYPE, from_bundle, to_bundle

ARTIFACT_TYPE = "application/vnd.paddlecd.attestation.v1+json"  # read, no longer written
ENVELOPE_TYPE = cosign.DSSE_TYPE
BYPRODUCTS_TYPE = "application/vnd.paddlecd.verify.byproducts.v1"
JUNIT_TYPE = "application/vnd.paddlecd.junit.v1+xml"
LOG_TYPE = "text/plain"
ENVELOPE_FILE, BUNDLE_FILE = "attestation.dsse.json", "attestation.sigstore.json"
# names the run a byproducts referrer belongs to: sha256 of the signed statement (the payload)
STATEMENT = "org.paddlecd.statement.sha256"
LAYOUT_NAMES = {BUNDLE_TYPE: "Sigstore bundle referrer", ARTIFACT_TYPE: "paddlecd v1 artifact",
                "att": "cosign .att tag", BYPRODUCTS_TYPE: "JUnit XML and smoke log"}
# What makes an attestation check refuse a promotion (``--force --reason`` overrides any of them).
REFUSALS = (AttestationError, SigningKeyError)


@dataclass(frozen=True)
class Run:
    """One verify run found for a digest: the ``manifest`` digest first holding it, and either the
    ``verified`` attestation or the ``problem`` that stopped it (never both). ``layouts`` names
    the layout of each of ``verified.stored``; ``statement`` is the sha256 of the signed payload
    and ``key`` adds the signature (one run in several layouts has one key)."""

    manifest: str
    verified: VerifiedAttestation | None = None
    problem: AttestationError | None = None
    layouts: tuple[str, ...] = ()
    statement: str = ""
    key: str = ""


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
        annotations={cosign.CREATED: created, STATEMENT: _statement_sha(att)},
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
        stored.append(cosign.write_att(client, ref.repository, subject.digest, att.envelope,
                                       PREDICATE_TYPE))
    (out_dir / ENVELOPE_FILE).write_bytes(att.envelope)
    (out_dir / BUNDLE_FILE).write_bytes(bundle)
    return dataclasses.replace(att, location=stored[0])


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _statement_sha(att: Attestation) -> str:
    return hashlib.sha256(base64.b64decode(json.loads(att.envelope)["payload"])).hexdigest()


def runs(
    client: RegistryClient, repository: str, digest: str, trusted: list[TrustedKey]
) -> list[Run]:
    """Every verify run of ``digest`` in ``repository`` in any layout, each verified or with its
    problem; a run stored in several layouts is one :class:`Run` listing each.

    Raises:
        RegistryError: the registry failed.
    """
    # the .att tag is read meanwhile by a twin of its own: the listing uses client.each itself
    other = client.twin()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_att_runs, other, repository, digest, trusted)
        listed = referrers.referrers(client, repository, digest)
        att = pending.result()
    client.stats.update(other.stats)
    kinds = (BUNDLE_TYPE, ARTIFACT_TYPE)

    def one(c: RegistryClient, ref: referrers.Referrer) -> Run:
        return _run(ref.digest, ref.artifact_type, f"{c.registry}/{repository}@{ref.digest}",
                    lambda: _from_referrer(c, repository, digest, ref, trusted))

    # a few runs at once: each is two round trips (manifest, bundle or envelope)
    found = client.each(one, [r for r in listed if r.artifact_type in kinds]) + att
    byproducts = {r.annotations.get(STATEMENT): f"{client.registry}/{repository}@{r.digest}"
                  for r in listed if r.artifact_type == BYPRODUCTS_TYPE}
    return _merge(found, byproducts)


def _run(manifest: str, layout: str, where: str,
         read: Callable[[], tuple[Attestation, VerifiedAttestation]]) -> Run:
    try:
        att, verified = read()
    except AttestationError as e:
        return Run(manifest, problem=e, layouts=(LAYOUT_NAMES[layout],))
    signature = json.loads(att.envelope)["signatures"][0].get("sig", "")
    statement = _statement_sha(att)
    return Run(manifest, dataclasses.replace(verified, location=where, stored=(where,)),
               layouts=(LAYOUT_NAMES[layout],), statement=statement, key=statement + signature)


def _att_runs(client: RegistryClient, repository: str, digest: str,
              trusted: list[TrustedKey]) -> list[Run]:
    """The runs in ``digest``'s cosign ``.att`` tag (none when there is no tag)."""
    try:
        manifest, layers = cosign.read_att(client, repository, digest)
    except AttestationError as e:
        return [Run(cosign.att_tag(digest), problem=e, layouts=(LAYOUT_NAMES["att"],))]

    def read(layer: cosign.AttLayer) -> tuple[Attestation, VerifiedAttestation]:
        att = Attestation.from_json(layer.data, layer.location)
        return att, verify(att, trusted, digest)

    return [_run(manifest, "att", x.location, lambda x=x: read(x)) for x in layers]


def _merge(found: list[Run], byproducts: Mapping[str | None, str]) -> list[Run]:
    """One :class:`Run` per signed run (the first layout found leads), with its byproducts."""
    out: list[Run] = []
    seen: dict[str, int] = {}
    for run in found:
        if not run.verified or run.key not in seen:
            if run.verified:
                seen[run.key] = len(out)
            out.append(run)
            continue
        first = out[seen[run.key]]
        assert first.verified
        out[seen[run.key]] = dataclasses.replace(
            first, layouts=first.layouts + run.layouts,
            verified=dataclasses.replace(first.verified,
                                         stored=first.verified.stored + run.verified.stored))
    for i, run in enumerate(out):
        if run.verified and run.statement in byproducts:
            out[i] = dataclasses.replace(
                run, layouts=run.layouts + (LAYOUT_NAMES[BYPRODUCTS_TYPE],),
                verified=dataclasses.replace(
                    run.verified, stored=run.verified.stored + (byproducts[run.statement],)))
    return out


def _from_referrer(client: RegistryClient, repository: str, digest: str,
                   ref: referrers.Referrer, trusted: list[TrustedKey],
                   ) -> tuple[Attestation, VerifiedAttestation]:
    """A bundle referrer (exactly one bundle layer, as cosign requires) or a paddlecd v1
    artifact (the envelope and the JUnit/log layers its statement names), verified."""
    location = f"{client.registry}/{repository}@{ref.digest}"
    doc = client.get_manifest(repository, ref.digest).json()
    layers = doc.get("layers") or []
    if (doc.get("subject") or {}).get("digest") != digest:
        raise SubjectError(f"{location} is no attestation artifact of {digest}",
                           "it was not written by paddlecd verify; ignore or delete it")
    if ref.artifact_type == BUNDLE_TYPE:
        if [x.get("mediaType") for x in layers] != [BUNDLE_TYPE]:
            raise SubjectError(
                f"{location} has {len(layers)} layers, not exactly one Sigstore bundle",
                "cosign skips such a referrer; re-attest with invoke verify")
        att = from_bundle(referrers.read_blob(client, repository, layers[0]["digest"]), location)
        return att, verify(att, trusted, digest)
    by_type = {x.get("mediaType"): x["digest"] for x in layers}
    if ENVELOPE_TYPE not in by_type:
        raise SubjectError(f"{location} is no attestation artifact of {digest}",
                           "it was not written by paddlecd verify; ignore or delete it")
    att = Attestation.from_json(
        referrers.read_blob(client, repository, by_type[ENVELOPE_TYPE]), location)
    verified = verify(att, trusted, digest)
    signed = verified.predicate.get("byproducts") or {}
    for name, media_type in (("junit.xml", JUNIT_TYPE), ("smoke.log", LOG_TYPE)):
        if f"sha256:{(signed.get(name) or {}).get('sha256')}" != by_type.get(media_type):
            raise SubjectError(
                f"{location}: its {name} is not the one the signed statement names",
                "the artifact was re-assembled; re-run invoke verify",
            )
    return att, verified


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
    envelopes in the ``.att`` tag) into ``to_repo`` of ``dst``, listed there as the candidate
    lists them; the image must be there once ``ready`` returns
    (:func:`paddlecd.registry.referrers.copy`). A manifest verified from ``src`` is not fetched
    again (the client keeps what it read by digest).

    Returns:
        counts per outcome (``present``/``mounted``/``copied``).
    """
    def one(group: list[str]) -> tuple[Counter[str], RegistryClient, RegistryClient]:
        d, s, counts = dst.twin(), src.twin(), Counter[str]()
        for where in group:
            name, manifest_digest = where.rsplit("@", 1)
            if name.endswith(".att"):
                counts += cosign.copy_att(d, s, from_repo, to_repo, attestation.digest,
                                          manifest_digest, ready=ready)
            else:
                counts += referrers.copy(d, s, from_repo, to_repo, manifest_digest, ready=ready)
        return counts, d, s

    # The .att tag and the referrers at once, with clients of their own (a copy uses
    # client.each itself), so they add no round trips to a promotion. The referrers one after
    # the other, in the order verify wrote them (JUnit/log first): each adds itself to one
    # sha256-<hex> index, which cosign reads, and two writers at once could drop an entry.
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
