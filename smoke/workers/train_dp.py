"""Data-parallel training worker: each rank trains on its shard (rows rank::n) with gradients
averaged by paddle.DataParallel; the reported loss is the all-reduced mean over ranks, i.e. the
full-batch loss."""

from __future__ import annotations

import json
import os

import paddle
import paddle.distributed as dist
from _common import init_worker, make_data, make_model, train


def run(rank: int, n: int) -> dict:
    """Data-parallel training on an initialised process group; returns ``world_size`` and the
    per-step global-mean ``losses`` (rank 0's document is the one reported), plus
    ``single_losses`` (one process on the full data) on rank 0 when ``SMOKE_SINGLE_TOO`` is set."""
    x, y = (paddle.to_tensor(a) for a in make_data(rank, n))

    def global_mean(loss) -> float:
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        return float(mean) / n

    losses = train(paddle.DataParallel(make_model()), x, y, on_loss=global_mean)
    print(f"train_dp: rank {rank}/{n} final loss {losses[-1]:.7f}", flush=True)  # in its own log
    result = {"world_size": n, "losses": losses}
    if rank == 0 and os.environ.get("SMOKE_SINGLE_TOO"):  # verify --nodes: the one-process run
        full_x, full_y = (paddle.to_tensor(a) for a in make_data())
        result["single_losses"] = train(make_model(), full_x, full_y)
    return result


def main() -> None:
    args, rank, n = init_worker(__doc__)
    result = run(rank, n)
    if rank == 0:
        with open(args.out, "w") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
