"""``verify --nodes N``: the collective checks as an N-node job, launched like ``deploy`` launches.

The AllReduce worker and the data-parallel training worker of smoke/workers/ each run as one job
of N nodes through :func:`paddlecd.cluster.render.launch_argv` (``--master <job>-0.<job>:port``,
``--nnodes N``, ``--rank``) — locally as N containers on one network by
:func:`paddlecd.cluster.local.run`, on Kubernetes as the Indexed Job + headless Service of
:func:`paddlecd.cluster.render.render` (:mod:`paddlecd.verify.nodes_k8s`). Before its launcher,
every node runs smoke/rendezvous.py: it records the node's facts and fails within
:func:`rendezvous_timeout` seconds, naming the address, when the master cannot be reached (the
launcher itself would wait unbounded). Each rank's logs are kept under ``<out>/logs/<worker>/``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd.cluster import local
from paddlecd.cluster.jobfile import JobSpec, Resources, Volume
from paddlecd.cluster.render import Target, rank_host
from paddlecd.config import Settings
from paddlecd.errors import ClusterError, ConfigError
from paddlecd.types import Echo
from paddlecd.verify import budget, drivers, nccl
from paddlecd.verify.evidence import Check

WORKERS = {
    "allreduce": "allreduce/test_allreduce_exact_sums",
    "train_dp": "convergence/test_data_parallel_matches_single_process",
}
RENDEZVOUS_TIMEOUT = 60.0  # s a local rank waits for the master (containers start together)
DP_RTOL = 1e-4  # as smoke/test_convergence.py: data parallel vs one process, float32 sum order
LOSS_EVERY = 20  # as smoke/test_convergence.py: steps between the recorded loss-curve points


GLOO = "none/gloo"  # CPU: gloo over TCP, no NCCL, so no NCCL transport to report


@dataclass(frozen=True)
class NodeRun:
    """What an N-node run produced: its ``checks`` (smoke names), the per-node ``facts``
    (``rank``, ``hostname``, ``gpu``, ``gpus``, ``driver``, ``transport``), the launcher
    ``lines`` seen and the NCCL ``transports`` of all ranks (:func:`paddlecd.verify.nccl.transports`
    names; empty on CPU)."""

    checks: tuple[Check, ...]
    facts: tuple[dict[str, Any], ...]
    lines: tuple[str, ...]
    transports: tuple[str, ...] = ()


def job_spec(
    settings: Settings, worker: str, *, nodes: int, gpus_per_node: int, out: Path
) -> JobSpec:
    """The job of one smoke ``worker`` (``allreduce`` or ``train_dp``) on ``nodes`` nodes: smoke/
    read-only at /smoke, ``out`` at /out, one process per GPU (or one, gloo, on CPU); a GPU
    node's memory and shm come from :func:`paddlecd.verify.budget.gpu_node`."""
    env = {"PYTHONPATH": "/smoke", "SMOKE_OUT": "/out", "SMOKE_SINGLE_TOO": "1"}
    memory, shm = "2Gi", "512Mi"  # CPU: one gloo process
    if gpus_per_node:  # GPU-only: NCCL names the transports it chose (verify/nccl.py)
        env["NCCL_DEBUG"] = "INFO"
        memory, shm = budget.gpu_node(gpus_per_node)  # the sweep's per-rank budget
    return JobSpec(
        name=f"verify-{worker.replace('_', '-')}",
        script=f"/smoke/workers/{worker}.py",
        args=("--out", f"/out/{worker}.json", "--device", "gpu" if gpus_per_node else "cpu"),
        nodes=nodes,
        code=Volume("/smoke", path=str(settings.root / "smoke"), read_only=True),
        output=Volume("/out", path=str(out)),
        checkpoint="/out",
        resources=Resources(cpu="1", memory=memory, gpus=gpus_per_node, shm=shm),
        active_deadline_seconds=settings.verify.timeout,
        env=tuple(sorted(env.items())),
        source="verify --nodes",
    )


def rendezvous_timeout(settings: Settings, *, k8s: bool) -> float:
    """Seconds a rank waits for the master before it fails naming the address:
    ``verify.rendezvous_timeout`` when set; else :data:`RENDEZVOUS_TIMEOUT` on one machine (the
    containers start together from an image already pulled) and half the job's deadline
    (``verify.timeout``) on Kubernetes, where pods are not gang-scheduled and a node may pull a
    10 GB image minutes after another: with ``backoffLimit: 0`` a rank that gives up early fails
    the job, and the other half is left for the run. Paddle's launcher sets no bound of its own:
    HTTPMaster.sync_peers polls until the master answers (PaddlePaddle/Paddle
    python/paddle/distributed/launch/controllers/master.py @
    a883f87f459849704f1769f3c4e5302d45d3a99d); ``--elastic_timeout`` applies to the etcd
    master only (context/args_envs.py @ 45f651a798f99221d4ad85822f1bf006dcb783a4).

    Raises:
        ConfigError: the setting is not shorter than ``verify.timeout`` (the deadline would end
            the job first, naming no rank).
    """
    given, deadline = settings.verify.rendezvous_timeout, settings.verify.timeout
    if given is None:
        return deadline / 2 if k8s else min(RENDEZVOUS_TIMEOUT, deadline / 2)
    if given >= deadline:
        raise ConfigError(
            f"setting 'verify.rendezvous_timeout' is {given} s, not less than verify.timeout "
            f"({deadline} s)",
            "give a wait shorter than the job's deadline, or remove it for half the deadline on "
            "Kubernetes",
        )
    return float(given)


def preflight(
    spec: JobSpec, job_id: str, *, master: str | None = None, timeout: float = RENDEZVOUS_TIMEOUT
) -> local.Preflight:
    """smoke/rendezvous.py's argv for a rank; ``master`` overrides the address ranks dial
    (default rank 0's DNS name and the job's port, what the launcher dials)."""
    address = master or f"{rank_host(job_id, 0)}:{spec.port}"
    return lambda rank: [
        "python",
        "/smoke/rendezvous.py",
        "--rank",
        str(rank),
        "--master",
        address,
        "--out",
        "/out",
        "--timeout",
        f"{timeout:g}",
    ]


def run_local(
    settings: Settings,
    target: Target,
    *,
    nodes: int,
    gpus_per_node: int,
    out: Path,
    on_line: Echo,
    master: str | None = None,
    timeout: float | None = None,
) -> NodeRun:
    """Run both collective workers as ``nodes`` local containers each; a job that fails becomes a
    failed check with the executor's cause (which rank, why) and stops the run. ``timeout``: the
    rendezvous wait (default :func:`rendezvous_timeout`).

    Raises:
        EngineError: the engine could not create the network or a container.
    """
    wait = rendezvous_timeout(settings, k8s=False) if timeout is None else timeout
    clear(out)
    checks: list[Check] = []
    lines: list[str] = []

    def seen(line: str) -> None:
        lines.append(line)
        on_line(line)

    for worker, name in WORKERS.items():
        check, ran = _run_worker(settings, target, worker, name, nodes=nodes,
                                 gpus_per_node=gpus_per_node, out=out, on_event=on_line,
                                 on_line=seen, master=master, wait=wait)
        checks.append(check)
        if not ran:
            break  # the job itself failed (the check says why); the next one would as well
    facts = [json.loads(p.read_text()) for p in sorted(out.glob("node-*.json"))]
    return finish(checks, facts, lines, logs=out / "logs", gpu=gpus_per_node > 0)


def _run_worker(settings: Settings, target: Target, worker: str, name: str, *, nodes: int,
                gpus_per_node: int, out: Path, on_event: Echo, on_line: Echo,
                master: str | None, wait: float) -> tuple[Check, bool]:
    """One collective worker as an N-node local job: its check, and whether the job ran (False:
    the executor failed it, and the check carries the executor's cause)."""
    spec = job_spec(settings, worker, nodes=nodes, gpus_per_node=gpus_per_node, out=out)
    job_id = spec.new_job_id()
    started = time.monotonic()
    try:
        local.run(
            spec,
            target,
            job_id=job_id,
            on_event=on_event,
            on_line=on_line,
            keep=settings.runtime.keep,
            preflight=preflight(spec, job_id, master=master, timeout=wait),
            logs=out / "logs" / worker,
            devices=drivers.pinned_devices() if gpus_per_node else None,  # GPU-only
        )
    except ClusterError as e:
        return Check(name=name, passed=False, duration_s=_since(started),
                     message=f"{e.cause}\n{e.hint}"[:2000]), False
    result = json.loads((out / f"{worker}.json").read_text())
    world = nodes * max(1, gpus_per_node)
    return judge(worker, result, world_size=world, duration_s=_since(started)), True


def clear(out: Path) -> None:
    """Remove what an earlier run left in ``out`` (node facts, worker results, rank logs), so
    nothing stale is taken for this run's."""
    for path in [*out.glob("node-*.json"), *(out / f"{w}.json" for w in WORKERS)]:
        path.unlink(missing_ok=True)
    if (out / "logs").is_dir():
        shutil.rmtree(out / "logs")


def finish(
    checks: list[Check], facts: list[dict[str, Any]], lines: list[str], *, logs: Path, gpu: bool
) -> NodeRun:
    """The :class:`NodeRun` of a finished run, local or Kubernetes: each node's facts get the
    ``transport`` its own AllReduce logs name (``logs/allreduce/rank-<r>.log`` and
    ``rank-<r>/workerlog.*``), and the AllReduce check the transports of all ranks as metric
    ``transport`` — on CPU always :data:`GLOO`, on GPU the NCCL names or "not reported"."""
    union: set[str] = set()
    for fact in facts:
        names = nccl.transports(rank_log_lines(logs / "allreduce", fact["rank"])) if gpu else ()
        union.update(names)
        fact["transport"] = transport_label(names, gpu=gpu)
    ordered = tuple(n for n in nccl.NAMES if n in union)
    label = transport_label(ordered, gpu=gpu)
    extra: dict[str, Any] = {"transport": label}
    model = next((f["gpu"] for f in facts if f.get("gpu")), None)
    if gpu and model:  # GPU-only: the card bandwidth.check looks up (no environment check here)
        extra["gpu_name"] = model
    checks = [
        dataclasses.replace(c, metrics={**c.metrics, **extra})
        if c.name == WORKERS["allreduce"] and c.metrics
        else c
        for c in checks
    ]
    by_rank = tuple(sorted(facts, key=lambda f: f["rank"]))
    return NodeRun(checks=tuple(checks), facts=by_rank, lines=tuple(lines), transports=ordered)


def rank_log_lines(folder: Path, rank: int) -> list[str]:
    """Every line rank ``rank`` logged under ``folder``: its own log (container or pod) and the
    launcher's per-process logs next to it; empty when none were kept."""
    paths = [folder / f"rank-{rank}.log", *sorted((folder / f"rank-{rank}").glob("**/*"))]
    return [
        line for p in paths if p.is_file() for line in p.read_text(errors="replace").splitlines()
    ]


def transport_label(names: tuple[str, ...] | list[str], *, gpu: bool) -> str:
    """How the evidence names a transport: :data:`GLOO` on CPU; on GPU the NCCL names joined by
    ``+`` (``IB+P2P``), or "not reported" when NCCL logged none (``NCCL_DEBUG`` lost)."""
    if not gpu:
        return GLOO
    return "+".join(names) or "not reported (no NCCL INFO transport lines in the rank logs)"


def judge(worker: str, result: dict[str, Any], *, world_size: int, duration_s: float) -> Check:
    """The smoke check a worker's rank-0 JSON amounts to, named and measured as in smoke/:
    exact sums at the expected world size, or data parallel within :data:`DP_RTOL` of one
    process."""
    name = WORKERS[worker]
    if worker == "allreduce":
        wrong = {
            f"{r['dtype']}x{r['elements']}": r["wrong"] for r in result["results"] if r["wrong"]
        }
        largest = max(result["results"], key=lambda r: (r["bytes"], r["busbw_GBps"]))
        metrics = {
            "world_size": result["world_size"],
            "backend": result["backend"],
            "results": result["results"],
            "wrong_elements": sum(wrong.values()),
            "busbw_GBps_largest": largest["busbw_GBps"],
        }
        problem = (
            f"world size {result['world_size']}, expected {world_size}"
            if result["world_size"] != world_size
            else f"all_reduce produced wrong elements: {wrong}"
            if wrong
            else "busbw of the largest message is not positive"
            if largest["busbw_GBps"] <= 0
            else ""
        )
    else:
        dp, single = result["losses"][-1], result["single_losses"][-1]
        rel = abs(dp - single) / max(abs(single), 1e-12)
        metrics = {
            "world_size": result["world_size"],
            "single_final_loss": single,
            "dp_final_loss": dp,
            "relative_difference": rel,
            "loss_every": LOSS_EVERY,
            "loss_curve": result["losses"][::LOSS_EVERY] + result["losses"][-1:],
        }
        problem = (
            f"data-parallel loss {dp:.7f} vs single {single:.7f}: relative diff "
            f"{rel:.2e} > {DP_RTOL}"
            if rel > DP_RTOL
            else ""
        )
    return Check(
        name=name, passed=not problem, duration_s=duration_s, metrics=metrics, message=problem
    )


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)
