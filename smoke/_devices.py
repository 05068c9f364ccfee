"""Which card a launched process uses: the device rule of paddle.distributed.launch, as pure code.

Read from Paddle v3.0.0 (commit 6ed5dd3833c32c3b21e14b1fb1a71f5a535a0fcc, the paddlepaddle 3.0.0
wheel): ``launch/controllers/collective.py`` gives each of a node's processes ``PADDLE_LOCAL_RANK``
(its index on the node), ``PADDLE_TRAINER_ID`` (its global rank), ``PADDLE_TRAINERS_NUM`` (world
size), ``PADDLE_LOCAL_SIZE`` (processes on the node) and ``FLAGS_selected_gpus`` — one card per
process, or every selected card joined by commas when the node runs one process.
``launch/context/device.py`` (``get_selected_devices``) writes those cards as positions in the
visible devices (``CUDA_VISIBLE_DEVICES`` renumbers from 0) and does not narrow
``CUDA_VISIBLE_DEVICES``. ``distributed/parallel.py`` (``ParallelEnv``) takes the first entry of
``FLAGS_selected_gpus`` as ``device_id``, the place ``init_parallel_env`` sets; its ``local_rank``
is an alias of ``rank``, the global rank, and names no card on a second node.

Standard library only: the smoke suite and the unit tests import it without paddle.
"""

from __future__ import annotations

from collections.abc import Mapping


def device_index(env: Mapping[str, str], *, cards: int) -> int:
    """The CUDA device index (0 … ``cards`` − 1) of this process, from the launcher's ``env``.

    ``FLAGS_selected_gpus``'s first entry when set (Paddle's own ``ParallelEnv.device_id``); else
    ``PADDLE_LOCAL_RANK``; else ``PADDLE_TRAINER_ID`` modulo the processes per node
    (``PADDLE_LOCAL_SIZE``, default ``cards``); else 0 (not launched: one process).

    Args:
        env: the process environment (``os.environ``), strings.
        cards: CUDA devices this process sees (``paddle.device.cuda.device_count()``).

    Raises:
        ValueError: no card is visible, a variable is not an integer, or the index is not below
            ``cards`` — said with the rank and world size, where ``CUDAPlace`` would end the
            process without a Python error.
    """
    if cards < 1:
        raise ValueError("no CUDA device is visible to this process (CUDA_VISIBLE_DEVICES?)")
    selected = env.get("FLAGS_selected_gpus", "").split(",")[0].strip()
    if selected:
        index, why = _int(env, "FLAGS_selected_gpus", selected), "FLAGS_selected_gpus"
    elif env.get("PADDLE_LOCAL_RANK"):
        index, why = _int(env, "PADDLE_LOCAL_RANK"), "PADDLE_LOCAL_RANK"
    elif env.get("PADDLE_TRAINER_ID"):
        per_node = _int(env, "PADDLE_LOCAL_SIZE") if env.get("PADDLE_LOCAL_SIZE") else cards
        index = _int(env, "PADDLE_TRAINER_ID") % max(per_node, 1)
        why = f"PADDLE_TRAINER_ID mod {per_node} processes per node"
    else:
        return 0
    if not 0 <= index < cards:
        rank = env.get("PADDLE_TRAINER_ID", "?")
        world = env.get("PADDLE_TRAINERS_NUM", "?")
        raise ValueError(
            f"rank {rank} of {world}: device {index} (from {why}) is not one of the {cards}"
            f" visible cards 0…{cards - 1}"
        )
    return index


def launch_devices(env: Mapping[str, str], *, gpus: int) -> list[str]:
    """The ``--devices`` labels for ``paddle.distributed.launch`` on ``gpus`` cards: the first
    ``gpus`` entries of ``CUDA_VISIBLE_DEVICES`` when it pins cards (the launcher looks each label
    up in that list), else ``0 … gpus − 1``.

    Raises:
        ValueError: ``CUDA_VISIBLE_DEVICES`` lists fewer than ``gpus`` cards.
    """
    visible = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible or visible == "all":
        return [str(i) for i in range(gpus)]
    labels = [label.strip() for label in visible.split(",") if label.strip()]
    if len(labels) < gpus:
        raise ValueError(f"CUDA_VISIBLE_DEVICES={visible} lists {len(labels)} cards, not {gpus}")
    return labels[:gpus]


def _int(env: Mapping[str, str], name: str, text: str | None = None) -> int:
    value = env[name] if text is None else text
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={env[name]!r} is not a device index") from None
