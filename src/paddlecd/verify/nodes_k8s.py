"""``verify --nodes N --cluster k8s``: the collective checks as one Kubernetes job, read from logs.

smoke/workers/collective.py (both checks of :data:`paddlecd.verify.nodes.WORKERS`) runs as deploy
runs a job — the headless Service + Indexed Job (or PaddleJob) of
:func:`paddlecd.cluster.render.render`, created and watched by :mod:`paddlecd.cluster.watch` —
plus a ConfigMap holding this checkout's smoke suite, mounted read-only at /smoke: the image does
not carry the suite (images/Dockerfile), and the mounted copy keeps both sides of the smoke
contract changing together, as the local path's bind mount does. Every pod first runs
smoke/rendezvous.py ``--report``: the bounded rendezvous check (a wrong master name or a blocked
port fails that rank within :func:`paddlecd.verify.nodes.rendezvous_timeout` s — half the deadline
unless set —, exit 3, naming the address), then the launcher, then one ``##paddlecd-result <file>
<json>`` line per JSON file its emptyDir /out holds (the node's facts; on rank 0
``collective.json``, also when the launcher failed). After the job ends each rank's pod log is
saved as ``<out>/logs/collective/rank-<r>.log`` and its marked lines become the same files the
local path writes (``node-<r>.json``, ``collective.json``), judged by
:func:`paddlecd.verify.nodes.judge_parts`. The Job, Service and ConfigMap are deleted afterwards
unless ``runtime.keep``. No API server can run on the test machines: this module is tested
against a scripted one (tests/unit/test_verify_nodes_k8s.py).
"""

from __future__ import annotations

import copy
import json
import secrets
import time
from pathlib import Path
from typing import Any

from paddlecd import git
from paddlecd.cluster import k8s, watch
from paddlecd.cluster.render import CONTAINER, Target, render
from paddlecd.config import Settings
from paddlecd.errors import ClusterError, ConfigError
from paddlecd.types import Echo, KubeObject
from paddlecd.verify import nodes as multinode

MARK = "##paddlecd-result"  # as smoke/rendezvous.py MARK
# what the pods run (the helpers _common, _devices, _figures the workers import); not the tests
SMOKE_FILES = ("_*.py", "rendezvous.py", "workers/*.py")
# the job's worker and the parts it imports
WORKER_FILES = tuple(f"workers/{w}.py" for w in (multinode.JOB, *multinode.WORKERS))
WATCH_GRACE = 60.0  # s the watch waits past the Job's activeDeadlineSeconds for its controller


def job_id(suffix: str | None = None) -> str:
    """``verify-collective-<6 hex>``: a fresh name per run (``suffix`` fixes it, for tests)."""
    return f"verify-{multinode.JOB}-{suffix or secrets.token_hex(3)}"


def _smoke_configmap(settings: Settings, meta: dict[str, Any]) -> KubeObject:
    """A ConfigMap named like the job holding smoke/ (:data:`SMOKE_FILES`, ~20 KB of the 1 MiB a
    ConfigMap may hold); keys are the paths with ``/`` as ``__`` (keys allow ``[-._a-zA-Z0-9]``).

    Raises:
        ConfigError: ``settings.root`` has no smoke suite (rendezvous.py or a worker missing).
    """
    root = settings.root / "smoke"
    files = sorted(p for pattern in SMOKE_FILES for p in root.glob(pattern) if p.is_file())
    missing = [w for w in ("rendezvous.py", *WORKER_FILES) if not (root / w).is_file()]
    if missing:
        raise ConfigError(
            f"the smoke suite is incomplete at {root}: no {', '.join(missing)}",
            "run from a paddlecd checkout (the pods get this checkout's smoke/ files)",
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": copy.deepcopy(meta),
        "data": {_key(p.relative_to(root)): p.read_text() for p in files},
    }


def _key(relative: Path) -> str:
    return relative.as_posix().replace("/", "__")


def planned_manifests(settings: Settings, reference: str, *, variant: str, nodes: int,
                      gpus_per_node: int, kind: str) -> list[KubeObject]:
    """The run's manifests for ``verify --cluster k8s --dry-run``, in creation order, as
    :func:`manifests` makes them for a run of ``reference`` (``repo@sha256:…``) in the
    kubeconfig's namespace; nothing is submitted.

    Raises:
        ConfigError: as :func:`manifests`; ClusterError: an unusable kubeconfig namespace.
    """
    target = Target(reference=reference, variant=variant,
                    revision=git.revision(settings.root).full)
    return manifests(settings, target, job_id=job_id(), nodes=nodes,
                     gpus_per_node=gpus_per_node, kind=kind, namespace=k8s.namespace(settings),
                     pull_secret=settings.cluster.image_pull_secret)


def manifests(
    settings: Settings,
    target: Target,
    *,
    job_id: str,
    nodes: int,
    gpus_per_node: int,
    kind: str = "job",
    namespace: str = "default",
    pull_secret: str | None = None,
) -> list[KubeObject]:
    """The manifests of the collective job, in creation order: [ConfigMap, Service, Job] (``kind``
    ``job``) or [ConfigMap, PaddleJob]. The pod of :func:`paddlecd.verify.nodes.job_spec`, with
    /smoke from the ConfigMap, /out an emptyDir, and smoke/rendezvous.py ``--report`` in front
    of the launcher.

    Raises:
        ConfigError: as :func:`paddlecd.cluster.render.render` (kind, digest, job id length),
            or as :func:`paddlecd.verify.nodes.rendezvous_timeout`.
    """
    spec = multinode.job_spec(settings, nodes=nodes, gpus_per_node=gpus_per_node, out=Path("/out"))
    rendered = render(
        spec, target, job_id=job_id, kind=kind, namespace=namespace, pull_secret=pull_secret
    )
    configmap = _smoke_configmap(settings, rendered[0]["metadata"])
    wait = multinode.rendezvous_timeout(settings, k8s=True)
    for m in rendered:
        if m["kind"] in ("Job", "PaddleJob"):
            _rewire(_pod_spec(m), configmap, wait=wait, paddlejob=m["kind"] == "PaddleJob")
    return [configmap, *rendered]


def _pod_spec(m: dict[str, Any]) -> dict[str, Any]:
    if m["kind"] == "Job":
        return m["spec"]["template"]["spec"]
    return m["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]


def _rewire(pod: dict[str, Any], configmap: dict[str, Any], *, wait: float, paddlejob: bool
            ) -> None:
    """The rendered pod, made to run verify: volumes, the rendezvous precheck (waiting ``wait``
    seconds for the master), its environment."""
    items = [{"key": k, "path": k.replace("__", "/")} for k in configmap["data"]]
    sources = {
        "code": {"configMap": {"name": configmap["metadata"]["name"], "items": items}},
        "output": {"emptyDir": {}},  # the pod's own: results leave through the log (MARK)
    }
    pod["volumes"] = [
        {"name": v["name"], **sources[v["name"]]} if v["name"] in sources else v
        for v in pod["volumes"]
    ]
    # no host folder is left to give to the uid (an emptyDir is world-writable): no root init
    pod.pop("initContainers", None)
    (container,) = pod["containers"]
    # $(VAR) is expanded by the kubelet from the container's env: the Job's index and the master
    # the launcher dials (render.environment; the PaddleJob operator sets PADDLE_MASTER itself).
    precheck = ["python", "/smoke/rendezvous.py", "--rank", "$(JOB_COMPLETION_INDEX)"]
    precheck += ["--master", "$(PADDLE_MASTER)", "--out", "/out"]
    precheck += ["--timeout", f"{wait:g}", "--report", "--"]
    container["command"] = precheck + container["command"]
    env = [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}]  # /smoke is read-only
    if paddlejob:  # the operator labels each pod with its index; the Job's env has it already
        index = f"metadata.labels['{watch.KUBEFLOW_INDEX_LABEL}']"
        from_label = {"fieldRef": {"fieldPath": index}}
        env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": from_label})
    container["env"] = env + container["env"]


def run_k8s(
    settings: Settings,
    target: Target,
    *,
    nodes: int,
    gpus_per_node: int,
    out: Path,
    on_event: Echo,
    on_line: Echo,
    kind: str = "job",
    poll: float = 2.0,
    timeout: float | None = None,
    suffix: str | None = None,
) -> multinode.NodeRun:
    """Run the collective job on the kubeconfig's cluster; a job that fails or times out fails
    the checks of the parts rank 0 did not report, naming the rank and its cause
    (:func:`paddlecd.verify.nodes.judge_parts`). Each rank's log lands in
    ``out/logs/collective/rank-<r>.log``.

    Args:
        timeout: seconds to watch the job (default ``verify.timeout`` + :data:`WATCH_GRACE`).
        suffix: the job id's suffix (default random, :func:`job_id`).

    Raises:
        ClusterError: no kubeconfig, the API server unreachable, or a manifest refused (nothing
            is left behind) — the run could not happen, as for ``deploy``.
    """
    api = k8s.connect(settings)
    multinode.clear(out)
    wait = settings.verify.timeout + WATCH_GRACE if timeout is None else timeout
    lines: list[str] = []

    def seen(line: str) -> None:
        lines.append(line)
        on_line(line)

    try:
        ms = manifests(settings, target, job_id=job_id(suffix), nodes=nodes,
                       gpus_per_node=gpus_per_node, kind=kind, namespace=k8s.namespace(settings),
                       pull_secret=settings.cluster.image_pull_secret)
        started = time.monotonic()
        failure = _run_one(settings, api, ms, out / "logs" / multinode.JOB, on_event, seen, poll,
                           wait)
    finally:
        api.close()
    result = multinode.read_result(out)
    if not result and not failure:  # the pods succeeded, yet rank 0 printed no result line
        failure = f"rank 0 printed no {MARK} {multinode.JOB}.json line (see its log)"
    checks = multinode.judge_parts(result, failure=failure,
                                   world_size=nodes * max(1, gpus_per_node),
                                   duration_s=round(time.monotonic() - started, 3))
    facts = [json.loads(p.read_text()) for p in sorted(out.glob("node-*.json"))]
    return multinode.finish(checks, facts, lines, logs=out / "logs", gpu=gpus_per_node > 0)


def _run_one(
    settings: Settings,
    api: k8s.Api,
    ms: list[dict[str, Any]],
    logs: Path,
    on_event: Echo,
    on_line: Echo,
    poll: float,
    wait: float,
) -> str | None:
    """Submit, watch, save the rank logs and their results, clean up; the failure, or None."""
    job = ms[-1]
    watch.submit(api, ms, on_event=on_event)
    failure = None
    try:
        try:
            watch.watch(
                api,
                ms,
                on_event=on_event,
                on_line=on_line,
                poll=poll,
                secret=settings.cluster.image_pull_secret,
                timeout=wait,
            )
        except ClusterError as e:
            failure = f"{e.cause}\n{e.hint}"
        failed = save_rank_logs(api, job["metadata"]["namespace"], job["metadata"]["name"], logs)
        if failure:  # the rank that failed on its own comes first: its log names the cause
            failure = "; ".join(failed + [failure]) if failed else failure
    finally:
        if not settings.runtime.keep:
            for m in reversed(ms):
                k8s.delete(api, m)
            on_event("removed " + ", ".join(f"{m['kind']} {m['metadata']['name']}" for m in ms))
    return failure


def save_rank_logs(api: k8s.Api, namespace: str, job: str, folder: Path) -> list[str]:
    """Write each rank's pod log to ``folder/rank-<r>.log`` and its marked results next to the
    evidence (``folder/../../<file>``, as the local path writes them); returns one line per rank
    whose container failed, first failed first: ``rank 1 (pod <name>) exited 3: <its cause
    line>``. A retried
    rank's latest pod wins. A log that cannot be read is noted in its file, not raised."""
    folder.mkdir(parents=True, exist_ok=True)
    latest: dict[str, dict[str, Any]] = {}
    for pod in sorted(
        k8s.pods(api, namespace, job), key=lambda p: p["metadata"].get("creationTimestamp") or ""
    ):
        latest[watch.rank(pod) or "?"] = pod
    failed: list[tuple[str, str]] = []  # (finishedAt, line): the first to fail is the likely cause
    for rank, pod in sorted(latest.items()):
        name = pod["metadata"]["name"]
        try:
            text = k8s.read_log(api, namespace, name, CONTAINER)
        except ClusterError as e:
            text = f"(log not readable: {e.cause})\n"
        (folder / f"rank-{rank}.log").write_text(text)
        for file, data in results(text).items():
            (folder.parent.parent / file).write_text(json.dumps(data))
        code, finished = _terminated(pod)
        if code not in (None, 0):
            failed.append((finished, f"rank {rank} (pod {name}) exited {code}: {cause(text)}"))
    return [line for _, line in sorted(failed)]


def results(log: str) -> dict[str, Any]:
    """``{file: JSON value}`` from the ``##paddlecd-result <file> <json>`` lines of a pod log;
    a file name that is not a plain ``*.json`` name, or a value that does not parse, is skipped."""
    found: dict[str, Any] = {}
    for line in log.splitlines():
        if line.startswith(MARK + " "):
            found.update(_result(line))
    return found


def _result(line: str) -> dict[str, Any]:
    parts = line.split(" ", 2)
    if len(parts) != 3 or not parts[1].endswith(".json") or "/" in parts[1]:
        return {}
    try:
        return {parts[1]: json.loads(parts[2])}
    except ValueError:
        return {}


def cause(log: str) -> str:
    """The line of a failed rank's log that names why: its rendezvous verdict when there is one,
    else its last line that is not a result mark."""
    kept = [line for line in log.splitlines() if line.strip() and not line.startswith(MARK)]
    named = [line for line in kept if line.startswith("rendezvous:") and "cannot" in line]
    return (named or kept or ["(empty log)"])[-1][:400]


def _terminated(pod: dict[str, Any]) -> tuple[int | None, str]:
    """``(exit code, finishedAt)`` of the pod's container; ``(None, "")`` while it runs."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if cs.get("name") == CONTAINER and terminated:
            return int(terminated.get("exitCode", -1)), str(terminated.get("finishedAt") or "")
    return None, ""
