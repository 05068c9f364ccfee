"""The admission policy a cluster enforces (``invoke release.policy``): a Kyverno ClusterPolicy
that admits only release images with a passing paddlecd attestation signed by a trusted key.

No Kyverno runs here: the policy is validated against Kyverno's own ClusterPolicy CRD schema
(kyverno/kyverno ``config/crds/kyverno/kyverno.io_clusterpolicies.yaml`` at 111e07bb, kept in
``../shared/reference/`` beside the checkout; the test skips with the reason when the folder is
absent), and its condition is evaluated on a predicate paddlecd itself signs.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from paddlecd import config, files
from paddlecd.errors import ConfigError, SigningKeyError
from paddlecd.release import admission
from paddlecd.signing import keys
from paddlecd.verify import attestation
from paddlecd.verify.evidence import Check, Evidence

from support import ROOT, invoke

CRD = ROOT.parent / "shared" / "reference" / "kyverno.io_clusterpolicies.yaml"


@pytest.fixture
def settings(tmp_path):
    private, public = keys.keygen(tmp_path / "keys")
    other = keys.keygen(tmp_path / "other")[1]
    return config.load({"state_dir": str(tmp_path / "state"), "registry.url": "reg.example:5000",
                        "release.trusted_keys": f"{public},{other}"}, root=ROOT, environ={})


def test_the_policy_validates_against_kyvernos_clusterpolicy_crd(settings):
    if not CRD.is_file():
        pytest.skip(f"Kyverno's CRD is not beside the checkout ({CRD}): shared/reference absent")
    crd = files.load_yaml(CRD.read_text())  # 1.4 MB: libyaml
    [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    doc = admission.kyverno_policy(settings)
    assert (doc["apiVersion"], doc["kind"]) == (f"{crd['spec']['group']}/v1", "ClusterPolicy")
    # what jsonschema.validate does, with the schema checked once, not once a document: the
    # check of the 1.4 MB schema against the metaschema is most of the test's time
    schema = v1["schema"]["openAPIV3Schema"]
    kind = jsonschema.validators.validator_for(schema)
    kind.check_schema(schema)
    kind(schema).validate(doc)
    broken = json.loads(json.dumps(doc))
    broken["spec"]["rules"][0]["verifyImages"][0]["type"] = "Sigstore"  # the schema can fail
    with pytest.raises(jsonschema.ValidationError):
        kind(schema).validate(broken)


def test_it_names_the_release_repository_every_trusted_key_and_no_transparency_log(settings):
    [rule] = admission.kyverno_policy(settings)["spec"]["rules"]
    [verify] = rule["verifyImages"]
    assert verify["imageReferences"] == ["reg.example:5000/paddlecd/release:*",
                                         "reg.example:5000/paddlecd/release@*"]
    assert (verify["type"], verify["failureAction"], verify["required"]) == (
        "SigstoreBundle", "Enforce", True)
    [att] = verify["attestations"]
    assert att["type"] == attestation.PREDICATE_TYPE
    [attestor] = att["attestors"]
    assert attestor["count"] == 1  # any one trusted key
    pems = [e["keys"]["publicKeys"] + "\n" for e in attestor["entries"]]
    assert pems == [keys.public_pem(k.key).decode() for k in keys.trusted(settings)]
    assert all(e["keys"]["rekor"] == {"ignoreTlog": True} and e["keys"]["ctlog"] == {
        "ignoreSCT": True} for e in attestor["entries"])
    assert admission.kyverno_policy(settings, action="Audit")["spec"]["rules"][0][
        "verifyImages"][0]["failureAction"] == "Audit"


@pytest.mark.parametrize("passed", [True, False])
def test_the_condition_reads_the_predicate_paddlecd_signs(settings, passed):
    """Kyverno evaluates attestation conditions on the predicate (JMESPath in ``{{ }}``): the key
    the policy names is the top-level boolean of the statement verify signs."""
    record = Evidence(digest="sha256:" + "a" * 64, reference="r/p@sha256:" + "a" * 64,
                      variant="cpu", passed=passed, created="2026-01-01T00:00:00Z",
                      checks=(Check("environment/test_import", passed=passed),))
    predicate = attestation.statement(record, junit=b"<testsuite/>", log=b"")["predicate"]
    [condition] = admission.kyverno_policy(settings)["spec"]["rules"][0]["verifyImages"][0][
        "attestations"][0]["conditions"][0]["all"]
    key = condition["key"].strip("{} ")
    assert (predicate[key] == condition["value"]) is passed


def test_no_trusted_key_or_a_bad_action_is_refused(tmp_path):
    bare = config.load({"state_dir": str(tmp_path / "state")}, root=ROOT, environ={})
    with pytest.raises(SigningKeyError, match="no trusted keys configured"):
        admission.kyverno_policy(bare)
    with pytest.raises(ConfigError, match="not Enforce or Audit"):
        admission.kyverno_policy(bare, action="enforce")


def test_the_task_writes_the_file_or_refuses_and_writes_nothing(tmp_path):
    public = keys.keygen(tmp_path / "keys")[1]
    out = tmp_path / "policy.yaml"
    ok = invoke("release.policy", "--out", str(out), PADDLECD_STATE_DIR=str(tmp_path / "s"),
                PADDLECD_RELEASE_TRUSTED_KEYS=str(public))
    assert ok.returncode == 0, ok.stderr
    assert "ClusterPolicy paddlecd-verified-releases (Enforce)" in ok.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["spec"]["rules"][0]["verifyImages"][0]["attestations"][0]["attestors"][0][
        "entries"][0]["keys"]["publicKeys"].startswith("-----BEGIN PUBLIC KEY-----\n")
    missing = tmp_path / "none.yaml"
    refused = invoke("release.policy", "--out", str(missing),
                     PADDLECD_STATE_DIR=str(tmp_path / "s2"))
    assert refused.returncode == 2 and "error: no trusted keys configured" in refused.stderr
    assert not missing.exists()


def test_deploy_dry_run_prints_the_policy_beside_the_job(tmp_path):
    public = keys.keygen(tmp_path / "keys")[1]
    env = {"PADDLECD_STATE_DIR": str(tmp_path / "s"), "PADDLECD_RELEASE_TRUSTED_KEYS": str(public)}
    args = ("deploy", "--image", "reg.example:5000/paddlecd/release@sha256:" + "a" * 64,
            "--job", str(ROOT / "examples/train.yaml"), "--cluster", "k8s")
    run = invoke(*args, "--dry-run", "--policy", **env)
    assert run.returncode == 0, run.stderr
    assert [d["kind"] for d in yaml.safe_load_all(run.stdout)] == ["Service", "Job",
                                                                    "ClusterPolicy"]
    refused = invoke(*args, "--policy", **env)
    assert refused.returncode == 2 and "error: --policy is for --dry-run" in refused.stderr


def _kyverno_matches(patterns, image: str) -> bool:
    """Kyverno's match of an image against ``imageReferences``: ``*`` is any run of characters
    (``/`` too) and ``?`` one, over the reference as ``ImageInfo.String`` writes it
    (``registry/path:tag``, ``registry/path@digest``; no tag is ``:latest``)."""
    import fnmatch

    written = image if ("@" in image or ":" in image.rsplit("/", 1)[-1]) else image + ":latest"
    return any(fnmatch.fnmatchcase(written, p) for p in patterns)


def test_the_image_references_match_the_release_repository_only(settings):
    """A trial (issue 21): ``<repo>*`` also matched ``<repo>-foo`` and ``<repo>/x``, other
    repositories' images the policy then refused for lacking paddlecd's attestation."""
    patterns = admission.kyverno_policy(settings)["spec"]["rules"][0]["verifyImages"][0][
        "imageReferences"]
    repo = "reg.example:5000/paddlecd/release"
    for image in (f"{repo}:1.4.0-cpu", f"{repo}@sha256:" + "a" * 64, repo):
        assert _kyverno_matches(patterns, image), image
    for image in (f"{repo}-foo:1.0", f"{repo}s:1.0", f"{repo}/x:1.0", f"{repo}2@sha256:aa"):
        assert not _kyverno_matches(patterns, image), image


def test_a_trusted_key_named_twice_is_listed_once(tmp_path):
    """A trial (issue 21): the key file and the folder holding it in release.trusted_keys put
    one key twice into the policy."""
    public = keys.keygen(tmp_path / "keys")[1]
    s = config.load({"state_dir": str(tmp_path / "state"),
                     "release.trusted_keys": f"{public},{public.parent}"}, root=ROOT, environ={})
    [attestor] = admission.kyverno_policy(s)["spec"]["rules"][0]["verifyImages"][0][
        "attestations"][0]["attestors"]
    assert len(attestor["entries"]) == 1 and [k.source for k in keys.trusted(s)] == [str(public)]


def test_the_policy_and_rendered_manifests_are_never_written_into_a_system_folder(tmp_path):
    # issue 21 trial: `release.policy --out /etc/paddlecd-policy.yaml` wrote into /etc (/proc is
    # used here: a test without the fix must not write into /etc either); a symlink or `..` that
    # lands there is judged where it lands
    (tmp_path / "link").symlink_to("/proc")
    for out in ("/proc/paddlecd-t21.yaml", str(tmp_path / "link" / "p.yaml"),
                str(tmp_path / ".." / ".." / ".." / ".." / ".." / "proc" / "p.yaml")):
        with pytest.raises(ConfigError, match=r"--out .*: /proc is inside the system folder /proc"):
            files.refuse_output_place(out, "--out", folder=False)
    files.refuse_output_place(str(tmp_path / "policy.yaml"), "--out", folder=False)
    with pytest.raises(ConfigError, match=r"is a top-level folder"):
        files.refuse_output_place("/tmp", "--out", folder=True)
    public = keys.keygen(tmp_path / "keys")[1]
    run = invoke("release.policy", "--out", "/proc/paddlecd-t21.yaml",
                 PADDLECD_STATE_DIR=str(tmp_path / "s"), PADDLECD_RELEASE_TRUSTED_KEYS=str(public))
    assert run.returncode == 2
    assert "error: --out /proc/paddlecd-t21.yaml: /proc is inside the system folder" in run.stderr
    from paddlecd.deployment import stage as deploy

    with pytest.raises(ConfigError, match=r"/proc/paddlecd-t21 is inside the system folder"):
        deploy.render_to(None, "/proc/paddlecd-t21")  # refused before the plan is read


def test_render_to_a_full_disk_leaves_nothing_and_the_rerun_writes(tmp_path, monkeypatch):
    """Trial 9: ``cluster.render`` on a full disk left a Job manifest cut at 4096 bytes (still a
    valid Job to kubectl) and the re-run refused the folder as "not an empty folder". The files
    are written beside ``--out``, which appears only whole."""
    import errno
    import types

    import yaml

    from paddlecd import deployment as deploy

    plan = types.SimpleNamespace(manifests=[
        {"kind": "Service", "metadata": {"name": "j"}},
        {"kind": "Job", "metadata": {"name": "j"}, "spec": {"x": "y" * 5000}}])
    real, calls = yaml.safe_dump, []

    def full(doc, **kw):
        calls.append(doc["kind"])
        if doc["kind"] == "Job":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(doc, **kw)

    monkeypatch.setattr(yaml, "safe_dump", full)
    with pytest.raises(OSError) as e:
        deploy.render_to(plan, tmp_path / "r")
    assert e.value.filename == str(tmp_path / "r" / "01-job-j.yaml")  # the path, not none
    assert calls == ["Service", "Job"] and sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.setattr(yaml, "safe_dump", real)
    paths = deploy.render_to(plan, tmp_path / "r")
    assert [p.name for p in paths] == ["00-service-j.yaml", "01-job-j.yaml"]
    assert yaml.safe_load(paths[1].read_text())["spec"]["x"] == "y" * 5000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_named_pipe_at_out_is_refused_not_replaced(tmp_path):
    """Trial 10: ``release.policy --out <a FIFO>`` replaced it, exit 0."""
    import os

    from paddlecd import files

    os.mkfifo(tmp_path / "p.yaml")
    with pytest.raises(ConfigError, match="p.yaml is a named pipe, not a file"):
        files.refuse_foreign_file(tmp_path / "p.yaml", "--out", ours=lambda head: True,
                                  what="ClusterPolicy file")
    assert (tmp_path / "p.yaml").is_fifo()
