"""Admission: a Kyverno ``ClusterPolicy`` that lets a cluster run only images paddlecd verified.

The policy (kyverno.io/v1, ``verifyImages`` of ``type: SigstoreBundle``, Kyverno >= 1.13) admits a
Pod whose images from the release repository carry a Sigstore bundle attestation of paddlecd's
predicate type, signed by one of the trusted keys, whose predicate says ``passed: true``. The keys
are checked without a transparency log or certificate timestamps (``rekor.ignoreTlog``,
``ctlog.ignoreSCT``): paddlecd signs with keys, offline (../shared/reference/formats.md: Kyverno
reads bundle referrers with ``type: SigstoreBundle`` and stays TUF-free only with both). Field
names follow the ClusterPolicy CRD of kyverno/kyverno ``config/crds/kyverno/
kyverno.io_clusterpolicies.yaml`` at 111e07bb; the tests validate against it.
"""

from __future__ import annotations

from paddlecd.config import Settings
from paddlecd.errors import ConfigError, quoted
from paddlecd.signing import keys
from paddlecd.types import KubeObject
from paddlecd.verify.attestation import PREDICATE_TYPE

POLICY_NAME = "paddlecd-verified-releases"
ACTIONS = ("Enforce", "Audit")


def image_references(settings: Settings) -> list[str]:
    """The release repository's images as Kyverno patterns: ``<repo>:*`` and ``<repo>@*``.

    Kyverno matches ``imageReferences`` with wildcards against an image's reference written as
    ``registry/path:tag`` or ``registry/path@digest`` (``ImageInfo.String``, kyverno
    ``pkg/utils/image/infos.go``; a Pod image without a tag is ``:latest``), and ``*`` matches
    ``/`` too: ``<repo>*`` (a trial) also matched ``<repo>-foo`` and ``<repo>/anything``, images
    of other repositories this policy then held to paddlecd's attestation."""
    return [f"{settings.release_repo}:*", f"{settings.release_repo}@*"]


def kyverno_policy(settings: Settings, *, action: str = "Enforce",
                   name: str = POLICY_NAME) -> KubeObject:
    """The ``ClusterPolicy`` document for ``settings``' release repository and trusted keys.

    Args:
        action: ``Enforce`` (refuse the Pod) or ``Audit`` (admit it, report the failure).
        name: the policy's name (a DNS subdomain).

    Raises:
        ConfigError: an unknown ``action``.
        SigningKeyError: no trusted keys (``release.trusted_keys`` unset and no state-folder
            pair), or one that cannot be read: a policy without a key would admit nothing.
    """
    if action not in ACTIONS:
        raise ConfigError(f"--action {quoted(action)}: not Enforce or Audit",
                          "Enforce refuses unverified Pods; Audit only reports them")
    trusted = keys.trusted(settings)
    entries = [{"keys": {"publicKeys": keys.public_pem(k.key).decode().strip(),
                         "rekor": {"ignoreTlog": True}, "ctlog": {"ignoreSCT": True}}}
               for k in trusted]
    verify = {
        "imageReferences": image_references(settings),
        "type": "SigstoreBundle",
        "failureAction": action,
        "required": True,
        "mutateDigest": True,
        "verifyDigest": True,
        "attestations": [{
            "type": PREDICATE_TYPE,
            "attestors": [{"count": 1, "entries": entries}],  # any one trusted key
            # evaluated on the predicate: the run that verify signed passed
            "conditions": [{"all": [{"key": "{{ passed }}", "operator": "Equals", "value": True,
                                     "message": "paddlecd verify did not pass for this digest"}]}],
        }],
    }
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name, "annotations": {
            "policies.kyverno.io/title": "Run only paddlecd-verified releases",
            "policies.kyverno.io/description": (
                f"Pods may run images of {settings.release_repo} only with a passing paddlecd "
                f"verify attestation ({PREDICATE_TYPE}) signed by a trusted key."),
        }},
        "spec": {
            "background": False,  # image verification runs at admission
            "webhookConfiguration": {"failurePolicy": "Fail", "timeoutSeconds": 30},
            "rules": [{
                "name": "verified-by-paddlecd",
                "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                "verifyImages": [verify],
            }],
        },
    }
