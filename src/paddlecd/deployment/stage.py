"""The deploy stage: resolve a release to a digest, plan the job, then run it locally or on
Kubernetes.

``plan`` does every check (job file, variant, digest, resources) before anything is created, so a
bad input changes nothing. ``run`` carries the plan out and returns the exported model's location,
which the upload stage takes from there.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from paddlecd import files, git
from paddlecd.cluster import jobfile
from paddlecd.cluster.jobfile import JobSpec
from paddlecd.cluster.render import CLUSTERS, KINDS, Target, pinned, render
from paddlecd.config import Settings
from paddlecd.engine import refuse_image_id
from paddlecd.errors import ClusterError, ConfigError, RegistryError
from paddlecd.image import variants
from paddlecd.registry.client import open_reference, parse_reference
from paddlecd.release import query
from paddlecd.types import Echo
from paddlecd.verify import drivers

__all__ = ["CLUSTERS", "Deployed", "Plan", "deployed", "plan", "render_to", "resolve", "run"]


@dataclass(frozen=True)
class Plan:
    """A checked deployment: the job ``spec`` (flags applied), the ``target`` image, a fresh
    ``job_id``, where it runs (``cluster``: local|k8s; ``kind``: job|paddlejob) and its
    ``manifests``."""

    spec: JobSpec
    target: Target
    job_id: str
    cluster: str
    kind: str
    namespace: str
    manifests: list[dict[str, Any]]

    @property
    def model_location(self) -> str:
        """Where the exported model lands: a host path (local, ``path`` volumes) or
        ``claim:<pvc>/<model>``."""
        out = self.spec.output
        if out.path and self.cluster == "local":
            return str(Path(out.path) / self.spec.model)
        if out.path:  # a hostPath on whichever node ran rank 0: not a path on this machine
            return f"node:{Path(out.path) / self.spec.model}"
        return f"claim:{out.claim}/{self.spec.model}"

    def _creates(self) -> str:
        if self.cluster == "local":
            names = [f"{self.job_id}-{i}" for i in range(self.spec.nodes)]
            shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}"
            return f"network {self.job_id}, containers {shown}"
        return ", ".join(f"{m['kind']}/{m['metadata']['name']}" for m in self.manifests)

    def describe(self) -> list[str]:
        """The plan as lines for the user (printed before anything is created)."""
        r = self.spec.resources
        where = (
            "local Docker engine"
            if self.cluster == "local"
            else f"Kubernetes namespace {self.namespace}"
        )
        return [
            f"deploy {self.job_id} on {where} ({self.kind})",
            f"  image     {self.target.reference} (release {self.target.release or '-'}, "
            f"variant {self.target.variant})",
            f"  nodes     {self.spec.nodes} × (cpu {r.cpu}, memory {r.memory}, gpus {r.gpus}, "
            f"shm {r.shm})",
            f"  command   {self.spec.script} {' '.join(self.spec.args)}".rstrip(),
            "  create    " + self._creates(),
            f"  model     {self.model_location}",
        ] + self._owning()

    def _owning(self) -> list[str]:
        """The root init container a host-folder output gets on Kubernetes, said in the plan."""
        owned = [v.mount_path for v in self.spec.volumes.values() if v.path and not v.read_only]
        if self.cluster == "local" or not owned:
            return []
        return [f"  owner     init container own-output (root, CAP_CHOWN only) gives "
                f"{', '.join(owned)} to uid {self.spec.run_as_user} (hostPath; a claim needs none)"]


@dataclass(frozen=True)
class Deployed:
    """The result of a deployment for scripts (``invoke deploy --json``).

    Attributes:
        job_id: the job's name (``<name>-<6 hex>``), also its network/containers or Job/Service.
        cluster: ``local`` or ``k8s``; kind: ``job`` or ``paddlejob``; namespace: where (k8s).
        release: ``X.Y.Z-<variant>`` run, or None for ``--image``; variant: the image's variant.
        reference, digest: the image run, ``host/repo@sha256:…`` and ``sha256:…``.
        model: where the exported model is (:attr:`Plan.model_location`: a host path prefix for
            ``invoke upload --model-dir``, ``node:<path>`` or ``claim:<pvc>/<model>``).
        output_path, output_claim: the output volume: host folder, or claim/volume name.
        executed: False for ``--dry-run`` (nothing created; ``model`` is where it would land).
    """

    job_id: str
    cluster: str
    kind: str
    namespace: str
    release: str | None
    variant: str
    reference: str
    digest: str
    model: str
    output_path: str | None
    output_claim: str | None
    executed: bool

    def to_json(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return asdict(self)


def deployed(p: Plan, *, executed: bool) -> Deployed:
    """The :class:`Deployed` record of plan ``p`` after :func:`run` (``executed``) or without it."""
    out = p.spec.output
    return Deployed(
        job_id=p.job_id,
        cluster=p.cluster,
        kind=p.kind,
        namespace=p.namespace,
        release=p.target.release,
        variant=p.target.variant,
        reference=p.target.reference,
        digest=p.target.digest,
        model=p.model_location,
        output_path=out.path,
        output_claim=out.claim,
        executed=executed,
    )


# Docker's smallest CPU limit: 0.01 CPU (moby daemon/daemon_unix.go verifyContainerResources,
# "Range of CPUs is from 0.01 to N")
LOCAL_CPU_MIN = Decimal("0.01")


def check_host_cpus(spec: JobSpec, host_cpus: int | None = None) -> None:
    """Refuse a per-node ``resources.cpu`` this machine cannot give one container
    (``--cluster local``): under :data:`LOCAL_CPU_MIN` or over its CPUs, at planning, dry-run
    too: Docker refuses ``NanoCpus`` past the host's CPUs at create time ("range of CPUs is
    from 0.01 to N.00", moby daemon/daemon_unix.go verifyContainerResources), so a dry-run that
    says nothing would mislead.

    Raises:
        ConfigError: naming the job file, the value and the host's CPU count.
    """
    most = host_cpus or os.cpu_count() or 1
    cpu = jobfile.parse_quantity(spec.resources.cpu)  # the quantity parser jobfile uses
    if cpu < LOCAL_CPU_MIN:  # a trial: cpu 1m passed the dry-run, then runc failed on the cgroup
        raise ConfigError(
            f"{spec.source}: resources.cpu {spec.resources.cpu} is less than the 10m (0.01 CPU) "
            "Docker gives a container at the least (--cluster local)",
            "give each node at least cpu: 10m (Kubernetes takes 1m: --cluster k8s)")
    if cpu > most:
        raise ConfigError(
            f"{spec.source}: resources.cpu {spec.resources.cpu} is more than this machine's "
            f"{most} CPUs (--cluster local runs every node here)",
            f"give each node at most cpu: \"{most}\", or use --cluster k8s",
        )


def plan(
    settings: Settings,
    *,
    job: str,
    release: str | None = None,
    image: str | None = None,
    variant: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    kind: str = "job",
    cluster: str | None = None,
) -> Plan:
    """Check everything and build the :class:`Plan`; creates nothing.

    Args:
        job: path of the job file (``train.yaml``).
        release: ``X.Y.Z-<variant>`` resolved with :func:`paddlecd.release.query.find`; or
        image: ``host/repo@sha256:…`` directly (``variant`` then says which, default ``cpu``).

    Raises:
        ConfigError: bad job file, unknown release or variant, a tag instead of a release/digest,
            impossible resources, unknown kind or cluster, more than :data:`LOCAL_NODES_MAX`
            nodes on ``--cluster local`` (checked before any registry is asked).
    """
    cluster = cluster or settings.cluster.kind
    spec = check_job(settings, job=job, nodes=nodes, gpus_per_node=gpus_per_node, kind=kind,
                     cluster=cluster)
    target = resolve(settings, release=release, image=image, variant=variant)
    jobfile.check(
        spec, gpu_variant=variants.get(settings, target.variant).is_gpu, variant=target.variant
    )
    check_state_paths(settings, spec)
    if cluster == "local":
        check_host_paths(spec)
        check_claims(spec)
    job_id = spec.new_job_id()
    ns = _namespace(settings, cluster)
    manifests = render(spec, target, job_id=job_id, kind=kind, namespace=ns,
                       pull_secret=settings.cluster.image_pull_secret)
    return Plan(
        spec=spec,
        target=target,
        job_id=job_id,
        cluster=cluster,
        kind=kind,
        namespace=ns,
        manifests=manifests,
    )


def check_job(settings: Settings, *, job: str, nodes: int | None = None,
              gpus_per_node: int | None = None, kind: str = "job",
              cluster: str | None = None) -> JobSpec:
    """What :func:`plan` checks before it asks any registry: the cluster and kind, the job file
    with the overrides, the node bound of ``--cluster local`` and this machine's CPUs. A pipeline
    checks its deploy stage with it before its first stage runs (a trial: a job that was no file
    was found only after promote had run).

    Returns:
        the job's :class:`JobSpec` with the overrides.

    Raises:
        ConfigError: as :func:`plan`.
    """
    cluster = cluster or settings.cluster.kind
    _check_where(cluster, kind)
    spec = jobfile.load(job).with_overrides(nodes=nodes, gpus=gpus_per_node)
    if cluster == "local" and spec.nodes > LOCAL_NODES_MAX:
        raise ConfigError(
            f"--nodes {spec.nodes}: --cluster local starts one container per node on this machine,"
            f" at most {LOCAL_NODES_MAX}",
            "use --cluster k8s for a larger job, or fewer --nodes",
        )
    if cluster == "local":
        check_host_cpus(spec)
    return spec


def _check_where(cluster: str, kind: str) -> None:
    """Refuse an unknown cluster or kind, and a PaddleJob off Kubernetes (ConfigError)."""
    if cluster not in CLUSTERS:
        raise ConfigError(f"unknown --cluster '{cluster}'", "use --cluster local or k8s")
    if kind not in KINDS:
        raise ConfigError(
            f"unknown --kind '{kind}'",
            "use --kind job (Indexed Job + Service) or paddlejob (Kubeflow)",
        )
    if cluster == "local" and kind != "job":
        raise ConfigError(
            "--kind paddlejob needs the training operator: it runs only with --cluster k8s",
            "drop --kind or use --cluster k8s",
        )


# Nodes of a local run: one container each, every one importing Paddle on this machine; the bound
# of verify.cpu_ranks (config.BOUNDS), for the same reason.
LOCAL_NODES_MAX = 64


def _namespace(settings: Settings, cluster: str) -> str:
    """cluster.namespace, else (k8s) the kubeconfig context's as kubectl picks it."""
    if cluster == "local":
        return settings.cluster.namespace or "default"
    from paddlecd.cluster import k8s  # the kubernetes client loads only for k8s deployments

    return k8s.namespace(settings)


# The folders of the state folder that hold paddlecd's own keys, records and servers' data (what
# writes each: its module); a job folder there could read the signing key or rewrite the
# records and blobs that releases rest on. Other folders below the state folder stay a job's
# (the example job writes to .paddlecd/train-output).
OWN_FOLDERS = {
    "keys": "the signing keys", "registry": "the embedded registry's storage",
    "evidence": "the verify runs' evidence", "ledger": "the release ledger's cache",
    "artifacts": "the default model store", "builds": "the build records",
    "candidates": "the candidate records", "logs": "the logs", "pipelines": "the pipeline runs",
    "locks": "the run locks", "bootstrap": "the base bootstrap's files",
    "charts": "the rendered charts", "check": "the model checks' files",
    "verify": "the verify runs' files", "wheels": "the cached wheels",
    "node": "the Sigstore reader's packages",
}


def check_state_paths(settings: Settings, spec: jobfile.JobSpec) -> None:
    """Refuse a job folder (code, data, output) that is paddlecd's state folder as a whole or
    one of its own folders (:data:`OWN_FOLDERS`) or inside one (trial 16: output.path and
    data.path at ``.paddlecd/keys``, which holds the signing key, passed the dry run and the hint
    said to chown it to the training user; trial 17: ``.paddlecd/registry``, ``evidence``,
    ``ledger`` and ``artifacts`` passed), an output folder that holds the state folder, and an
    output folder in (or holding) the ``file://`` model store.

    Raises:
        ConfigError: naming the key, the path and what the folder holds.
    """
    from paddlecd.artifacts.storage import default_store_url, parse_url

    state = settings.state.resolve()
    store = default_store_url(settings)
    try:  # a broken storage.url is upload's to name, not a deploy's
        store_root = Path(parse_url(store).prefix).resolve() if store.startswith("file://") \
            else None
    except ConfigError:
        store_root = None
    for label, vol in (("code", spec.code), ("data", spec.data), ("output", spec.output)):
        if not vol or not vol.path:
            continue
        path = Path(vol.path).resolve()
        own = next((n for n in OWN_FOLDERS if path.is_relative_to(state / n)), None)
        if path == state or own:
            raise ConfigError(
                f"{spec.source}: {label}.path {vol.path} is paddlecd's "
                + (f"{own} folder ({OWN_FOLDERS[own]})" if own
                   else "state folder (its keys and records)"),
                f"point {label}.path at a folder of its own, e.g. {state / 'train-output'}")
        if label != "output":
            continue
        if state.is_relative_to(path):
            raise ConfigError(
                f"{spec.source}: output.path {vol.path} holds paddlecd's state folder {state} "
                "(its keys and records): the job could write there",
                f"point output.path at a folder of its own, e.g. {state / 'train-output'}")
        if store_root and (path.is_relative_to(store_root) or store_root.is_relative_to(path)):
            raise ConfigError(
                f"{spec.source}: output.path {vol.path} is in (or holds) the model store {store}: "
                "the job could rewrite stored models", "point output.path at a folder of its "
                f"own (invoke upload stores the export), e.g. {state / 'train-output'}")


def check_host_paths(spec: jobfile.JobSpec) -> None:
    """Local runs bind-mount host folders: the code and data folders, and the script inside the code
    folder, must exist before any container starts (Docker would create a missing folder,
    root-owned); an output path that exists must be a folder.

    Raises:
        ConfigError: naming the missing folder or script.
    """
    for label, vol in (("code", spec.code), ("data", spec.data)):
        if vol and vol.path and not Path(vol.path).is_dir():
            raise ConfigError(
                f"{spec.source}: {label}.path {vol.path} is not a folder on this machine",
                f"fix {label}.path (relative paths are relative to the job file)",
            )
    out = spec.output.path
    if out and Path(out).exists() and not Path(out).is_dir():  # a trial: a file passed the dry
        raise ConfigError(                                       # run, then the job ran and failed
            f"{spec.source}: output.path {out} is a file, not a folder",
            "point output.path at a folder (a new one is created for you)",
        )
    code = spec.code
    if code and code.path and spec.script.startswith(code.mount_path.rstrip("/") + "/"):
        script = Path(code.path) / spec.script[len(code.mount_path.rstrip("/")) + 1 :]
        if not script.is_file():
            raise ConfigError(
                f"{spec.source}: script {script} does not exist",
                "fix command.script (relative to code.path)",
            )


def check_claims(spec: jobfile.JobSpec) -> None:
    """A local run mounts a job file's ``claim`` as the engine's named volume of that name; an
    input (``code``, ``data``) that names no volume is refused, dry-run too: Docker would create
    it empty, the job would train on nothing and the volume stay (a trial: "succeeded"). An
    output claim may be new (Docker creates it, as output.path's folder is created).

    Raises:
        ConfigError: naming the job file, the key and the volume.
        EngineError: the engine cannot be asked.
    """
    from paddlecd import engine

    for label, vol in (("code", spec.code), ("data", spec.data)):
        if vol and vol.claim and not engine.volume_exists(vol.claim):
            raise ConfigError(
                f"{spec.source}: {label}.claim {vol.claim!r} names no volume of the engine "
                "(--cluster local mounts it as a named volume)",
                f"create and fill it first (docker volume create {vol.claim}), or give "
                f"{label}.path, a folder on this machine",
            )


def resolve(
    settings: Settings, *, release: str | None, image: str | None, variant: str | None
) -> Target:
    """The image to run as a :class:`Target`, from a release name or a digest reference.

    Raises:
        ConfigError: both or neither given, unknown release, a tag instead of a digest, a local
            image ID instead of the manifest digest, ``variant`` other than the release's.
    """
    if bool(release) == bool(image):
        raise ConfigError(
            "give exactly one of --release X.Y.Z-<variant> or --image host/repo@sha256:…",
            "e.g. invoke deploy --release 1.4.0-cpu --job examples/train.yaml",
        )
    revision = git.revision(settings.root).full
    if image:  # a local image ID where the manifest digest belongs is refused
        reference = str(refuse_image_id(parse_reference(pinned(image))))
        _check_is_image(settings, reference)
        if variant:
            _check_variant_label(settings, reference, variant)
        return Target(
            reference=reference, variant=variant or "cpu", release=None, revision=revision
        )
    found = query.find(settings, str(release))
    if variant and variant != found.variant:  # a release names its variant; never ignored
        raise ConfigError(f"--variant {variant} contradicts --release {release} (a "
                          f"{found.variant} release)", "drop --variant: it is for --image")
    return Target(
        reference=pinned(found.reference),
        variant=found.variant,
        release=f"{found.version}-{found.variant}",
        revision=revision,
    )


def _check_is_image(settings: Settings, reference: str) -> None:
    """Refuse a reference whose manifest is an artifact, not an image (trial 21: the Sigstore
    bundle referrer of a release planned a dry run, exit 0, and the run's pull failed on
    "unsupported media type application/vnd.oci.empty.v1+json"). A registry that cannot be read
    here is left to the run, as :func:`_check_variant_label` leaves it.

    Raises:
        ConfigError: the manifest has an ``artifactType`` or a config that is no image config.
    """
    try:
        client, ref = open_reference(settings, reference)
        client.retries, client.timeout = 1, 10  # a look, not a transfer: one short try
        kind = client.get_manifest(ref.repository, str(ref.digest)).artifact_type()
    except (RegistryError, OSError, ValueError):
        return
    if kind:
        raise ConfigError(f"{reference} is an artifact ({kind[:120]}), not an image",
                          "give an image's digest: invoke release.list lists the releases, "
                          "and deploy --release takes one")


def _check_variant_label(settings: Settings, reference: str, variant: str) -> None:
    """Refuse ``--variant`` that the image's ``io.paddlecd.variant`` label contradicts (verify's
    rule: the label names the variant an image was built as). An image without the label, or a
    registry that cannot be read here, is left to the run: the cluster pulls the image itself.

    Raises:
        ConfigError: the label names another variant.
    """
    try:
        client, ref = open_reference(settings, reference)
        labeled = client.image_labels(ref.repository, str(ref.digest)).get("io.paddlecd.variant")
    except (RegistryError, OSError):
        return
    if labeled not in (None, variant):
        raise ConfigError(f"{reference} is variant '{labeled}', not '{variant}'",
                          "check --image, or drop --variant (the image's label names its variant)")


def render_to(p: Plan, folder: str | Path) -> list[Path]:
    """Write the plan's manifests to ``folder`` as ``NN-<kind>-<name>.yaml``; returns the paths."""
    out = Path(folder)
    files.refuse_output_place(out, "--out", folder=True)
    if out.exists() and not out.is_dir():  # a trial: a file was called "not an empty folder"
        what = "a file" if out.is_file() else files.kind_of(out)
        raise ConfigError(f"--out {out} is {what}, not a folder",
                          "give a new or empty folder for the manifests")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(
            f"--out {out} is not an empty folder",
            "give a new or empty folder: "
            "`kubectl apply -f` would also apply whatever else is there",
        )
    # written into a folder of its own beside ``out``, which becomes ``out`` once every file is
    # whole: a full disk left a Job manifest cut at 4096 bytes (still a valid Job to kubectl)
    # that the re-run then refused as "not an empty folder" (a trial)
    stage = files.staging_folder(out, ".render")
    names = [f"{i:02d}-{m['kind'].lower()}-{m['metadata']['name']}.yaml"
             for i, m in enumerate(p.manifests)]
    try:
        for name, m in zip(names, p.manifests):
            try:
                files.write_text(stage / name, yaml.safe_dump(m, sort_keys=False))
            except OSError as e:  # a write's error names no file (a trial: ENOSPC, no path), or
                e.filename = str(out / name)  # the staging folder's (trial 21): --out's file
                raise
        stage.chmod(0o755)
        files.publish_folder(stage, out, "--out")
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return [out / name for name in names]


def run(
    settings: Settings,
    p: Plan,
    *,
    on_event: Echo,
    on_line: Echo,
    poll: float = 2.0,
    pending_timeout: float = 600.0,
) -> str:
    """Carry out plan ``p``: local containers, or submit + watch on Kubernetes.

    Returns:
        the exported model location (see :attr:`Plan.model_location`).

    Raises:
        ClusterError: the job failed or could not be submitted; EngineError (local engine).
    """
    if p.cluster == "local":
        from paddlecd import engine
        from paddlecd.cluster import local
        from paddlecd.registry import auth as registry_auth

        ref = p.target.reference  # pulled as verify pulls it: the same credentials rule
        if engine.ensure_local(ref, credentials=registry_auth.engine_credentials(settings, ref)):
            on_event(f"pulled {ref}")
        started = time.time()
        local.run(
            p.spec,
            p.target,
            job_id=p.job_id,
            on_event=on_event,
            on_line=on_line,
            keep=settings.runtime.keep,
            devices=drivers.pinned_devices() if p.spec.resources.gpus else None,  # GPU-only
        )
        _check_export(p, since=started)
        return p.model_location
    from paddlecd.cluster import k8s, watch

    api = k8s.connect(settings)
    try:
        watch.submit(api, p.manifests, on_event=on_event)
        watch.watch(
            api,
            p.manifests,
            on_event=on_event,
            on_line=on_line,
            poll=poll,
            pending_timeout=pending_timeout,
            secret=settings.cluster.image_pull_secret,
        )
    finally:
        api.close()
    return p.model_location


def _check_export(p: Plan, *, since: float) -> None:
    """The job must have written its model *this run*: a stale export from an earlier job in the
    same output folder must never be handed to upload under the new release."""
    params = Path(p.model_location + ".pdiparams")
    if p.spec.output.path and (not params.exists() or params.stat().st_mtime < since - 1):
        state = "an old model (not written by this run)" if params.exists() else "no model"
        raise ClusterError(
            f"job {p.job_id} finished but left {state} at {p.model_location}(.pdiparams)",
            f"the script must paddle.jit.save to $TRAIN_MODEL ({p.spec.model_path})",
        )
