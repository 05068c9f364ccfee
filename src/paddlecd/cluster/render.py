"""Render a job spec and a promoted image into Kubernetes manifests (pure: dicts in, dicts out).

Two kinds:

* ``job`` (default): an Indexed ``batch/v1`` Job (completions = parallelism = nodes) plus a headless
  Service named like the job. Pods get hostname ``<job>-<index>`` and subdomain ``<job>``, so rank 0
  is ``<job>-0.<job>`` in DNS. Every pod runs :func:`launch_argv` with
  ``--rank $(JOB_COMPLETION_INDEX)``.
* ``paddlejob``: a Kubeflow ``PaddleJob`` (kubeflow.org/v1) for clusters running the training
  operator, which then sets the rendezvous environment itself.

Retry semantics (``restartPolicy: Never``): a failed rank is never restarted in place — the Job
controller creates a new pod for that index, and every failed pod counts against ``backoffLimit``
for the whole Job; past it the Job fails (``BackoffLimitExceeded``) and its running pods are
terminated. ``activeDeadlineSeconds`` bounds the whole Job (``DeadlineExceeded``). In-place restarts
(``OnFailure``) are avoided because a restarted rank cannot rejoin a running collective: the other
ranks would wait until the deadline. Reference:
https://kubernetes.io/docs/concepts/workloads/controllers/job/#handling-pod-and-container-failures
"""

from __future__ import annotations

import copy
import posixpath
from dataclasses import dataclass
from typing import Any

from paddlecd.cluster.jobfile import (  # noqa: F401 (TRAIN_ENV re-exported)
    DEPRECATED_TRAIN_ENV,
    TRAIN_ENV,
    JobSpec,
    Volume,
)
from paddlecd.errors import ConfigError
from paddlecd.registry.reference import parse_reference
from paddlecd.types import KubeObject

KINDS = ("job", "paddlejob")
CLUSTERS = ("local", "k8s")  # where a job runs: containers on this machine, or Kubernetes
CONTAINER = "paddle"  # kubeflow PaddleJobDefaultContainerName
PORT_NAME = (
    "master"  # kubeflow PaddleJobDefaultPortName (its default port, 36543, is the job file default)
)
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INIT_RESOURCES = {"cpu": "100m", "memory": "64Mi"}  # one chown; a namespace quota may want limits
LAUNCH_LOG_DIR = (
    "/tmp/paddle-launch"  # launch writes per-worker logs here; the image's workdir may be read-only
)


@dataclass(frozen=True)
class Target:
    """What runs: ``reference`` (``host/repo@sha256:…``), its ``variant``, the ``release`` name
    (``1.4.0-cu126``, None for a bare digest) and the git ``revision`` of this checkout."""

    reference: str
    variant: str
    release: str | None = None
    revision: str = "unknown"

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of :attr:`reference`."""
        return str(parse_reference(self.reference).digest)


def pinned(reference: str) -> str:
    """``reference`` as ``host/repo@sha256:…`` (a tag next to the digest is dropped).

    Raises:
        ConfigError: the reference has no digest (a tag only) or does not parse.
    """
    ref = parse_reference(reference, default_tag=None)
    if not ref.digest:
        raise ConfigError(
            f"image {reference} is a tag, not a digest: jobs run digests only",
            "pass --release X.Y.Z-<variant>, or --image host/repo@sha256:<digest>",
        )
    return str(ref.by_digest(ref.digest))


def labels(target: Target, job_id: str) -> dict[str, str]:
    """Labels linking a job to its release, digest and git revision (label-safe, ≤ 63 characters).

    The digest label is ``sha256_`` + the first 56 hex digits (a label value is limited to 63
    characters); the full reference is in the ``paddlecd.io/reference`` annotation.
    """
    algo, _, hexdigits = target.digest.partition(":")
    return {
        "app.kubernetes.io/name": "paddlecd-train",
        "app.kubernetes.io/managed-by": "paddlecd",
        "paddlecd.io/job": job_id,
        "paddlecd.io/release": target.release or "none",
        "paddlecd.io/variant": target.variant,
        "paddlecd.io/digest": f"{algo}_{hexdigits[:56]}",
        "paddlecd.io/git-revision": target.revision[:63],
    }


def rank_host(job_id: str, rank: int | str) -> str:
    """DNS name of a rank: ``<job>-<rank>.<job>`` (pod hostname . headless Service/Docker alias)."""
    return f"{job_id}-{rank}.{job_id}"


def launch_argv(spec: JobSpec, job_id: str, rank: int | str) -> list[str]:
    """The command every node runs: ``python -m paddle.distributed.launch`` with rendezvous flags.

    ``--host`` is the rank's own DNS name: Paddle 3.0's launcher starts the rendezvous (KV) server
    only on the node whose ``--host`` equals the ``--master`` host (launch/controllers/master.py
    compares strings), and accepts ``--host`` only when it contains a dot (launch/plugins).
    One process per GPU, else one (CPU, gloo).
    """
    return [
        "python",
        "-m",
        "paddle.distributed.launch",
        "--master",
        f"{rank_host(job_id, 0)}:{spec.port}",
        "--host",
        rank_host(job_id, rank),
        "--nnodes",
        str(spec.nodes),
        "--rank",
        str(rank),
        "--nproc_per_node",
        str(max(1, spec.resources.gpus)),
        "--job_id",
        job_id,
        "--log_dir",
        LAUNCH_LOG_DIR,
        spec.script,
        *spec.args,
    ]


def environment(spec: JobSpec, target: Target, job_id: str) -> dict[str, str]:
    """Environment of every node. ``PADDLE_MASTER``/``PADDLE_NNODES``/``PADDLE_JOB_ID`` and
    ``PYTHONUNBUFFERED`` are the names the Kubeflow PaddleJob controller sets in collective mode
    (kubeflow/training-operator pkg/controller.v1/paddlepaddle/envvar.go), so a script reads the
    same variables under both kinds; ``TRAIN_*`` (:data:`TRAIN_ENV`) tell the script where to
    write, and the deprecated ``PADDLECD_*`` names carry the same values for one release."""
    ours = {
        "TRAIN_OUTPUT": spec.output.mount_path,
        "TRAIN_MODEL": spec.model_path,
        "TRAIN_CHECKPOINT_DIR": spec.checkpoint,
        "TRAIN_RELEASE": target.release or "",
        "TRAIN_IMAGE": target.reference,
    }
    deprecated = {DEPRECATED_TRAIN_ENV[k]: v for k, v in ours.items()}
    return {
        "PADDLE_MASTER": f"{rank_host(job_id, 0)}:{spec.port}",
        "PADDLE_NNODES": str(spec.nodes),
        "PADDLE_JOB_ID": job_id,
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
        **ours,
        **deprecated,
        **dict(spec.env),
    }




def render(
    spec: JobSpec,
    target: Target,
    *,
    job_id: str,
    kind: str = "job",
    namespace: str = "default",
    pull_secret: str | None = None,
) -> list[KubeObject]:
    """Manifests for one run of ``spec`` on ``target``, in creation order.

    Args:
        job_id: ``<name>-<suffix>``, unique per run (DNS-1123 label, ≤ 52 characters so pod
            hostnames ``<job>-<index>`` stay within 63).
        kind: ``job`` → [Service, Job]; ``paddlejob`` → [PaddleJob].
        pull_secret: name of the ``kubernetes.io/dockerconfigjson`` Secret for the private registry.

    Raises:
        ConfigError: unknown kind, a tag instead of a digest, a job id that is too long.
    """
    if kind not in KINDS:
        raise ConfigError(
            f"unknown job kind '{kind}'",
            "use --kind job (Indexed Job + Service) or --kind paddlejob",
        )
    if len(job_id) > 52:
        raise ConfigError(
            f"job id '{job_id}' is longer than 52 characters", "shorten 'name' in the job file"
        )
    target = Target(
        reference=pinned(target.reference),
        variant=target.variant,
        release=target.release,
        revision=target.revision,
    )
    meta = {
        "name": job_id,
        "namespace": namespace,
        "labels": labels(target, job_id),
        "annotations": {
            "paddlecd.io/reference": target.reference,
            "paddlecd.io/job-file": posixpath.basename(spec.source),
        },
    }
    if kind == "paddlejob":
        return [_paddlejob(spec, target, job_id, meta, pull_secret)]
    # Each manifest owns its metadata: no shared dicts (YAML dumps would show anchors).
    return [
        _service(spec, copy.deepcopy(meta)),
        _job(spec, target, job_id, copy.deepcopy(meta), pull_secret),
    ]


def _service(spec: JobSpec, meta: dict) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "selector": {"paddlecd.io/job": meta["name"]},
            # Ranks rendezvous before any readiness: publish addresses of pods that are not ready
            # yet.
            "publishNotReadyAddresses": True,
            "ports": [
                {"name": PORT_NAME, "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}
            ],
        },
    }


def _job(
    spec: JobSpec, target: Target, job_id: str, meta: dict, secret: str | None
) -> dict[str, Any]:
    env = [
        {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}},
        }
    ]
    env += [{"name": k, "value": v} for k, v in environment(spec, target, job_id).items()]
    pod = _pod(spec, target, launch_argv(spec, job_id, "$(JOB_COMPLETION_INDEX)"), env, secret)
    pod["subdomain"] = job_id
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "completions": spec.nodes,
            "parallelism": spec.nodes,
            "completionMode": "Indexed",
            "backoffLimit": spec.backoff_limit,
            "activeDeadlineSeconds": spec.active_deadline_seconds,
            "template": {"metadata": copy.deepcopy(_template_meta(meta)), "spec": pod},
        },
    }


def _paddlejob(
    spec: JobSpec, target: Target, job_id: str, meta: dict, secret: str | None
) -> dict[str, Any]:
    # The operator sets PADDLE_MASTER (rank 0: its own pod IP), PADDLE_NNODES, PADDLE_JOB_ID and
    # PYTHONUNBUFFERED; launch reads them. Setting them too would duplicate env names.
    ours = {
        k: v
        for k, v in environment(spec, target, job_id).items()
        if not k.startswith("PADDLE_") and k != "PYTHONUNBUFFERED"
    }
    argv = [
        "python",
        "-m",
        "paddle.distributed.launch",
        "--nproc_per_node",
        str(max(1, spec.resources.gpus)),
        "--log_dir",
        LAUNCH_LOG_DIR,
        spec.script,
        *spec.args,
    ]
    pod = _pod(spec, target, argv, [{"name": k, "value": v} for k, v in ours.items()], secret)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": meta,
        "spec": {
            "runPolicy": {
                "backoffLimit": spec.backoff_limit,
                "activeDeadlineSeconds": spec.active_deadline_seconds,
                "cleanPodPolicy": "Running",
            },
            "paddleReplicaSpecs": {
                "Worker": {
                    "replicas": spec.nodes,
                    "restartPolicy": "Never",
                    "template": {"metadata": copy.deepcopy(_template_meta(meta)), "spec": pod},
                }
            },
        },
    }


def _template_meta(meta: dict) -> dict:
    return {"labels": meta["labels"], "annotations": meta["annotations"]}


def _pod(
    spec: JobSpec, target: Target, argv: list[str], env: list[dict], secret: str | None
) -> dict[str, Any]:
    r = spec.resources
    amounts = {
        "cpu": r.cpu,
        "memory": r.memory,
        **({"nvidia.com/gpu": str(r.gpus)} if r.gpus else {}),
    }
    uid = spec.run_as_user
    container = {
        "name": CONTAINER,
        "image": target.reference,
        "imagePullPolicy": "IfNotPresent",
        "command": argv,
        "env": env,
        "workingDir": "/tmp",
        "ports": [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
        "resources": {
            "requests": dict(amounts),
            "limits": dict(amounts),
        },  # GPUs: requests must equal limits
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]
        + [
            {"name": n, "mountPath": v.mount_path, "readOnly": v.read_only}
            for n, v in spec.volumes.items()
        ],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "containers": [container],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            # fsGroup makes a claim's volume group-writable for uid; OnRootMismatch skips the
            # kubelet's recursive chown of a claim whose root is already right (checkpoints)
            "fsGroup": uid,
            "fsGroupChangePolicy": "OnRootMismatch",
        },
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": r.shm}}]
        + [_volume(n, v) for n, v in spec.volumes.items()],
    }
    owned = _owned_by_init(spec, target)
    if owned:
        pod["initContainers"] = [owned]
    if secret:
        pod["imagePullSecrets"] = [{"name": secret}]
    return pod


def _owned_by_init(spec: JobSpec, target: Target) -> dict[str, Any] | None:
    """The init container that gives uid the writable ``path`` (hostPath) volumes, or None.

    The kubelet creates a missing ``DirectoryOrCreate`` folder as root, mode 0755, and fsGroup
    does not apply to hostPath (kubernetes.io/docs/concepts/storage/volumes/#hostpath), so
    uid 1000 could not write there. This container runs the job's own image (already pulled
    for the node; no other image to reach) as root with CAP_CHOWN alone and chowns each mount
    point — not its contents, which earlier runs of the same uid own. A cluster under the
    baseline or restricted Pod Security Standard refuses hostPath (and this) anyway: use a claim
    there (docs/kubernetes.md)."""
    writable = [(n, v) for n, v in spec.volumes.items() if v.path and not v.read_only]
    if not writable:
        return None
    uid = spec.run_as_user
    return {
        "name": "own-output",
        "image": target.reference,
        "imagePullPolicy": "IfNotPresent",
        "command": ["chown", f"{uid}:{uid}", *(v.mount_path for _, v in writable)],
        "volumeMounts": [{"name": n, "mountPath": v.mount_path} for n, v in writable],
        "resources": {"requests": dict(INIT_RESOURCES), "limits": dict(INIT_RESOURCES)},
        "securityContext": {
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        },
    }


def _volume(name: str, v: Volume) -> dict[str, Any]:
    if v.claim:
        return {
            "name": name,
            "persistentVolumeClaim": {"claimName": v.claim, "readOnly": v.read_only},
        }
    return {
        "name": name,
        "hostPath": {"path": posixpath.normpath(str(v.path)), "type": "DirectoryOrCreate"},
    }
