"""Attestations in the registry: verify publishes one per run; promotion finds, checks, copies them.

Each run's attestation is an OCI artifact (:mod:`paddlecd.registry.referrers`) whose ``subject`` is
the image manifest, with three layers: the DSSE envelope, the JUnit XML and the smoke log. A later
run adds another artifact; none is ever replaced, so a failing run cannot be hidden by a passing one
(:func:`paddlecd.verify.attestation.choose`: the newest run decides). The local evidence file under
the state folder stays as a cache for the machine that ran verify; promotion reads the registry.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd.config import Settings
from paddlecd.errors import AttestationError, SigningKeyError, SubjectError
from paddlecd.registry import referrers
from paddlecd.registry.client import RegistryClient, client_for
from paddlecd.registry.reference import Reference, parse_reference
from paddlecd.verify import keys
from paddlecd.verify.attestation import (
    Attestation,
    TrustedKey,
    VerifiedAttestation,
    _record,
    choose,
    sign,
    verify,
)

ARTIFACT_TYPE = "application/vnd.paddlecd.attestation.v1+json"
ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
JUNIT_TYPE = "application/vnd.paddlecd.junit.v1+xml"
LOG_TYPE = "text/plain"
ENVELOPE_FILE = "attestation.dsse.json"
# What makes an attestation check refuse a promotion (``--force --reason`` overrides any of them).
REFUSALS = (AttestationError, SigningKeyError)


@dataclass(frozen=True)
class Run:
    """One attestation found for a digest: its artifact ``manifest`` digest, and either the
    ``verified`` attestation or the ``problem`` that stopped it (never both)."""

    manifest: str
    verified: VerifiedAttestation | None = None
    problem: AttestationError | None = None


def publish(settings: Settings, evidence: Mapping[str, Any] | Any, out_dir: Path) -> Attestation:
    """Sign ``evidence`` with the configured key and push it as an artifact about its image.

    Reads ``out_dir/junit.xml`` and ``out_dir/smoke.log`` (their layers, their sha256 signed) and
    writes
    the envelope to ``out_dir/attestation.dsse.json`` (a local copy).

    Returns:
        the :class:`Attestation`, ``location`` = ``host/repo@sha256:…`` of its artifact manifest.

    Raises:
        SigningKeyError: no usable signing key. RegistryError: the registry refused the artifact.
    """
    record = _record(evidence)
    ref = parse_reference(record["reference"])
    junit, log = (_read(out_dir / name) for name in ("junit.xml", "smoke.log"))
    att = sign(record, keys.signer(settings), junit=junit, log=log)
    client = client_for(settings, ref.registry)
    subject = client.resolve(ref.repository, ref.identifier)
    layers = [
        referrers.Layer(ENVELOPE_TYPE, att.envelope, ENVELOPE_FILE),
        referrers.Layer(JUNIT_TYPE, junit, "junit.xml"),
        referrers.Layer(LOG_TYPE, log, "smoke.log"),
    ]
    annotations = {
        "org.opencontainers.image.created": str(record.get("created", "")),
        "org.paddlecd.attestation.passed": str(bool(record.get("passed"))).lower(),
        "org.paddlecd.attestation.keyid": att.keyids[0],
    }
    pushed = referrers.push(
        client,
        ref.repository,
        subject,
        artifact_type=ARTIFACT_TYPE,
        layers=layers,
        annotations=annotations,
    )
    (out_dir / ENVELOPE_FILE).write_bytes(att.envelope)
    return dataclasses.replace(att, location=f"{ref.name}@{pushed.digest}")


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def runs(
    client: RegistryClient, repository: str, digest: str, trusted: list[TrustedKey]
) -> list[Run]:
    """Every attestation of ``digest`` in ``repository``, each verified or with its problem.

    Raises:
        RegistryError: the registry failed.
    """
    def run(c: RegistryClient, ref: referrers.Referrer) -> Run:
        try:
            return Run(ref.digest, _verified(c, repository, digest, ref.digest, trusted))
        except AttestationError as e:
            return Run(ref.digest, problem=e)

    # a few runs at once: each is two round trips (manifest, envelope)
    return client.each(run, referrers.referrers(client, repository, digest, ARTIFACT_TYPE))


def _verified(
    client: RegistryClient,
    repository: str,
    digest: str,
    manifest_digest: str,
    trusted: list[TrustedKey],
) -> VerifiedAttestation:
    location = f"{client.registry}/{repository}@{manifest_digest}"
    doc = client.get_manifest(repository, manifest_digest).json()
    layers = {layer.get("mediaType"): layer["digest"] for layer in doc.get("layers", [])}
    if (doc.get("subject") or {}).get("digest") != digest or ENVELOPE_TYPE not in layers:
        raise SubjectError(
            f"{location} is no attestation artifact of {digest}",
            "it was not written by paddlecd verify; ignore or delete it",
        )
    att = Attestation.from_json(
        referrers.read_blob(client, repository, layers[ENVELOPE_TYPE]), location
    )
    verified = verify(att, trusted, digest)
    signed = verified.predicate.get("byproducts") or {}
    for name, media_type in (("junit.xml", JUNIT_TYPE), ("smoke.log", LOG_TYPE)):
        if f"sha256:{(signed.get(name) or {}).get('sha256')}" != layers.get(media_type):
            raise SubjectError(
                f"{location}: its {name} is not the one the signed statement names",
                "the artifact was re-assembled; re-run invoke verify",
            )
    return verified


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
    """Copy the artifact of ``attestation`` (manifest and its blobs) into ``to_repo`` of ``dst``,
    listed there as a referrer of the image; the image must be there once ``ready`` returns
    (:func:`paddlecd.registry.referrers.copy`). The manifest verified from ``src`` is not fetched
    again (the client keeps what it read by digest).

    Returns:
        counts per outcome (``present``/``mounted``/``copied``).
    """
    manifest_digest = str(attestation.location).rsplit("@", 1)[1]
    return referrers.copy(dst, src, from_repo, to_repo, manifest_digest, ready=ready)


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


def describe(run: Run) -> list[str]:
    """``run`` as lines for a reader: who verified what, where, when, with which key, figures."""
    if run.problem:
        return [f"attestation {run.manifest}: REJECTED: {run.problem.cause}"]
    v = run.verified
    assert v
    p, host = v.predicate, v.predicate.get("host") or {}
    checks = p.get("checks", [])
    lines = [
        f"attestation {run.manifest} ({'PASSED' if v.passed else 'FAILED'})",
        f"  subject:  {v.name}@{v.digest} "
        f"(variant {p.get('variant')}, revision {p.get('revision')})",
        f"  verified: {p.get('created')} by {(p.get('verifier') or {}).get('who')} on "
        f"{host.get('hostname')} (runner {host.get('runner') or '-'}, {host.get('arch')})",
        f"  key:      {v.keyid[:16]}… trusted via {v.key_source}",
        f"  stored:   {v.location}",
        "  versions: "
        + ", ".join(f"{k} {val}" for k, val in (p.get("versions") or {}).items() if val),
        f"  checks:   {_tally(checks)}" + (f"; failed: {', '.join(v.failed)}" if v.failed else ""),
    ]
    lines += [
        f"    {c['name']}: {figures}"
        for c in checks
        if (figures := _figures(c.get("metrics") or {}))
    ]
    return lines + _charts(p)


def _tally(checks: list[Mapping[str, Any]]) -> str:
    """``8/10 passed, 2 skipped``: a skipped check counts as passed (evidence.Check) but is said
    apart, so a GPU check skipped on a CPU image is not read as run."""
    skipped = sum(c.get("skipped") is True for c in checks)
    ran = sum(c.get("passed") is True for c in checks) - skipped
    return f"{ran}/{len(checks)} passed" + (f", {skipped} skipped" if skipped else "")


def _charts(predicate: Mapping[str, Any]) -> list[str]:
    """The busbw and loss charts of a signed run (issue 14); none when the record does not parse."""
    from paddlecd.errors import VerifyError
    from paddlecd.verify import charts, evidence

    try:
        record = evidence.Evidence.from_json(dict(predicate), source="attestation predicate")
    except VerifyError:
        return []
    return [line for chart in charts.charts(record) for line in ["", *chart.splitlines()]]


def _figures(metrics: Mapping[str, Any], limit: int = 4) -> str:
    scalars = [
        (k, val)
        for k, val in metrics.items()
        if isinstance(val, (int, float)) and not isinstance(val, bool)
    ]
    return ", ".join(
        f"{k}={val:.4g}" if isinstance(val, float) else f"{k}={val}" for k, val in scalars[:limit]
    )
