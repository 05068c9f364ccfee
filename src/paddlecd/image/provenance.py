"""Build provenance: how a pushed image was built, as a signed SLSA Provenance v1 referrer.

``push`` signs an in-toto Statement v1 about the pushed digest whose ``predicateType`` is
:data:`PREDICATE_TYPE` (https://slsa.dev/spec/v1.0/provenance): ``buildDefinition`` names the
build type, the external parameters (variant, Dockerfile path, build args: the base by digest,
the packages, the cache scope; credentials enter builds as BuildKit secrets only, so only the
secrets' ids appear) and the resolved dependencies (the git revision and whether the tree was
dirty, the base image's digest, the Dockerfile's sha256); ``runDetails`` names the builder and its
version and the build's start and finish. It is signed with verify's key
(:func:`paddlecd.signing.dsse.sign_statement`), put in a Sigstore bundle v0.3
(:func:`paddlecd.signing.bundle.to_bundle`) and pushed as a bundle referrer of the digest in
cosign's layout (:func:`paddlecd.registry.cosign.bundle_annotations`): sigstore-js and
``cosign verify-attestation --type slsaprovenance1`` read it. Promotion copies it with the
image's attestation (:func:`paddlecd.verify.stored.runs` lists it with each run);
``evidence.show`` verifies and shows it (:func:`find`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import AttestationError, ConfigError, SubjectError
from paddlecd.files import json_problem, read_regular, unique_keys
from paddlecd.registry import cosign, referrers
from paddlecd.registry.client import RegistryClient, client_for
from paddlecd.registry.reference import parse_reference
from paddlecd.signing import dsse, keys
from paddlecd.signing.bundle import BUNDLE_TYPE, from_bundle, to_bundle
from paddlecd.types import Statement

PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://paddlecd.dev/build/docker-buildkit/v1"
BUILDER_ID = "https://paddlecd.dev/builders/docker-buildkit"
PROVENANCE_FILE = "provenance.sigstore.json"


def statement(build: Mapping[str, Any], *, reference: str, digest: str) -> Statement:
    """The in-toto Statement (SLSA Provenance v1) of the build record ``build`` (what
    :func:`paddlecd.image.build.build` wrote) about the pushed ``digest`` of ``reference``.

    Raises:
        ConfigError: ``reference`` or ``digest`` is malformed.
    """
    from paddlecd import __version__
    from paddlecd.registry.reference import check_digest

    digest = check_digest(digest)
    base = parse_reference(str(build.get("base", "")))
    revision, source = build.get("revision"), build.get("source") or "unknown"
    dockerfile = build.get("dockerfile") or {}
    dependencies = [
        {"uri": f"git+{source}@{revision}", "digest": {"gitCommit": revision},
         "annotations": {"dirty": bool(build.get("dirty"))}},
        {"uri": f"docker-image://{base.name}", "name": "base",
         "digest": {"sha256": (base.digest or "")[7:]}},
        {"uri": f"file:{dockerfile.get('path')}", "name": "Dockerfile",
         "digest": {"sha256": dockerfile.get("sha256")}},
    ]
    return {
        "_type": dsse.STATEMENT_TYPE,
        "predicateType": PREDICATE_TYPE,
        "subject": [{"name": parse_reference(reference).name, "digest": {"sha256": digest[7:]}}],
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "variant": build.get("variant"), "dockerfile": dockerfile.get("path"),
                    "buildArgs": dict(build.get("build_args") or {}),
                    "tag": build.get("tag"),
                },
                "internalParameters": {"secrets": list(build.get("secrets") or ())},
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID,
                            "version": {"paddlecd": __version__,
                                        "builder": str(build.get("builder"))}},
                "metadata": {"invocationId": build.get("image_id"),
                             "startedOn": build.get("started"), "finishedOn": build.get("built")},
            },
        },
    }


def attach(settings: Settings, build: Mapping[str, Any], *, reference: str,
           digest: str) -> str:
    """Sign the provenance of ``build`` and push it as a bundle referrer of ``digest``; a push
    of the same build again finds the one it attached (by its predicate type and build time) and
    adds none (a trial: four pushes of one build left four identical provenances).

    Returns:
        ``host/repo@sha256:…`` of the referrer's manifest.

    Raises:
        SigningKeyError: no usable signing key. RegistryError: the registry refused.
    """
    doc = statement(build, reference=reference, digest=digest)
    signed = dsse.sign_statement(doc, keys.signer(settings))
    bundle = to_bundle(signed)
    ref = parse_reference(reference)
    client = client_for(settings, ref.registry)
    created = str(build.get("built", ""))
    for known in referrers.referrers(client, ref.repository, digest, BUNDLE_TYPE):
        if (known.annotations.get(cosign.BUNDLE_PREDICATE) == PREDICATE_TYPE
                and known.annotations.get(cosign.CREATED) == created
                and _signed_alike(client, ref.repository, known.digest, signed)):
            return f"{ref.name}@{known.digest}"  # this build's, from an earlier push of it
    subject = client.resolve(ref.repository, digest)
    pushed = referrers.push(
        client, ref.repository, subject, artifact_type=BUNDLE_TYPE,
        layers=[referrers.Layer(BUNDLE_TYPE, bundle, PROVENANCE_FILE)],
        annotations=cosign.bundle_annotations(PREDICATE_TYPE, created),
    )
    return f"{ref.name}@{pushed.digest}"


def _signed_alike(client: RegistryClient, repository: str, digest: str,
                  signed: dsse.Attestation) -> bool:
    """Whether the provenance referrer ``digest`` was signed by the key that signed ``signed``:
    only then is it this push's (a trial: a push with the trusted key reused the provenance an
    untrusted key had attached, exit 0, and no trusted one was ever attached). Unreadable: no."""
    try:
        there = _bundle_of(client, repository, digest, digest)
    except AttestationError:
        return False
    return bool(there.keyids) and set(there.keyids) == set(signed.keyids)


def _bundle_of(client: RegistryClient, repository: str, digest: str,
               where: str) -> dsse.Attestation:
    """The one Sigstore bundle of the provenance referrer ``digest`` (not yet verified).

    Raises:
        AttestationError: the referrer holds other layers than one bundle, or no bundle.
        RegistryError: the registry failed.
    """
    layers = client.get_manifest(repository, digest).json().get("layers") or []
    if [x.get("mediaType") for x in layers] != [BUNDLE_TYPE]:
        raise SubjectError(f"{where} has {len(layers)} layers, not one Sigstore bundle",
                           "it was not written by paddlecd push")
    return from_bundle(referrers.read_blob(client, repository, layers[0]["digest"]), where)


@dataclass(frozen=True)
class Provenance:
    """One provenance referrer of a digest: where it is, and either its verified ``predicate``
    (with the trusted key that signed it) or the ``problem`` that stopped it."""

    location: str
    predicate: dict[str, Any] | None = None
    keyid: str = ""
    key_source: str = ""
    problem: AttestationError | None = None

    def lines(self) -> list[str]:
        """The build for a reader: source revision, base, Dockerfile, builder, times."""
        if self.problem or self.predicate is None:
            cause = self.problem.cause if self.problem else "unreadable"
            return [f"provenance {self.location}: REJECTED: {cause}"]
        build = self.predicate.get("buildDefinition") or {}
        run = self.predicate.get("runDetails") or {}
        deps = {d.get("name") or "source": d for d in build.get("resolvedDependencies") or []}
        source = deps.get("source") or {}
        args = (build.get("externalParameters") or {}).get("buildArgs") or {}
        meta, builder = run.get("metadata") or {}, run.get("builder") or {}
        return [
            f"provenance {self.location} (SLSA v1, verified)",
            f"  source:     {source.get('uri')} "
            f"(dirty: {'yes' if (source.get('annotations') or {}).get('dirty') else 'no'})",
            f"  base:       {(deps.get('base') or {}).get('uri')}@sha256:"
            f"{((deps.get('base') or {}).get('digest') or {}).get('sha256')}",
            f"  dockerfile: {(deps.get('Dockerfile') or {}).get('uri')} sha256:"
            f"{((deps.get('Dockerfile') or {}).get('digest') or {}).get('sha256', '')[:12]}",
            f"  build args: {', '.join(sorted(args)) or '-'}",
            f"  builder:    {(builder.get('version') or {}).get('builder')}",
            f"  built:      {meta.get('startedOn')} → {meta.get('finishedOn')}",
            f"  key:        {self.keyid} trusted via {self.key_source}",
        ]

    def to_json(self) -> dict[str, Any]:
        """``{"location", "predicate", "keyid", "key_source", "problem"}``."""
        return {"location": self.location, "predicate": self.predicate, "keyid": self.keyid,
                "key_source": self.key_source,
                "problem": self.problem.cause if self.problem else None}


def is_provenance(ref: referrers.Referrer) -> bool:
    """True for a bundle referrer annotated as SLSA provenance (a hint for listing; its
    statement's own type is checked when it is read)."""
    return (ref.artifact_type == BUNDLE_TYPE
            and ref.annotations.get(cosign.BUNDLE_PREDICATE) == PREDICATE_TYPE)


def find(client: RegistryClient, repository: str, digest: str,
         trusted: Sequence[keys.TrustedKey]) -> list[Provenance]:
    """Every provenance referrer of ``digest`` in ``repository``, each verified (signature by a
    trusted key, subject = ``digest``, predicate type :data:`PREDICATE_TYPE`) or with its problem.

    Raises:
        RegistryError: the registry failed.
    """
    def one(c: RegistryClient, ref: referrers.Referrer) -> Provenance:
        where = f"{c.registry}/{repository}@{ref.digest}"
        try:
            att = _bundle_of(c, repository, ref.digest, where)
            done = dsse.check(att, trusted, digest, predicate_type=PREDICATE_TYPE,
                              other_type_hint="it was not written by paddlecd push")
        except AttestationError as e:
            return Provenance(where, problem=e)
        return Provenance(where, done.predicate, done.keyid, done.key_source)

    listed = [r for r in referrers.referrers(client, repository, digest) if is_provenance(r)]
    return client.each(one, listed)


def read_build(settings: Settings, variant: str) -> dict[str, Any]:
    """The build record of ``variant`` (``<state>/builds/<variant>.json``), as build wrote it.

    Raises:
        ConfigError: not JSON, not an object, or without the ``tag`` and ``base`` strings push
            and the provenance read; each names the file (a trial: push gave JSONDecodeError,
            TypeError or KeyError tracebacks for a broken record).
    """
    path = settings.state / "builds" / f"{variant}.json"
    again = f"build again: invoke build --variant {variant}"
    try:  # a folder or a named pipe is named, never opened (a trial: push hung on a FIFO)
        doc = json.loads(read_regular(path, "build record"), object_pairs_hook=unique_keys)
    except ValueError as e:
        raise ConfigError(f"{path}: {json_problem(e)}", again) from e
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: not a build record (a JSON object)", again)
    for key in ("tag", "base"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise ConfigError(f"{path}: '{key}' is missing or not a string", again)
    return doc
