"""Evidence and candidate records: their JSON shape on disk; evidence checked by type (issue 12)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import AttestedFailureError, ConfigError, VerifyError
from paddlecd.files import now_iso
from paddlecd.image import candidate
from paddlecd.verify import attestation, evidence
from paddlecd.verify.attestation import VerifiedAttestation
from paddlecd.verify.evidence import Check, Evidence

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def settings(tmp_path):
    return config.load({"state_dir": str(tmp_path / "state")}, root=ROOT, environ={})


def record(**changes) -> Evidence:
    checks = tuple(Check(name=f"{m}/test_{m}", passed=True, duration_s=0.5, metrics={"busbw": 1.5})
                   for m in evidence.REQUIRED_CHECKS)
    ev = Evidence(digest=DIGEST, reference=f"reg.example/ci/paddle@{DIGEST}", variant="cpu",
                  passed=True, created=now_iso(), checks=checks,
                  versions={"paddle": "3.0.0", "driver": None}, duration_s=12.5, revision="f" * 40,
                  junit="/tmp/junit.xml")
    return dataclasses.replace(ev, **changes)


def stored(settings, data: dict) -> None:
    path = evidence.evidence_path(settings, DIGEST)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_evidence_round_trips_in_the_documented_shape(settings):
    path = evidence.save(settings, record())
    data = json.loads(path.read_text())
    assert set(data) == {"schema", "digest", "reference", "variant", "passed", "created", "checks",
                         "versions", "duration_s", "revision", "junit", "model_dir",
                         "warnings", "nodes", "hardware", "figures", "models"}
    assert data["schema"] == 1 and data["passed"] is True
    assert set(data["checks"][0]) == {"name", "passed", "skipped", "duration_s", "metrics",
                                      "message"}
    assert evidence.load(settings, DIGEST) == record(created=data["created"])


def test_evidence_from_an_older_writer_without_optional_keys_reads(settings):
    """Records written by tests and older verify runs carry only some keys; keys from newer writers
    are ignored."""
    data = record().to_json()
    for key in ("duration_s", "revision", "junit", "model_dir", "versions"):
        data.pop(key)
    data["checks"] = [{"name": c["name"], "passed": True} for c in data["checks"]]
    stored(settings, {**data, "attestation": "from a newer paddlecd"})
    ev = evidence.load(settings, DIGEST)
    assert ev.passed is True and not ev.missing_checks() and ev.checks[0].duration_s == 0.0


@pytest.mark.parametrize("where, field", [("record", ": passed is"),
                                          ("check", ": checks[1].passed is")])
def test_passed_must_be_a_boolean(settings, where, field):
    data = record().to_json()
    if where == "record":
        data["passed"] = "false"
    else:
        data["checks"][1]["passed"] = "false"
    stored(settings, data)
    with pytest.raises(VerifyError) as e:
        evidence.load(settings, DIGEST)
    assert f"{field} the text 'false', not true or false" in e.value.cause
    assert "\n" not in e.value.cause


def test_a_failed_check_under_passed_true_is_refused(settings):
    data = record().to_json()
    data["checks"][2]["passed"] = False
    stored(settings, data)
    with pytest.raises(VerifyError) as e:
        evidence.load(settings, DIGEST)
    assert "checks[2].passed: a failed check under passed: true" in e.value.cause


def test_unknown_schema_and_bad_time_are_refused(settings):
    stored(settings, {**record().to_json(), "schema": 2})
    with pytest.raises(VerifyError, match="unknown schema '2'"):
        evidence.load(settings, DIGEST)
    stored(settings, {**record().to_json(), "created": "yesterday"})
    with pytest.raises(VerifyError, match="created: 'yesterday' is not an ISO-8601 time"):
        evidence.load(settings, DIGEST)


def _signed(predicate: dict) -> VerifiedAttestation:
    return VerifiedAttestation(digest=DIGEST, name="reg/ci/paddle", keyid="k", key_source="k.pub",
                               predicate=predicate)


@pytest.mark.parametrize("change", [
    {"passed": "false"},
    {"checks": [{"name": f"{m}/t", "passed": "false" if m == "allreduce" else True}
                for m in evidence.REQUIRED_CHECKS]},
    {"checks": [{"name": f"{m}/t", "passed": m != "export"} for m in evidence.REQUIRED_CHECKS]},
], ids=["string-top", "string-check", "failed-check-under-passed-true"])
def test_promotion_checks_the_signed_predicate_by_type(change):
    """Promotion reads the attestation's predicate (issue 10); before issue 12 the string "false"
    and a failed check under passed: true both promoted."""
    with pytest.raises(AttestedFailureError, match="failed"):
        attestation.choose([_signed({**record().to_json(), **change})], digest=DIGEST,
                           variant="cpu", max_age_hours=168)


def test_promotion_accepts_a_typed_passing_predicate_and_refuses_a_failing_one():
    passing = _signed(record().to_json())
    assert attestation.choose([passing], digest=DIGEST, variant="cpu",
                              max_age_hours=168) is passing
    checks = (*record().checks[:3], Check(name="export/jit", passed=False))
    failing = _signed(record(passed=False, checks=checks).to_json())
    with pytest.raises(AttestedFailureError, match="export/jit"):
        attestation.choose([failing], digest=DIGEST, variant="cpu", max_age_hours=168)


def test_candidate_keeps_the_shape_scripts_read(settings):
    reference = f"{settings.candidate_repo}@{DIGEST}"
    path = candidate.save_candidate(settings, "cpu", reference=reference, digest=DIGEST,
                                   tag="cpu-1")
    data = json.loads(path.read_text())
    assert set(data) == {"variant", "reference", "digest", "tag", "pushed"}
    assert data["digest"] == DIGEST and data["reference"] == reference
    cand = candidate.load_candidate(settings, "cpu")
    assert cand.digest == DIGEST and cand.tag == "cpu-1" and cand.pushed == data["pushed"]
    assert candidate.load_candidate(settings, "cu126") is None


def test_a_broken_candidate_names_the_field(settings):
    path = candidate.candidate_path(settings, "cpu")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"variant": "cpu", "reference": "r@sha256:1", "tag": "t",
                                "pushed": "now"}))
    with pytest.raises(ConfigError) as e:
        candidate.load_candidate(settings, "cpu")
    assert e.value.cause == f"{path}: 'digest' is missing or not a string"
    assert e.value.hint == "push again to rewrite it: invoke push --variant cpu"


def test_a_candidate_that_is_no_json_object_is_named_so(settings):
    """Trial 15: a record that was a JSON list said "'variant' is missing or not a string", its
    hint "invoke push --variant …" with the dots printed."""
    path = candidate.candidate_path(settings, "cpu")
    path.parent.mkdir(parents=True)
    path.write_text('["cpu"]')
    with pytest.raises(ConfigError) as e:
        candidate.load_candidate(settings, "cpu")
    assert e.value.cause == f"{path}: not a JSON object but an array"
    assert e.value.hint == "push again to rewrite it: invoke push --variant cpu"


def test_the_tally_says_what_pytest_said():
    """A trial: verify printed "10 checks passed" when pytest said 8 passed, 2 skipped."""
    checks = [evidence.Check(f"m/t{i}", passed=True) for i in range(8)]
    checks += [evidence.Check("nccl/gpu", passed=True, skipped=True)] * 2
    record = evidence.Evidence(digest="sha256:" + "a" * 64, reference="r@sha256:" + "a" * 64,
                               variant="cpu", passed=True, created="2026-01-01T00:00:00Z",
                               checks=tuple(checks))
    assert record.tally == "8 passed, 2 skipped"
    failing = dataclasses.replace(record, checks=(*checks, evidence.Check("m/x", passed=False)))
    assert failing.tally == "8 passed, 2 skipped, 1 failed"


@pytest.mark.parametrize(("key", "value", "why"), [
    ("digest", "sha256:zz", "digest 'sha256:zz' is not a digest"),
    ("reference", f"evil.example.com/x@{DIGEST}", "reference 'evil.example.com/x@"),
    ("variant", "cu126", "variant 'cu126' is not 'cpu'"),
])
def test_a_candidate_record_push_never_wrote_is_named_by_file_and_key(settings, key, value, why):
    """Trial 4: an edited reference sent promote to a registry nobody configured ("unreachable",
    or a 401 whose hint was to set credentials that were set); a bad digest said "invalid
    digest" naming no file."""
    path = candidate.save_candidate(settings, "cpu", reference=f"{settings.candidate_repo}@"
                                    f"{DIGEST}", digest=DIGEST, tag="cpu-1")
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    with pytest.raises(ConfigError) as e:
        candidate.load_candidate(settings, "cpu")
    assert e.value.cause.startswith(f"{path}: {why}")
    assert "invoke push --variant cpu" in e.value.hint
