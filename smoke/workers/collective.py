"""Both collective checks in one launch: the AllReduce check (allreduce.py), then data-parallel
training (train_dp.py), on one process group (NCCL on GPU, gloo on CPU).

One ``paddle.distributed.launch`` instead of two: each launch starts the launcher and one process
per rank, and each of those imports paddle (seconds of CPU each). Rank 0 rewrites ``--out`` after
each part with the parts done so far, so a part that crashes the launch leaves the parts before
it reported (smoke/_common.collective); the ranks stop at the first exception, as a collective
whose peers went on to the next part's calls would otherwise mismatch or hang. ``verify --nodes N``
runs it as one N-node job and judges each check from its part (paddlecd.verify.nodes).
"""

from __future__ import annotations

import json
import os

import allreduce
import train_dp
from _common import init_worker

# part -> its run on an initialised process group; read by smoke/test_allreduce.py and
# smoke/test_convergence.py through smoke/_common.collective, and by verify --nodes, whose
# paddlecd.verify.nodes.WORKERS lists the same parts in the same order
PARTS = {
    "allreduce": lambda device, rank, n: allreduce.run(device, rank, n),
    "train_dp": lambda device, rank, n: train_dp.run(rank, n),
}


def main() -> None:
    args, rank, n = init_worker(__doc__)
    result = {}
    for part, run in PARTS.items():
        result[part] = run(args.device, rank, n)
        if rank == 0:  # replaced whole, never seen half-written
            with open(f"{args.out}.part", "w") as fh:
                json.dump(result, fh)
            os.replace(f"{args.out}.part", args.out)


if __name__ == "__main__":
    main()
