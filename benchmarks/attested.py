"""Signed evidence for benchmark candidates: promotion accepts only a verified attestation in the
registry (issue 10), so a benchmark signs one as verify would, with a key pair of its own state
folder (never the project's .paddlecd/)."""

from __future__ import annotations

import json
from pathlib import Path

from paddlecd import config, files
from paddlecd.image import candidate
from paddlecd.signing import keys
from paddlecd.verify import evidence, registry_store


def key_flags(state: Path) -> dict[str, str]:
    """Settings flags naming a key pair under ``state/keys`` (made on first use)."""
    folder = state / "keys"
    private, public = folder / "paddlecd-signing.key", folder / "paddlecd-signing.pub"
    if not private.exists():
        private, public = keys.keygen(folder)
    return {"verify.signing_key": str(private), "release.trusted_keys": str(public)}


def passing_candidate(s: config.Settings, digest: str, reference: str) -> None:
    """Record ``digest`` as the cpu candidate with passing evidence from every smoke module, and
    push its signed attestation (what ``invoke push verify`` leaves behind)."""
    candidate.save_candidate(s, "cpu", reference=reference, digest=digest, tag="bench")
    # the figures of a real CPU run (tests/data/gates), so a promotion carries them as verify's do
    run = json.loads((s.root / "tests" / "data" / "gates" / "cpu-3.0.0.json").read_text())
    record = evidence.Evidence(
        digest=digest, reference=reference, variant="cpu", passed=True, created=files.now_iso(),
        versions={"paddle": "3.0.0"},
        checks=tuple(evidence.Check(name=f"{m}/bench", passed=True, duration_s=0.1)
                     for m in evidence.REQUIRED_CHECKS),
        hardware=run["hardware"], figures=tuple(run["figures"]))
    evidence.save(s, record)
    out = s.state / "verify" / digest[7:19]
    out.mkdir(parents=True, exist_ok=True)
    (out / "junit.xml").write_text('<testsuite name="smoke"/>')
    (out / "smoke.log").write_text("benchmark candidate: no smoke run\n")
    registry_store.publish(s, record, out)


def build_provenance(s: config.Settings, digest: str, reference: str) -> str:
    """Attach the signed SLSA provenance ``push`` attaches to a built image (a build record of
    the project's Dockerfile, as ``build`` writes it); the referrer's location."""
    from paddlecd.image import build as builder
    from paddlecd.image import provenance

    base = f"{s.registry.url}/paddlecd/base@sha256:{'0' * 64}"
    record = {"variant": "cpu", "tag": f"{s.candidate_repo}:cpu-bench", "image_id": digest,
              "builder": "docker 20.10 with DOCKER_BUILDKIT=1", "started": files.now_iso(),
              "built": files.now_iso(), "base": base, "build_args": {"BASE": base, "PACKAGES": ""},
              "secrets": ["ca_bundle"], "revision": "0" * 40, "dirty": False,
              "source": "https://example.com/paddlecd",
              "dockerfile": {"path": "images/Dockerfile",
                             "sha256": builder.file_sha256(s.root / "images" / "Dockerfile")}}
    return provenance.attach(s, record, reference=reference, digest=digest)
