"""Data-parallel training worker: each rank trains on its shard (rows rank::n) with gradients
averaged by paddle.DataParallel; the reported loss is the all-reduced mean over ranks, i.e. the
full-batch loss."""

from __future__ import annotations

import json
import os

import paddle
import paddle.distributed as dist
from _common import init_worker, make_data, make_model, train


def main() -> None:
    args, rank, n = init_worker(__doc__)
    x, y = (paddle.to_tensor(a) for a in make_data(rank, n))

    def global_mean(loss) -> float:
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        return float(mean) / n

    losses = train(paddle.DataParallel(make_model()), x, y, on_loss=global_mean)
    print(f"train_dp: rank {rank}/{n} final loss {losses[-1]:.7f}", flush=True)  # in its own log
    if rank == 0:
        result = {"world_size": n, "losses": losses}
        if os.environ.get("SMOKE_SINGLE_TOO"):  # verify --nodes: the one-process run to compare
            full_x, full_y = (paddle.to_tensor(a) for a in make_data())
            result["single_losses"] = train(make_model(), full_x, full_y)
        with open(args.out, "w") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
