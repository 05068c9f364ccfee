"""``--cluster local``: the same training job as N containers on one user-defined Docker network.

Each node is a container named ``<job>-<rank>`` with the DNS alias ``<job>-<rank>.<job>`` — the
name its pod would have under the headless Service — running the same :func:`render.launch_argv`
and :func:`render.environment` as on Kubernetes, as the same non-root uid, with the same
``/dev/shm`` size and CPU/memory limits. Without GPUs Paddle uses gloo. Logs are streamed with a
``[rank i]`` prefix; the first rank that fails stops the others and fails the job with its log tail.
Containers and the network are removed afterwards unless ``keep`` (``runtime.keep``,
``PADDLECD_KEEP=1``). Job ids carry a random suffix, so two local jobs never share a container,
network or alias.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from paddlecd import engine, files, proc
from paddlecd.cluster.jobfile import JobSpec, Volume
from paddlecd.cluster.quantity import parse_quantity
from paddlecd.cluster.render import (
    LAUNCH_LOG_DIR,
    Target,
    environment,
    labels,
    launch_argv,
    rank_host,
)
from paddlecd.errors import ClusterError, ConfigError, EngineError
from paddlecd.types import Echo

Preflight = Callable[[int], list[str]]


def run(
    spec: JobSpec,
    target: Target,
    *,
    job_id: str,
    on_event: Echo,
    on_line: Echo,
    keep: bool = False,
    preflight: Preflight | None = None,
    logs: Path | None = None,
    devices: Sequence[str] | None = None,
) -> None:
    """Run ``spec`` on ``target`` as ``spec.nodes`` containers and wait for all ranks.

    ``preflight(rank)``: an argv each node runs first, ending in the launcher argv it then execs
    (verify's bounded rendezvous wait, smoke/rendezvous.py); None runs the launcher directly.
    ``logs``: a host folder that gets every rank's logs (:func:`save_logs`), passed or failed.
    ``devices``: the host's cards the job may use (indexes or UUIDs, a shared runner's pinned
    ones: verify.drivers.pinned_devices); None: all, from 0 (:func:`node_devices`).

    Raises:
        ConfigError: the job needs more cards than ``devices`` holds (nothing is started).
        ClusterError: a rank exited non-zero (its log tail in the hint; other ranks are stopped),
            or the job ran past ``activeDeadlineSeconds``.
        EngineError: the engine could not create the network or a container.
    """
    cards = node_devices(spec.nodes, spec.resources.gpus, devices)
    _prepare_output(spec.output, spec.run_as_user)
    for name in engine.remove_orphans(ORPHANS):
        on_event(f"removed {name}: left by a run that was killed")
    with contextlib.ExitStack() as stack:
        stack.enter_context(engine.network(job_id, labels=_owned(labels(target, job_id)),
                                           keep=keep))
        on_event(f"network {job_id} created")
        ranks = [
            stack.enter_context(
                engine.container(
                    _container(spec, target, job_id, i, keep=keep, preflight=preflight,
                               gpus=cards[i])
                )
            )
            for i in range(spec.nodes)
        ]
        on_event(f"started {len(ranks)} containers: " + ", ".join(c.name for c in ranks))
        try:
            _wait_all(ranks, timeout=spec.active_deadline_seconds, on_line=on_line)
        finally:  # before the containers go: a failed rank's logs matter most
            if logs:
                save_logs(ranks, logs)
    on_event("containers and network " + ("kept (runtime.keep)" if keep else "removed"))


def _container(
    spec: JobSpec,
    target: Target,
    job_id: str,
    rank: int,
    *,
    keep: bool = False,
    preflight: Preflight | None = None,
    gpus: tuple[str, ...] | None = None,
) -> engine.ContainerSpec:
    """The container of ``rank``: the pod's environment, uid, limits, /dev/shm and DNS name;
    ``gpus``: its cards (default: its run of the host's, :func:`node_devices`)."""
    r, uid = spec.resources, spec.run_as_user
    argv = launch_argv(spec, job_id, rank)
    return engine.ContainerSpec(
        image=target.reference,
        command=tuple([*preflight(rank), "--", *argv] if preflight else argv),
        name=f"{job_id}-{rank}",
        hostname=f"{job_id}-{rank}",
        user=f"{uid}:{uid}",
        workdir="/tmp",
        env={**environment(spec, target, job_id), "JOB_COMPLETION_INDEX": str(rank)},
        mounts=tuple(
            engine.Mount(_source(v), v.mount_path, read_only=v.read_only)
            for v in spec.volumes.values()
        ),
        labels=_owned({**labels(target, job_id), "paddlecd.io/rank": str(rank)}),
        network=job_id,
        aliases=(rank_host(job_id, rank),),
        shm_size=int(parse_quantity(r.shm)),
        memory=int(parse_quantity(r.memory)),
        cpus=float(parse_quantity(r.cpu)),
        gpus=gpus if gpus is not None else node_devices(rank + 1, r.gpus, None)[rank],  # GPU-only
        keep=keep,
    )


def node_devices(nodes: int, per_node: int, devices: Sequence[str] | None
                 ) -> list[tuple[str, ...] | None]:
    """Each rank's cards when one machine runs all ``nodes``: rank i takes the i-th run of
    ``per_node`` of ``devices`` (the host's ``0 1 2 …`` when None); None for every rank without
    GPUs.

    Raises:
        ConfigError: ``devices`` holds fewer than ``nodes × per_node`` cards.
    """
    if not per_node:
        return [None] * nodes
    cards = [str(i) for i in range(nodes * per_node)] if devices is None else list(devices)
    if len(cards) < nodes * per_node:
        raise ConfigError(
            f"{nodes} nodes × {per_node} cards need {nodes * per_node} cards; this job is pinned "
            f"to {len(cards)} ({','.join(cards)})",
            "give fewer nodes or --gpus-per-node, or pin more cards (NVIDIA_VISIBLE_DEVICES)",
        )
    return [tuple(cards[r * per_node:(r + 1) * per_node]) for r in range(nodes)]


# What local jobs create (render.labels); a killed deploy, verify --nodes or pipeline.run leaves
# these behind, and the next local job removes those whose owner process is gone.
ORPHANS = {"app.kubernetes.io/managed-by": "paddlecd", "app.kubernetes.io/name": "paddlecd-train"}


def _owned(labels: dict[str, str]) -> dict[str, str]:
    """``labels`` plus this process as their owner (engine.OWNER, proc.owner)."""
    return {**labels, engine.OWNER: proc.owner()}


def save_logs(ranks: list[engine.Container], folder: Path) -> None:
    """Copy each rank's logs out of its container: ``folder/rank-<i>.log`` (the container's
    output: preflight, launcher, local rank 0's worker) and ``folder/rank-<i>/`` (the launcher's
    per-process logs from :data:`~paddlecd.cluster.render.LAUNCH_LOG_DIR`, ``workerlog.<n>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(ranks):
        files.write_text(folder / f"rank-{i}.log", c.logs())
        c.copy_out(LAUNCH_LOG_DIR, folder / f"rank-{i}")


def _source(v: Volume) -> str:
    return v.claim or str(v.path)


def _prepare_output(output: Volume, uid: int) -> None:
    """Make the output folder writable for the non-root training uid — only a folder this run
    creates is handed over; an existing one must already be writable for that uid (we never re-own a
    user's folder).

    Raises:
        ClusterError: the existing folder is not writable for ``uid``.
    """
    if not output.path:
        return
    path = Path(output.path)
    if path.exists():
        st = path.stat()
        if not ((st.st_uid == uid and st.st_mode & 0o200) or st.st_mode & 0o002):
            raise ClusterError(
                f"output folder {path} exists and uid {uid} (the image's user) cannot write it",
                f"chown {uid} {path}, or point output.path at a new folder (it is created for you)",
            )
        return
    path.mkdir(parents=True)
    try:
        os.chown(path, uid, uid)
    except PermissionError:  # not root on the host: let any uid write the folder we just made
        path.chmod(0o777)


# After the first failure the other ranks usually fail within a second or two (their collective
# breaks); waiting this long lets every failed rank report, so the one that failed first on its own
# is named even when a peer's container happened to exit before it.
STOP_GRACE_SECONDS = 15.0


def _wait_all(ranks: list[engine.Container], *, timeout: float, on_line: Echo) -> None:
    """Wait for every rank; after the first non-zero exit, give the others a short grace to exit,
    stop the rest, and raise naming every rank that failed (with each one's log tail). Ctrl-C
    stops every rank, then raises KeyboardInterrupt (a trial: the pool's exit waited for the
    ranks, and the job ran to its end before the run said "interrupted")."""
    with ThreadPoolExecutor(max_workers=len(ranks)) as pool:
        futures = {
            pool.submit(engine.wait, c, timeout=timeout, on_line=_prefixed(on_line, i)): i
            for i, c in enumerate(ranks)
        }
        failures: list[tuple[int, str, str]] = []
        pending = set(futures)
        try:
            while pending and not failures:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                failures += sorted(f for f in (_failure(x, futures[x], timeout) for x in done)
                                   if f)
        except KeyboardInterrupt:
            _stop(ranks)  # the waits then return, and the pool can close
            raise
        if failures:
            done, _ = wait(pending, timeout=STOP_GRACE_SECONDS)
            failures += [f for f in (_failure(x, futures[x], timeout) for x in done) if f]
            _stop(ranks)
            raise _job_failed(failures)  # in the order they failed: the first is the likely cause


def _failure(future: Any, rank: int, timeout: float) -> tuple[int, str, str] | None:
    """``(rank, what happened, log tail)`` for a failed rank, None for a clean exit."""
    try:
        finished = future.result()
    except EngineError as e:
        what = (
            f"did not finish within activeDeadlineSeconds ({timeout:.0f}s)"
            if "within" in e.cause
            else e.cause
        )
        return (rank, f"rank {rank} {what}", "")
    if finished.exit_code == 0:
        return None
    tail = "\n".join(finished.logs.splitlines()[-25:])
    return (rank, f"rank {rank} ({finished.name}) failed with exit code {finished.exit_code}", tail)


def _job_failed(failures: list[tuple[int, str, str]]) -> ClusterError:
    cause = ", ".join(what for _, what, _ in failures) + "; the job was stopped"
    tails = [f"last lines of rank {rank}:\n{tail}" for rank, _, tail in failures if tail]
    return ClusterError(
        cause,
        "\n".join(tails) or "raise activeDeadlineSeconds in the job file, or look at the log above",
    )


def _stop(ranks: list[engine.Container]) -> None:
    for c in ranks:
        c.kill()  # one that already exited, or is gone, is left as it is


def _prefixed(on_line: Echo, rank: int) -> Echo:
    return lambda line: on_line(f"[rank {rank}] {line}")
