"""``verify --nodes N``: the collective checks as one N-node job, launched like ``deploy`` launches.

smoke/workers/collective.py — the AllReduce check, then data-parallel training, on one process
group — runs as one job of N nodes through :func:`paddlecd.cluster.render.launch_argv`
(``--master <job>-0.<job>:port``, ``--nnodes N``, ``--rank``): locally as N containers on one
network by :func:`paddlecd.cluster.local.run`, on Kubernetes as the Indexed Job + headless Service
of :func:`paddlecd.cluster.render.render` (:mod:`paddlecd.verify.nodes_k8s`). One job, not one
per check: each job pays container or pod start, the rendezvous and a launcher and a paddle import
per rank. Before its launcher, every node runs smoke/rendezvous.py: it records the node's facts
and fails within :func:`rendezvous_timeout` seconds, naming the address, when the master cannot
be reached (the launcher itself would wait unbounded). Rank 0 rewrites ``<out>/collective.json``
after each part (``{"allreduce": …, "train_dp": …}``), so each check of :data:`WORKERS` is
judged from its own part, and a part the job did not reach fails naming the cause
(:func:`judge_parts`). Each rank's logs are kept under ``<out>/logs/collective/``.
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

# the parts of smoke/workers/collective.py, in the order it runs them -> the check each becomes
WORKERS = {
    "allreduce": "allreduce/test_allreduce_exact_sums",
    "train_dp": "convergence/test_data_parallel_matches_single_process",
}
JOB = "collective"  # the worker (smoke/workers/collective.py), its result file and log folder
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


def job_spec(settings: Settings, *, nodes: int, gpus_per_node: int, out: Path) -> JobSpec:
    """The job of smoke/workers/collective.py on ``nodes`` nodes: smoke/ read-only at /smoke,
    ``out`` at /out (rank 0 writes /out/collective.json), one process per GPU (or one, gloo, on
    CPU); a GPU node's memory and shm come from :func:`paddlecd.verify.budget.gpu_node` (the
    AllReduce sweep's buffers, freed before training starts)."""
    env = {"PYTHONPATH": "/smoke", "SMOKE_OUT": "/out", "SMOKE_SINGLE_TOO": "1"}
    memory, shm = "2Gi", "512Mi"  # CPU: one gloo process
    if gpus_per_node:  # GPU-only: NCCL names the transports it chose (verify/nccl.py)
        env["NCCL_DEBUG"] = "INFO"
        memory, shm = budget.gpu_node(gpus_per_node)  # the sweep's per-rank budget
    return JobSpec(
        name=f"verify-{JOB}",
        script=f"/smoke/workers/{JOB}.py",
        args=("--out", f"/out/{JOB}.json", "--device", "gpu" if gpus_per_node else "cpu"),
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
    """Run the collective job as ``nodes`` local containers; a job that fails becomes failed
    checks with the executor's cause (which rank, why) for the parts it did not report
    (:func:`judge_parts`). ``timeout``: the rendezvous wait (default :func:`rendezvous_timeout`).

    Raises:
        EngineError: the engine could not create the network or a container.
    """
    wait = rendezvous_timeout(settings, k8s=False) if timeout is None else timeout
    clear(out)
    lines: list[str] = []

    def seen(line: str) -> None:
        lines.append(line)
        on_line(line)

    spec = job_spec(settings, nodes=nodes, gpus_per_node=gpus_per_node, out=out)
    job_id = spec.new_job_id()
    started, failure = time.monotonic(), None
    try:
        local.run(
            spec,
            target,
            job_id=job_id,
            on_event=on_line,
            on_line=seen,
            keep=settings.runtime.keep,
            preflight=preflight(spec, job_id, master=master, timeout=wait),
            logs=out / "logs" / JOB,
            devices=drivers.pinned_devices() if gpus_per_node else None,  # GPU-only
        )
    except ClusterError as e:
        failure = f"{e.cause}\n{e.hint}"
    world = nodes * max(1, gpus_per_node)
    found = judge_parts(read_result(out), failure=failure, world_size=world,
                        duration_s=_since(started))
    facts = [json.loads(p.read_text()) for p in sorted(out.glob("node-*.json"))]
    return finish(found, facts, lines, logs=out / "logs", gpu=gpus_per_node > 0)


def read_result(out: Path) -> dict[str, Any]:
    """Rank 0's ``out/collective.json`` (``{part: its result}``, the parts done so far); ``{}``
    when it wrote none."""
    path = out / f"{JOB}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def judge_parts(result: dict[str, Any], *, failure: str | None, world_size: int,
                duration_s: float) -> list[Check]:
    """One check per part of :data:`WORKERS`, in order, from rank 0's ``result`` (``{part: its
    result}``) and the executor's ``failure`` (which rank, why; None when the job succeeded).
    A part in ``result`` is judged (:func:`judge`), as smoke/_common.collective does in the
    image. The first part missing fails with ``failure`` (after the parts before it, when there
    are any), or says rank 0 wrote no such part; each later part fails "not run", naming the
    check that carries the cause. A job that fails after every part reported fails the last
    check with ``failure``, its metrics kept: the job did not end well. The job's wall time
    (``duration_s``, s) goes to the first check, which pays the start as the in-image run's first
    check pays the launch; the others take 0 (the parts are not timed apart)."""
    found: list[Check] = []
    carrier = None  # the check of the first part missing: it carries the cause
    for worker, name in WORKERS.items():
        took = 0.0 if found else duration_s
        if worker in result:
            found.append(judge(worker, result[worker], world_size=world_size, duration_s=took))
            continue
        if carrier:
            message = f"not run: the job failed before its {worker} part; the cause is on {carrier}"
        elif failure:
            done = ", ".join(list(WORKERS)[: len(found)])  # every part before this one
            message = f"the job failed after its {done} part: {failure}" if found else failure
        else:
            message = f"rank 0 wrote no {worker!r} part to {JOB}.json (see its log)"
        carrier = carrier or name
        found.append(Check(name=name, passed=False, duration_s=took, message=message[:2000]))
    if failure and not carrier:  # after the judge's own problem, if it found one
        late = f"the job failed after its last part reported: {failure}"
        last = "; ".join(m for m in (found[-1].message, late) if m)[:2000]
        found[-1] = dataclasses.replace(found[-1], passed=False, message=last)
    return found


def clear(out: Path) -> None:
    """Remove what an earlier run left in ``out`` (node facts, the job's result, rank logs), so
    nothing stale is taken for this run's."""
    for path in [*out.glob("node-*.json"), out / f"{JOB}.json"]:
        path.unlink(missing_ok=True)
    if (out / "logs").is_dir():
        shutil.rmtree(out / "logs")


def finish(
    checks: list[Check], facts: list[dict[str, Any]], lines: list[str], *, logs: Path, gpu: bool
) -> NodeRun:
    """The :class:`NodeRun` of a finished run, local or Kubernetes: each node's facts get the
    ``transport`` its own logs name (``logs/collective/rank-<r>.log`` and ``rank-<r>/workerlog.*``,
    where the AllReduce part and training share one communicator), and the AllReduce check the
    transports of all ranks as metric ``transport`` — on CPU always :data:`GLOO`, on GPU the
    NCCL names or "not reported"."""
    union: set[str] = set()
    for fact in facts:
        names = nccl.transports(rank_log_lines(logs / JOB, fact["rank"])) if gpu else ()
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
    """The smoke check one part of rank 0's JSON amounts to (``result`` is its ``worker`` part),
    named and measured as in smoke/: exact sums at the expected world size, or data parallel
    within :data:`DP_RTOL` of one process."""
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
