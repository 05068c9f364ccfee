"""Example training script for ``invoke deploy``: data-parallel linear regression on synthetic data.

Runs under ``python -m paddle.distributed.launch`` on any number of nodes (CPU/gloo or GPU/NCCL):
every rank draws the same deterministic dataset (seed 2024), keeps its own shard
(``rank::world_size``), and trains ``paddle.DataParallel(Linear(D, 1))`` with SGD for ``--steps``
steps. Rank 0 then saves the model with ``paddle.jit.save`` and ``InputSpec([None, D])`` to
``$TRAIN_MODEL`` (default ``/output/model``: ``model.json`` + ``model.pdiparams``) and prints the
final loss as ``final_loss=<float>``. Next to the model it records reference inputs and outputs
(``reference_inputs.npz``: input name → array, 4 rows; ``reference_outputs.npz``: ``output_0``)
computed by the trained layer, which ``invoke artifacts.check`` compares the loaded export with
(issue 13).

Used by the README's first command and by tests/integration/test_cluster_local.py.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import paddle
import paddle.distributed as dist

D = 8  # input features
SEED = 2024


def synthetic(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples of ``y = x·w + 0.5 + noise`` with fixed ``w`` (shapes ``[n, D]``,
    ``[n, 1]``)."""
    rng = np.random.default_rng(SEED)
    w = rng.normal(size=(D, 1)).astype("float32")
    x = rng.normal(size=(n, D)).astype("float32")
    y = x @ w + 0.5 + 0.01 * rng.normal(size=(n, 1)).astype("float32")
    return x, y


def record_references(layer: paddle.nn.Layer, folder: str, rows: int = 4) -> None:
    """Write ``rows`` reference inputs (shape ``[rows, D]``) and the layer's outputs for them."""
    x = np.random.default_rng(SEED + 1).normal(size=(rows, D)).astype("float32")
    layer.eval()
    y = layer(paddle.to_tensor(x)).numpy()
    np.savez(os.path.join(folder, "reference_inputs.npz"), x=x)
    np.savez(os.path.join(folder, "reference_outputs.npz"), output_0=y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument(
        "--model",
        default=os.environ.get("TRAIN_MODEL", "/output/model"),
        help="paddle.jit.save path prefix (default: $TRAIN_MODEL, set by paddlecd)",
    )
    ap.add_argument(
        "--fail-rank", type=int, default=-1, help="this rank exits 3 (tests the failure path)"
    )
    args = ap.parse_args()

    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == args.fail_rank:
        raise SystemExit(f"rank {rank}: failing on purpose (--fail-rank)")
    paddle.seed(SEED)
    x, y = synthetic(args.samples)
    x, y = paddle.to_tensor(x[rank::world]), paddle.to_tensor(y[rank::world])
    model = paddle.DataParallel(paddle.nn.Linear(D, 1)) if world > 1 else paddle.nn.Linear(D, 1)
    opt = paddle.optimizer.SGD(learning_rate=args.lr, parameters=model.parameters())
    n = x.shape[0]
    for step in range(args.steps):
        i = (step * args.batch) % max(1, n - args.batch)
        loss = paddle.nn.functional.mse_loss(model(x[i : i + args.batch]), y[i : i + args.batch])
        loss.backward()
        opt.step()
        opt.clear_grad()
        if step % 100 == 0:
            print(f"rank {rank}/{world} step {step} loss {float(loss):.6f}", flush=True)
    final = float(paddle.nn.functional.mse_loss(model(x), y))
    if rank == 0:
        layer = model._layers if isinstance(model, paddle.DataParallel) else model
        path = args.model
        paddle.jit.save(
            layer, path, input_spec=[paddle.static.InputSpec([None, D], "float32", "x")]
        )
        record_references(layer, os.path.dirname(path) or ".")
        print(f"saved {path}", flush=True)
    print(f"rank {rank}/{world} final_loss={final:.6f}", flush=True)


if __name__ == "__main__":
    main()
