"""Rendered manifests: checked against the official Kubernetes schemas (kubernetes-validate, shipped
offline in the package, strict mode: unknown fields fail) for 1.28, 1.30 and 1.32; the PaddleJob
against the training operator's CRD openAPIV3Schema (a trimmed Apache-2.0 copy in
tests/data/cluster, and the full copy in ../shared/reference when present); and against golden files
reviewed by hand once (regenerate with PADDLECD_UPDATE_GOLDEN=1, then review the diff).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from paddlecd.cluster import jobfile
from paddlecd.cluster.render import DEPRECATED_TRAIN_ENV, Target, environment, launch_argv, render
from paddlecd.errors import ConfigError

from support import ROOT

DATA = ROOT / "tests" / "data"
JOBS = sorted((DATA / "cluster" / "jobs").glob("*.yaml"))
GOLDEN = DATA / "golden" / "cluster"
K8S_VERSIONS = ["1.28", "1.30", "1.32"]
DIGEST = "sha256:" + "4f" * 32
SHARED_CRD = ROOT.parent / "shared" / "reference" / "kubeflow.org_paddlejobs.yaml"
VENDORED_CRD = DATA / "cluster" / "kubeflow.org_paddlejobs.trimmed.yaml"


def target_for(spec: jobfile.JobSpec) -> Target:
    variant = "cu126" if spec.resources.gpus else "cpu"
    return Target(
        reference=f"registry.example.com/paddlecd/release@{DIGEST}",
        variant=variant,
        release=f"1.4.0-{variant}",
        revision="0123456789abcdef0123456789abcdef01234567",
    )


def manifests(job: Path, kind: str) -> list[dict]:
    spec = jobfile.load(job)
    return render(
        spec,
        target_for(spec),
        job_id=f"{spec.name}-0a1b2c",
        kind=kind,
        namespace="ml-train",
        pull_secret="paddlecd-registry",
    )


@functools.lru_cache(maxsize=None)
def crd_validator(path: Path) -> jsonschema.Draft7Validator:
    """The CRD's openAPIV3Schema, closed (unknown fields fail, as ``kubectl --validate=strict``);
    read once per file (libyaml where PyYAML has it: the operator's CRD is large)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = next(
        d
        for d in yaml.load_all(path.read_text(), Loader=loader)
        if d and d.get("kind") == "CustomResourceDefinition"
    )
    return jsonschema.Draft7Validator(
        closed(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    )


def closed(schema):
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(
    "job", JOBS + [Path("examples/train.yaml")], ids=lambda p: getattr(p, "stem", p)
)
def test_job_and_service_validate_against_official_schemas(job, version, project_root):
    for m in manifests(project_root / job, "job"):
        assert kubernetes_validate.validate(m, version, strict=True) == version


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_validator_rejects_a_misspelt_field(version):
    job = manifests(JOBS[0], "job")[1]
    job["spec"]["parallellism"] = job["spec"].pop("parallelism")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, version, strict=True)


CRDS = [VENDORED_CRD] + ([SHARED_CRD] if SHARED_CRD.exists() else [])


@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_paddlejob_validates_against_the_operator_crd(job, crd):
    [paddlejob] = manifests(job, "paddlejob")
    errors = [e.message for e in crd_validator(crd).iter_errors(paddlejob)]
    assert errors == []
    broken = copy.deepcopy(paddlejob)
    broken["spec"]["paddleReplicaSpecs"]["Worker"]["replica"] = 2  # typo of 'replicas'
    assert any("replica" in e.message for e in crd_validator(crd).iter_errors(broken))


@pytest.mark.parametrize("kind", ["job", "paddlejob"])
@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_manifests_match_golden_files(job, kind):
    golden = GOLDEN / f"{job.stem}.{kind}.yaml"
    text = yaml.safe_dump_all(manifests(job, kind), sort_keys=False)
    if os.environ.get("PADDLECD_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def pods_of(ms: list[dict]) -> list[dict]:
    out = []
    for m in ms:
        if m["kind"] == "Job":
            out.append(m["spec"]["template"]["spec"])
        if m["kind"] == "PaddleJob":
            out.append(m["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"])
    return out


@pytest.mark.parametrize("kind", ["job", "paddlejob"])
def test_every_pod_is_pinned_limited_and_non_root(kind):
    job = DATA / "cluster" / "jobs" / "gpu-eight.yaml"
    ms = manifests(job, kind)
    [pod] = pods_of(ms)
    [c] = pod["containers"]
    assert c["image"] == f"registry.example.com/paddlecd/release@{DIGEST}"
    assert (
        c["resources"]["requests"]
        == c["resources"]["limits"]
        == {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}
    )
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert (
        pod["securityContext"]["runAsNonRoot"] is True
        and pod["securityContext"]["runAsUser"] == 2000
    )
    assert (
        pod["imagePullSecrets"] == [{"name": "paddlecd-registry"}]
        and pod["restartPolicy"] == "Never"
    )
    labels = ms[-1]["metadata"]["labels"]
    assert (
        labels["paddlecd.io/digest"] == "sha256_" + "4f" * 28
        and len(labels["paddlecd.io/digest"]) == 63
    )
    assert labels["paddlecd.io/release"] == "1.4.0-cu126" and labels[
        "paddlecd.io/git-revision"
    ].startswith("0123")


def test_indexed_job_reaches_rank_zero_through_the_headless_service():
    service, job = manifests(JOBS[0], "job")
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["completionMode"]) == (2, 2, "Indexed")
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (1, 3600)
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == {
        "paddlecd.io/job": "linear-cpu-0a1b2c"
    }
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    assert spec["template"]["metadata"]["labels"]["paddlecd.io/job"] == "linear-cpu-0a1b2c"
    cmd = pod["containers"][0]["command"]
    assert cmd[:3] == ["python", "-m", "paddle.distributed.launch"]
    assert cmd[cmd.index("--master") + 1] == "linear-cpu-0a1b2c-0.linear-cpu-0a1b2c:36543"
    assert (
        cmd[cmd.index("--rank") + 1] == "$(JOB_COMPLETION_INDEX)"
        and cmd[cmd.index("--nnodes") + 1] == "2"
    )
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["PADDLE_MASTER"] == "linear-cpu-0a1b2c-0.linear-cpu-0a1b2c:36543"
    assert (env["PADDLE_NNODES"], env["PADDLE_JOB_ID"]) == ("2", "linear-cpu-0a1b2c")


def test_paddlejob_leaves_rendezvous_to_the_operator():
    [pj] = manifests(DATA / "cluster" / "jobs" / "gpu-eight.yaml", "paddlejob")
    worker = pj["spec"]["paddleReplicaSpecs"]["Worker"]
    c = worker["template"]["spec"]["containers"][0]
    assert worker["replicas"] == 4 and c["name"] == "paddle"
    assert c["ports"] == [{"name": "master", "containerPort": 40000, "protocol": "TCP"}]
    assert (
        "--master" not in c["command"]
        and c["command"][c["command"].index("--nproc_per_node") + 1] == "8"
    )
    assert not [e for e in c["env"] if e["name"].startswith("PADDLE_")]
    assert pj["spec"]["runPolicy"]["backoffLimit"] == 3


def test_launch_argv_gives_each_rank_its_own_host_name():
    spec = jobfile.load(JOBS[0])
    assert launch_argv(spec, "j-1", 1)[3:9] == [
        "--master",
        "j-1-0.j-1:36543",
        "--host",
        "j-1-1.j-1",
        "--nnodes",
        "2",
    ]


@pytest.mark.parametrize("reference", ["registry.example.com/paddlecd/release:1.4.0-cpu", "ubuntu"])
def test_a_tag_is_refused(reference):
    spec = jobfile.load(JOBS[0])
    with pytest.raises(ConfigError, match="is a tag, not a digest"):
        render(spec, Target(reference, "cpu"), job_id="x-1")


def test_unknown_kind_and_long_job_id_are_refused():
    spec = jobfile.load(JOBS[0])
    t = target_for(spec)
    with pytest.raises(ConfigError, match="unknown job kind"):
        render(spec, t, job_id="x-1", kind="mpijob")
    with pytest.raises(ConfigError, match="longer than 52"):
        render(spec, t, job_id="x" * 53)


@pytest.mark.parametrize("kind", ["job", "paddlejob"])
def test_the_script_gets_train_variables_and_the_deprecated_names_for_one_release(kind):
    """TRAIN_* for the script (PADDLECD_* names settings); the deprecated old names carry
    the same values."""
    spec = jobfile.load(JOBS[0])
    [pod_env] = [c["env"] for m in manifests(JOBS[0], kind) for c in _containers(m)]
    env = {e["name"]: e.get("value") for e in pod_env}
    assert env["TRAIN_OUTPUT"] == spec.output.mount_path and env["TRAIN_MODEL"] == spec.model_path
    assert env["TRAIN_CHECKPOINT_DIR"] == spec.checkpoint
    assert env["TRAIN_RELEASE"] == target_for(spec).release
    assert env["TRAIN_IMAGE"] == target_for(spec).reference
    assert {old: env[old] for old in DEPRECATED_TRAIN_ENV.values()} == {
        old: env[new] for new, old in DEPRECATED_TRAIN_ENV.items()
    }


def _containers(manifest: dict) -> list[dict]:
    if manifest["kind"] == "Job":
        return manifest["spec"]["template"]["spec"]["containers"]
    if manifest["kind"] == "PaddleJob":
        return manifest["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return []


def official_schema(name: str, version: str = "1.32") -> dict:
    """One definition of the official Kubernetes schema kubernetes-validate ships."""
    folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    return yaml.safe_load((folder / f"v{version}.0-local" / f"{name}-v1.json").read_text())


@pytest.mark.parametrize("kind", ["job", "paddlejob"])
def test_a_host_folder_output_is_given_to_the_uid_by_an_init_container(kind):
    """The kubelet creates a DirectoryOrCreate hostPath as root 0755 and fsGroup does not reach it:
    "Host path volumes do not support ownership management" (HostPathVolumeSource, the official
    v1.32 schema; kubernetes.io/docs/concepts/storage/volumes/#hostpath). A root init container
    with CAP_CHOWN alone, in the job's own image, chowns the writable mount points only."""
    assert "do not support ownership management" in official_schema(
        "hostpathvolumesource")["description"]
    job = DATA / "cluster" / "jobs" / "host-output.yaml"
    [pod] = pods_of(manifests(job, kind))
    [init] = pod["initContainers"]
    [main] = pod["containers"]
    assert init["image"] == main["image"]  # nothing else to pull on the node
    assert init["command"] == ["chown", "1000:1000", "/output"]  # not the read-only code
    assert init["volumeMounts"] == [{"name": "output", "mountPath": "/output"}]
    ctx = init["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsNonRoot"], ctx["allowPrivilegeEscalation"]) == (0, False,
                                                                                       False)
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert "securityContext" not in main or "runAsUser" not in main["securityContext"]
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["runAsNonRoot"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["output"]["hostPath"] == {"path": "/srv/paddlecd/output",
                                             "type": "DirectoryOrCreate"}


@pytest.mark.parametrize("kind", ["job", "paddlejob"])
def test_a_claim_output_is_made_writable_by_fsgroup_without_root(kind):
    """A claim's volume gets fsGroup ownership (PodSecurityContext.fsGroup, official v1.32 schema);
    OnRootMismatch skips the recursive chown when the root already matches: no init container."""
    assert "OnRootMismatch" in official_schema("podsecuritycontext")["properties"][
        "fsGroupChangePolicy"]["description"]
    [pod] = pods_of(manifests(DATA / "cluster" / "jobs" / "gpu-eight.yaml", kind))
    assert "initContainers" not in pod
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"] == 2000
    assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"


@pytest.mark.parametrize("kind", ["job", "paddlejob"])
def test_every_variable_paddlecd_sets_is_reserved_from_the_job_file(kind):
    """jobfile.RESERVED_ENV is what the renderer sets: a name added to environment() is reserved
    from the job file's env too (trial 4: env TRAIN_MODEL and PADDLE_MASTER replaced ours)."""
    spec = jobfile.load(JOBS[0])
    ours = set(environment(dataclasses.replace(spec, env=()), target_for(spec), "x-1"))
    assert ours | {"JOB_COMPLETION_INDEX"} == jobfile.RESERVED_ENV
    set_in_pods = {e["name"] for m in manifests(JOBS[0], kind) for c in _containers(m)
                   for e in c["env"]}
    assert set_in_pods - {e for e, _ in spec.env} <= jobfile.RESERVED_ENV
