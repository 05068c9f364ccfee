"""Data-parallel training worker: each rank trains on its shard (rows rank::n) with gradients averaged
by paddle.DataParallel; the reported loss is the all-reduced mean over ranks, i.e. the full-batch loss."""

from __future__ import annotations

import argparse
import json

import paddle
import paddle.distributed as dist
from _common import LR, STEPS, make_data, make_model, set_device


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    set_device(args.device, dist.ParallelEnv().local_rank)
    dist.init_parallel_env()
    rank, n = dist.get_rank(), dist.get_world_size()
    x, y = (paddle.to_tensor(a) for a in make_data(rank, n))
    model = paddle.DataParallel(make_model())
    opt = paddle.optimizer.SGD(learning_rate=LR, parameters=model.parameters())
    losses = []
    for _ in range(STEPS):
        loss = paddle.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / n)
    if rank == 0:
        with open(args.out, "w") as fh:
            json.dump({"world_size": n, "losses": losses}, fh)


if __name__ == "__main__":
    main()
