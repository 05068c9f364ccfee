"""Submit rendered manifests to Kubernetes and watch the job to its end.

Submission creates the manifests in order (Service, then Job) and removes the Service again when
the Job cannot be created, so a failed submission leaves nothing behind. The watch polls the job's
conditions and its pods every ``poll`` seconds and turns what it sees into events and errors:

* image pull errors (``ErrImagePull``/``ImagePullBackOff``/``InvalidImageName``) are fatal at once,
  named as such, with the pull secret hint; the job is deleted;
* unschedulable pods (e.g. ``Insufficient nvidia.com/gpu``) are reported, and fatal (job deleted)
  once pending longer than ``pending_timeout`` seconds — an autoscaler may still add a node;
* ``Complete`` (Job) / ``Succeeded`` (PaddleJob) ends the watch; ``Failed``
  (``BackoffLimitExceeded``, ``DeadlineExceeded``) raises with the tail of rank 0's log.

Rank 0's log is streamed to ``on_line`` from a thread as soon as its container runs. A watch whose
pods do not change reports their phases every :data:`PROGRESS_EVERY` seconds; ``timeout`` bounds
it (``verify --nodes --cluster k8s``), leaving the job to the caller.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from paddlecd.cluster import k8s
from paddlecd.cluster.render import CONTAINER, INDEX_ANNOTATION
from paddlecd.errors import ClusterError
from paddlecd.types import Echo, KubeObject

PULL_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
KUBEFLOW_INDEX_LABEL = "training.kubeflow.org/replica-index"
PROGRESS_EVERY = 30.0  # s between "still running" events of a watch whose pods do not change


def submit(api: k8s.Api, manifests: list[KubeObject], *, on_event: Echo) -> None:
    """Create ``manifests`` in order; on a failure delete those already created, then raise.

    Raises:
        ClusterError: a create failed (translated API error); nothing is left on the cluster.
    """
    created: list[dict[str, Any]] = []
    try:
        for m in manifests:
            k8s.create(api, m)
            created.append(m)
            on_event(f"created {m['kind']} {m['metadata']['namespace']}/{m['metadata']['name']}")
    except ClusterError:
        for m in reversed(created):
            k8s.delete(api, m)
            on_event(f"removed {m['kind']} {m['metadata']['name']} again")
        raise


@dataclass
class _State:
    """What the watch has seen so far."""

    phases: dict[str, str] = field(default_factory=dict)
    pending_since: dict[str, float] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    followed: set[str] = field(default_factory=set)
    rank0: dict | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=40))
    log_thread: threading.Thread | None = None


def watch(
    api: k8s.Api,
    manifests: list[KubeObject],
    *,
    on_event: Echo,
    on_line: Echo,
    poll: float = 2.0,
    pending_timeout: float = 600.0,
    secret: str | None = None,
    timeout: float | None = None,
) -> None:
    """Watch the submitted job until it completes.

    Args:
        timeout: seconds to watch at most (None: until the job's own ``activeDeadlineSeconds``
            ends it); past it the watch raises and leaves the job to the caller.

    Raises:
        ClusterError: image pull error, unschedulable past ``pending_timeout`` seconds (both: the
            job is deleted), the job failed (its reason, rank 0's log tail in the hint), or it did
            not end within ``timeout`` seconds.
    """
    job = manifests[-1]
    ns, job_id = job["metadata"]["namespace"], job["metadata"]["name"]
    state = _State()
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    next_progress = started + PROGRESS_EVERY
    while True:
        for pod in k8s.pods(api, ns, job_id):
            _look(api, manifests, pod, state, on_event=on_event, on_line=on_line,
                  pending_timeout=pending_timeout, secret=secret)
        outcome = _outcome(k8s.job_conditions(api, job))
        if outcome:
            _drain(api, state, on_line)
            _finish(job, outcome, state, on_event)
            return
        if time.monotonic() >= next_progress:  # a quiet job still shows it is being watched
            next_progress += PROGRESS_EVERY
            on_event(f"{job['kind']} {ns}/{job_id}: {_summary(state)} after {_since(started)}")
        if deadline is not None and time.monotonic() >= deadline:
            raise ClusterError(
                f"{job['kind']} {ns}/{job_id} did not finish within {timeout:g}s",
                f"kubectl -n {ns} describe job {job_id}; raise the timeout (verify.timeout)",
            )
        time.sleep(poll)


def _finish(job: KubeObject, outcome: tuple[str, str, str], state: _State,
            on_event: Echo) -> None:
    """Say the job completed, or raise ClusterError with its reason and rank 0's log tail."""
    ns, job_id = job["metadata"]["namespace"], job["metadata"]["name"]
    kind, reason, message = outcome
    if kind == "ok":
        on_event(f"{job['kind']} {ns}/{job_id} completed")
        return
    raise ClusterError(
        f"{job['kind']} {ns}/{job_id} failed: {reason}: {message}"[:400],
        "rank 0 log tail:\n" + "\n".join(state.tail)
        if state.tail
        else f"kubectl -n {ns} describe job {job_id}",
    )


def _summary(state: _State) -> str:
    """``2 Running, 1 Pending`` — the pods by phase, as last seen."""
    counts = collections.Counter(state.phases.values())
    return ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items())) or "no pods yet"


def _since(started: float) -> str:
    return f"{time.monotonic() - started:.0f}s"


def _outcome(conditions: list[dict[str, str]]) -> tuple[str, str, str] | None:
    for c in conditions:
        if c["status"] == "True" and c["type"] in ("Complete", "Succeeded"):
            return ("ok", c["reason"], c["message"])
        if c["status"] == "True" and c["type"] == "Failed":
            return ("failed", c["reason"] or "Failed", c["message"])
    return None


def _look(
    api: k8s.Api,
    manifests: list[dict],
    pod: dict,
    state: _State,
    *,
    on_event: Echo,
    on_line: Echo,
    pending_timeout: float,
    secret: str | None,
) -> None:
    name, status = pod["metadata"]["name"], pod.get("status") or {}
    phase = status.get("phase", "Unknown")
    if state.phases.get(name) != phase:
        state.phases[name] = phase
        on_event(f"pod {name}: {phase}")
    _pull_error(api, manifests, pod, secret)
    _unschedulable(api, manifests, pod, state, on_event, pending_timeout)
    # Follow rank 0's log; after a retry (backoffLimit > 0) follow the replacement pod once the old
    # stream ended.
    following = state.log_thread is not None and state.log_thread.is_alive()
    if rank(pod) == "0" and phase in ("Running", "Succeeded", "Failed"):
        state.rank0 = pod
    if state.rank0 is pod and name not in state.followed and not following:
        state.followed.add(name)
        state.log_thread = threading.Thread(
            target=_follow, args=(api, pod, state, on_line), daemon=True
        )
        state.log_thread.start()


def _drain(api: k8s.Api, state: _State, on_line: Echo) -> None:
    """At the end: finish the running log stream, then read a last rank 0 pod not yet followed."""
    if state.log_thread:
        state.log_thread.join(timeout=30)
    if state.rank0 and state.rank0["metadata"]["name"] not in state.followed:
        state.followed.add(state.rank0["metadata"]["name"])
        _follow(api, state.rank0, state, on_line)


def _pull_error(api: k8s.Api, manifests: list[dict], pod: dict, secret: str | None) -> None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in PULL_ERRORS:
            _abort(api, manifests)
            ns = pod["metadata"]["namespace"]
            raise ClusterError(
                f"image pull error on pod {pod['metadata']['name']}: {waiting['reason']}: "
                f"{waiting.get('message', cs.get('image', ''))}"[:400]
                + " (job deleted)",
                f"check that Secret '{secret}' in namespace {ns} holds credentials for the "
                f"registry (kubectl -n {ns} create secret docker-registry {secret} "
                "--docker-server=…) and that the digest exists there; "
                "the secret name is settings cluster.image_pull_secret",
            )


def _unschedulable(
    api: k8s.Api,
    manifests: list[dict],
    pod: dict,
    state: _State,
    on_event: Echo,
    pending_timeout: float,
) -> None:
    name = pod["metadata"]["name"]
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            since = state.pending_since.setdefault(name, time.monotonic())
            message = c.get("message", "")
            if name not in state.reported:
                state.reported.add(name)
                on_event(f"pod {name} unschedulable: {message}")
            if time.monotonic() - since >= pending_timeout:
                _abort(api, manifests)
                gpus = "nvidia.com/gpu" in message
                raise ClusterError(
                    f"pod {name} unschedulable for {pending_timeout:.0f}s: {message} (job deleted)"[
                        :400
                    ],
                    "not enough free GPUs: lower --gpus-per-node/--nodes or wait for capacity"
                    if gpus
                    else "not enough free CPU/memory on any node: lower resources in the job file",
                )


def _abort(api: k8s.Api, manifests: list[dict]) -> None:
    for m in reversed(manifests):
        k8s.delete(api, m)


def rank(pod: dict) -> str | None:
    """The rank of a job's pod: its Indexed Job completion index or its PaddleJob replica index."""
    meta = pod["metadata"]
    return (meta.get("annotations") or {}).get(INDEX_ANNOTATION) or (meta.get("labels") or {}).get(
        KUBEFLOW_INDEX_LABEL
    )


def _follow(api: k8s.Api, pod: dict, state: _State, on_line: Echo) -> None:
    try:
        stream = k8s.stream_log(
            api, pod["metadata"]["namespace"], pod["metadata"]["name"], CONTAINER
        )
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            state.tail.append(line)
            on_line(f"[rank 0] {line}")
    except (ClusterError, OSError) as e:  # a lost log stream must not end the watch
        on_line(f"[rank 0] (log stream ended: {e})")
