"""Evidence tasks: signing keys and the signed attestations verify attaches to a digest
(``invoke evidence.*``)."""

from __future__ import annotations

from pathlib import Path

from paddlecd.cli.common import guarded, result, say, settings, task
from paddlecd.errors import (
    AttestationError,
    AttestedFailureError,
    NoAttestationError,
    SigningKeyError,
    UntrustedKeyError,
)


@task(help={"out": "folder for the new key pair (created; an existing pair is never overwritten; "
                   "default <state>/keys, which the embedded default signs with and trusts)"})
@guarded
def keygen(c, out=None):
    """Create an ECDSA P-256 key pair for signing verify attestations (PEM files).

    Commit the .pub file and list it in release.trusted_keys; keep the .key file secret: point
    verify.signing_key at it, or put its PEM in the PADDLECD_SIGNING_KEY secret in CI. Without
    --out the pair goes to <state>/keys, which verify signs with and promote trusts while
    verify.signing_key and release.trusted_keys are unset (the embedded default, one machine).
    Example: invoke evidence.keygen --out /secure/keys
    """
    from paddlecd.signing import keys

    private, public = keys.keygen(Path(out) if out else keys.state_pair(settings())[0].parent,
                                  note=say)
    result(f"private key: {private} (secret: verify.signing_key or $PADDLECD_SIGNING_KEY)\n"
           f"public key:  {public} (commit it; list it in release.trusted_keys)\n"
           f"key id:      {keys.key_id(public)} (as evidence.show, promote, doctor and upload "
           "name it)")


@task(help={"target": "an image host/repo@sha256:… or a release (1.4.0-cpu)"})
@guarded
def show(c, target):
    """Show the signed attestations of an image or release, each checked against trusted keys.

    For each verify run: who verified what, where, when, with which key, and the key figures.
    Then the image's SLSA build provenance (attached by push; copied by promote): the git
    revision and whether the tree was dirty, the base and Dockerfile digests, the build args, the
    builder and the build's start and finish (shown before verify ran too, which still exits
    non-zero: no attestation). Signatures are checked against
    release.trusted_keys; a provenance that does not verify (another digest, a changed byte, an
    untrusted key) is shown as REJECTED and exits 7, except one by an untrusted key beside one
    that verifies (as cosign, a run by an untrusted key beside a run that verifies).

    Examples: invoke evidence.show 127.0.0.1:5000/paddlecd/paddle@sha256:<64 hex>
              invoke evidence.show 1.4.0-cpu
    """
    from paddlecd.image import provenance
    from paddlecd.registry.client import client_for
    from paddlecd.release import query
    from paddlecd.signing import keys
    from paddlecd.verify.describe import describe

    cfg = settings()
    ref, runs = query.evidence_of(cfg, target)
    if "@" not in target and "/" in target:
        say(f"resolved {target} to {ref}")
    try:
        trusted = keys.trusted(cfg)
    except SigningKeyError:
        if runs:
            raise
        trusted = None  # nothing to check: the missing attestation is the error to show
    built = provenance.find(client_for(cfg, ref.registry), ref.repository, str(ref.digest),
                            trusted) if trusted is not None else []
    for run in runs:
        for line in describe(run):
            result(line)
    for found in built:  # before verify too: push attached it (a trial: not shown until verify)
        for line in found.lines():
            result(line)
    if not runs:
        raise NoAttestationError(
            f"no attestation of {ref}" + (" (its build provenance is shown above)"
                                                 if built else ""),
            "run: invoke verify --image <repo>@<digest>")
    hint = "see the REJECTED lines; trusted keys: release.trusted_keys (or the state folder's pair)"
    if all(run.problem for run in runs):  # shown, and still a failed check
        raise AttestationError(f"none of the {len(runs)} attestation(s) of {ref} verifies", hint)
    verified = [run.verified for run in runs if run.verified]
    if verified and not any(v.passed for v in verified):  # a trial: exit 0, so `show && deploy`
        raise AttestedFailureError(                          # went ahead on a failed image
            f"no passing verify run of {ref}: {len(verified)} signed run(s), "
            f"{'all' if len(verified) > 1 else 'it'} failed",
            "see the FAILED lines above; fix the image and run: invoke verify --image "
            "<repo>@<digest>")
    # one by a key no one trusts is noise beside one that verifies (anyone who may push can
    # attach one: a trial's second checkout did); one that a trusted key signed and that still
    # fails (another digest, a changed byte), or none that verifies, is a failed check
    bad = [p for p in built if p.problem and not (
        isinstance(p.problem, UntrustedKeyError) and any(not q.problem for q in built))]
    if bad:
        raise AttestationError(f"the provenance {bad[0].location} of {ref} does not verify: "
                               f"{bad[0].problem.cause if bad[0].problem else ''}", hint)
