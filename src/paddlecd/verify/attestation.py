"""Attestations: verify's evidence as a signed in-toto Statement about the image digest.

What is signed: an in-toto Statement v1 (https://github.com/in-toto/attestation, ``spec/v1``) whose
``subject`` is the image (``name`` = repository, ``digest.sha256`` = the manifest digest), whose
``predicateType`` is :data:`PREDICATE_TYPE`, and whose ``predicate`` is what verify measured: the
checks with their metrics, versions, host facts, revision, run time and the sha256 of the JUnit XML
and the smoke log. It is wrapped in a DSSE envelope signed by securesystemslib
(:mod:`paddlecd.signing.dsse`: the envelope, its PAE and the signature checks are the library's).

:func:`verify` checks one envelope (signature by a trusted key, subject, predicate type);
:func:`choose` applies the promotion rule to every verified run of a digest: the newest run decides,
it must have passed every smoke module and be fresh. The registry side is
:mod:`paddlecd.verify.registry_store`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from securesystemslib.signer import Signer

from paddlecd.errors import (
    AttestedFailureError,
    NoAttestationError,
    VariantMismatchError,
)
from paddlecd.files import who
from paddlecd.signing import dsse
from paddlecd.signing.dsse import STATEMENT_TYPE, Attestation, sign_statement
from paddlecd.signing.keys import TrustedKey, keygen  # noqa: F401 - keygen re-exported for the task
from paddlecd.types import Statement
from paddlecd.verify.evidence import REQUIRED_CHECKS

PREDICATE_TYPE = "https://paddlecd.dev/attestations/verify/v1"
# Evidence fields that name files on the verifying machine: meaningless elsewhere, so not signed.
_LOCAL_FIELDS = ("junit", "model_dir", "schema")


def _record(evidence: Mapping[str, Any] | Any) -> dict[str, Any]:
    """Evidence as a dict: a mapping, or a record type with ``to_json()`` (bytes, str or dict)."""
    if isinstance(evidence, Mapping):
        return dict(evidence)
    data = evidence.to_json()
    return json.loads(data) if isinstance(data, (bytes, str)) else dict(data)


def host_facts(record: Mapping[str, Any]) -> dict[str, Any]:
    """Where verify ran: hostname, OS/arch, the CI runner, and GPU facts the checks recorded."""
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "os": platform.system().lower(),
        "arch": platform.machine(),
        "runner": os.environ.get("RUNNER_NAME"),
    }
    for check in record.get("checks", []):  # the environment module records the device it saw
        for key in ("gpu_name", "gpu_count", "device"):
            if key in (check.get("metrics") or {}):
                facts.setdefault(key, check["metrics"][key])
    return {**facts, **(record.get("host") or {})}


def statement(evidence: Mapping[str, Any] | Any, *, junit: bytes, log: bytes) -> Statement:
    """The in-toto Statement for an evidence record (``digest``, ``reference``, ``checks``, ...).

    Args:
        evidence: the record verify saved (a mapping, or an object with ``to_json()``).
        junit, log: the bytes of the run's JUnit XML and smoke log; only their sha256 is signed.

    Raises:
        ConfigError: the record's digest is not ``sha256:<64 hex>``.
    """
    from paddlecd.registry.reference import check_digest, parse_reference

    record = _record(evidence)
    digest = check_digest(record["digest"])
    predicate = {k: v for k, v in record.items() if k not in _LOCAL_FIELDS}
    predicate.update(
        host=host_facts(record),
        verifier=_verifier(),
        byproducts={
            "junit.xml": {"sha256": _sha(junit), "size": len(junit)},
            "smoke.log": {"sha256": _sha(log), "size": len(log)},
        },
    )
    return {
        "_type": STATEMENT_TYPE,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
        "subject": [
            {"name": parse_reference(record["reference"]).name, "digest": {"sha256": digest[7:]}}
        ],
    }


def _verifier() -> dict[str, Any]:
    from paddlecd import __version__

    return {
        "id": "paddlecd",
        "version": __version__,
        "who": who(),
        "run": os.environ.get("GITHUB_RUN_ID"),
        "workflow": os.environ.get("GITHUB_WORKFLOW"),
    }


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class VerifiedAttestation:
    """An attestation whose signature, subject and predicate type were checked.

    Attributes:
        digest: the image digest it is about. name: the subject's repository name.
        keyid, key_source: the trusted key that verified it and the file it came from.
        predicate: the signed predicate (``passed``, ``created``, ``checks``, ``versions``...).
        location: ``host/repo@sha256:…`` of the artifact manifest.
        stored: every place this run is stored (``location`` first): referrers as
            ``host/repo@sha256:…``, cosign's tag as ``host/repo:sha256-<hex>.att@sha256:…``.
    """

    digest: str
    name: str
    keyid: str
    key_source: str
    predicate: dict[str, Any] = field(repr=False)
    location: str | None = None
    stored: tuple[str, ...] = ()

    @property
    def created(self) -> str:
        """When verify finished (ISO-8601 UTC), as signed."""
        return str(self.predicate.get("created", ""))

    @property
    def passed(self) -> bool:
        """True when the signed run passed: ``passed`` is the boolean true in the predicate and in
        every check (checked by type: the string ``"false"`` is no pass)."""
        return self.predicate.get("passed") is True and not self.failed

    @property
    def failed(self) -> list[str]:
        """Names of the checks that did not pass (``passed`` anything but the boolean true)."""
        return [
            str(c.get("name"))
            for c in self.predicate.get("checks", [])
            if c.get("passed") is not True
        ]

    def age_hours(self, now: dt.datetime | None = None) -> float:
        """Hours since :attr:`created`."""
        created = dt.datetime.fromisoformat(self.created.replace("Z", "+00:00"))
        return ((now or dt.datetime.now(dt.timezone.utc)) - created).total_seconds() / 3600

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "digest": self.digest,
            "name": self.name,
            "keyid": self.keyid,
            "key_source": self.key_source,
            "predicate": self.predicate,
            "location": self.location,
            "stored": list(self.stored),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerifiedAttestation:
        """Inverse of :meth:`to_json`."""
        return cls(
            **{k: data[k] for k in ("digest", "name", "keyid", "key_source", "predicate")},
            location=data.get("location"),
            stored=tuple(data.get("stored") or ()),
        )


def sign(
    evidence: Mapping[str, Any] | Any, signer: Signer, *, junit: bytes, log: bytes
) -> Attestation:
    """Sign the :func:`statement` of ``evidence`` in a DSSE envelope with ``signer``."""
    return sign_statement(statement(evidence, junit=junit, log=log), signer)


def verify(att: Attestation, keys: Sequence[TrustedKey], digest: str, *,
           predicate_type: str = PREDICATE_TYPE) -> VerifiedAttestation:
    """Check ``att``: signed by one of ``keys``, about ``digest``, of ``predicate_type``
    (default :data:`PREDICATE_TYPE`, verify's; push's provenance is SLSA's), by
    :func:`paddlecd.signing.dsse.check`.

    Raises:
        SignatureError: the signature does not verify (a changed byte) or no trusted key signed it.
        SubjectError: the Statement is about another digest, or of another type.
    """
    signed = dsse.check(att, keys, digest, predicate_type=predicate_type, other_type_hint=(
        "only paddlecd verify attestations allow a promotion"
        if predicate_type == PREDICATE_TYPE else "it was not written by paddlecd push"))
    return VerifiedAttestation(
        digest=digest,
        name=signed.name,
        keyid=signed.keyid,
        key_source=signed.key_source,
        predicate=signed.predicate,
        location=att.location,
        stored=(att.location,) if att.location else (),
    )


def node_count(run: VerifiedAttestation) -> int:
    """Nodes a signed run spanned: the length of its ``nodes`` facts (1 when absent)."""
    return max(1, len(run.predicate.get("nodes") or ()))


def choose(
    runs: Sequence[VerifiedAttestation],
    *,
    digest: str,
    variant: str | None,
    max_age_hours: float,
    require_nodes: int = 1,
) -> VerifiedAttestation:
    """The promotion rule over every verified run of ``digest``: the newest run decides.

    Raises:
        NoAttestationError: no verified run. SubjectError: the run is of another variant.
        AttestedFailureError: the newest run failed (naming the older passing run, if any), lacks a
            smoke module of :data:`~paddlecd.verify.evidence.REQUIRED_CHECKS`, or is older than
            ``max_age_hours`` (``release.evidence_max_age_hours``); with ``require_nodes`` > 1
            (``release.require_nodes``) also when the newest multi-node run is missing,
            failed, spans fewer nodes or is stale. Multi-node runs hold only the collective checks,
            so the newest-run rule above is applied to the one-node runs and to them separately.
    """
    _require_nodes(
        [r for r in runs if node_count(r) > 1],
        digest=digest,
        nodes=require_nodes,
        max_age_hours=max_age_hours,
    )
    runs = [r for r in runs if node_count(r) == 1] or list(runs)
    if not runs:
        raise NoAttestationError(
            f"no attestation of {digest}", f"run: invoke verify --image <repo>@{digest}"
        )
    newest = _newest_passed(runs, digest=digest, variant=variant)
    _check_complete(newest, digest=digest, max_age_hours=max_age_hours)
    return newest


def _newest_passed(runs: Sequence[VerifiedAttestation], *, digest: str,
                   variant: str | None) -> VerifiedAttestation:
    """The newest of ``runs``, refused when it is of another variant (SubjectError) or failed
    (AttestedFailureError naming the older passing run, if any)."""
    newest = max(runs, key=lambda r: r.created)
    if variant and newest.predicate.get("variant", variant) != variant:
        raise VariantMismatchError(
            f"the attestation of {digest} is of variant {newest.predicate.get('variant')!r}, "
            f"not {variant!r}",
            "promote the digest as the variant it was built as",
        )
    if not newest.passed:
        older = [r.created for r in runs if r.passed and r.created < newest.created]
        when = (
            f"a newer run ({newest.created}) failed after the passing run of {older[-1]}"
            if older
            else f"the attested run ({newest.created}) failed"
        )
        raise AttestedFailureError(
            f"{when}: {', '.join(newest.failed) or 'passed: false'}",
            "fix the image and verify it again; the newest run decides",
        )
    return newest


def _check_complete(run: VerifiedAttestation, *, digest: str, max_age_hours: float) -> None:
    """Refuse a run lacking a module of :data:`~paddlecd.verify.evidence.REQUIRED_CHECKS` or
    older than ``max_age_hours`` (AttestedFailureError)."""
    present = {str(c.get("name", "")).split("/", 1)[0] for c in run.predicate.get("checks", [])}
    missing = [m for m in REQUIRED_CHECKS if m not in present]
    if missing:
        raise AttestedFailureError(
            f"the attestation of {digest} lacks the {', '.join(missing)} checks "
            "(an incomplete smoke run)",
            "run the whole smoke suite: invoke verify",
        )
    age = run.age_hours()
    if age > max_age_hours:
        raise AttestedFailureError(
            f"the attestation of {digest} is stale: {age:.1f} h old, limit "
            f"release.evidence_max_age_hours={max_age_hours:g}",
            "verify the digest again (invoke verify --image …@digest)",
        )


def _require_nodes(
    wide: Sequence[VerifiedAttestation], *, digest: str, nodes: int, max_age_hours: float
) -> None:
    """The multi-node half of :func:`choose`: a failed newest multi-node run always blocks."""
    again = f"run: invoke verify --image <repo>@{digest} --nodes {max(nodes, 2)}"
    if not wide:
        if nodes > 1:
            raise AttestedFailureError(
                f"release.require_nodes={nodes}: no attested multi-node run of {digest}", again
            )
        return
    newest = max(wide, key=lambda r: r.created)
    if not newest.passed:
        raise AttestedFailureError(
            f"the newest {node_count(newest)}-node run ({newest.created}) failed: "
            f"{', '.join(newest.failed) or 'passed: false'}",
            again,
        )
    if nodes > 1 and node_count(newest) < nodes:
        raise AttestedFailureError(
            f"release.require_nodes={nodes}: the newest multi-node run of {digest} spans "
            f"{node_count(newest)} nodes",
            again,
        )
    if nodes > 1 and newest.age_hours() > max_age_hours:
        raise AttestedFailureError(
            f"the newest multi-node run of {digest} is stale: {newest.age_hours():.1f} h old", again
        )
