"""A digest's verify runs as the registry holds them, in every layout paddlecd writes or wrote.

The layouts (:mod:`paddlecd.registry.cosign`): Sigstore bundle referrers, the envelopes of cosign's
``sha256-<hex>.att`` tag, and the paddlecd v1 artifact (envelope, JUnit and log layers), which
verify does not write but images attested in it stay promotable. Each run found is verified
against the trusted keys or carries the problem that stopped it; a run found in several layouts
is one :class:`Run` naming each place, and the referrer with its JUnit XML and smoke log is
matched to it by the sha256 of the signed statement. Bundle referrers annotated with another
predicate type (push's SLSA provenance) are no verify runs: they are listed with each run, so a
promotion copies them along (:func:`paddlecd.verify.registry_store.copy`), and read by
:func:`paddlecd.image.provenance.find`.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from paddlecd.errors import AttestationError, SubjectError
from paddlecd.image.provenance import PREDICATE_TYPE as SLSA  # push's provenance
from paddlecd.registry import cosign, referrers
from paddlecd.registry.client import RegistryClient
from paddlecd.signing.bundle import BUNDLE_TYPE, from_bundle
from paddlecd.signing.dsse import Attestation
from paddlecd.signing.keys import TrustedKey
from paddlecd.verify.attestation import PREDICATE_TYPE, VerifiedAttestation, verify

ARTIFACT_TYPE = "application/vnd.paddlecd.attestation.v1+json"  # read, not written
ENVELOPE_TYPE = cosign.DSSE_TYPE
BYPRODUCTS_TYPE = "application/vnd.paddlecd.verify.byproducts.v1"
JUNIT_TYPE = "application/vnd.paddlecd.junit.v1+xml"
LOG_TYPE = "text/plain"
ENVELOPE_FILE, BUNDLE_FILE = "attestation.dsse.json", "attestation.sigstore.json"
# names the run a byproducts referrer belongs to: sha256 of the signed statement (the payload)
STATEMENT = "org.paddlecd.statement.sha256"
PROVENANCE = "provenance"
LAYOUT_NAMES = {BUNDLE_TYPE: "Sigstore bundle referrer", ARTIFACT_TYPE: "paddlecd v1 artifact",
                "att": "cosign .att tag", BYPRODUCTS_TYPE: "JUnit XML and smoke log",
                PROVENANCE: "SLSA provenance of the build"}


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


def statement_sha(att: Attestation) -> str:
    """sha256 hex of the signed statement (the envelope's decoded payload)."""
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

    def other_type(r: referrers.Referrer) -> bool:  # another statement than verify's
        return r.artifact_type == BUNDLE_TYPE and r.annotations.get(
            cosign.BUNDLE_PREDICATE, PREDICATE_TYPE) != PREDICATE_TYPE

    # a few runs at once: each is two round trips (manifest, bundle or envelope)
    found = client.each(one, [r for r in listed
                              if r.artifact_type in kinds and not other_type(r)]) + att
    byproducts = {r.annotations.get(STATEMENT): f"{client.registry}/{repository}@{r.digest}"
                  for r in listed if r.artifact_type == BYPRODUCTS_TYPE}
    about_image = [f"{client.registry}/{repository}@{r.digest}" for r in listed
                   if other_type(r) and r.annotations.get(cosign.BUNDLE_PREDICATE) == SLSA]
    return _merge(found, byproducts, about_image)


def _run(manifest: str, layout: str, where: str,
         read: Callable[[], tuple[Attestation, VerifiedAttestation]]) -> Run:
    try:
        att, verified = read()
    except AttestationError as e:
        return Run(manifest, problem=e, layouts=(LAYOUT_NAMES[layout],))
    signature = json.loads(att.envelope)["signatures"][0].get("sig", "")
    statement = statement_sha(att)
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


def _merge(found: list[Run], byproducts: Mapping[str | None, str],
           about_image: Sequence[str] = ()) -> list[Run]:
    """One :class:`Run` per signed run (the first layout found leads), with its byproducts and
    the image's provenance referrers (``about_image``)."""
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
    for i, run in enumerate(out):
        if run.verified and about_image:
            out[i] = dataclasses.replace(
                run, layouts=run.layouts + (LAYOUT_NAMES[PROVENANCE],) * len(about_image),
                verified=dataclasses.replace(run.verified,
                                             stored=run.verified.stored + tuple(about_image)))
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
