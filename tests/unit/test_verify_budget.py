"""verify/budget.py: a GPU node's memory and /dev/shm from the AllReduce sweep's per-rank budget.

NCCL's buffer sizes are read from NVIDIA/nccl v2.21.5-1 (ab2b89c4c339bd7f816fbc114a4b05d386b66290):
src/init.cc DEFAULT_LL_BUFFSIZE / DEFAULT_LL128_BUFFSIZE / DEFAULT_BUFFSIZE, src/include/device.h
(NCCL_STEPS 8, MAXCHANNELS 32, LL 8 lines × 512 threads, LL128 120 elements × 640 threads);
the worker's buffers from smoke/workers/allreduce.py, measured here with tracemalloc.
"""

from __future__ import annotations

import importlib.util
import tracemalloc
import types

import pytest

from paddlecd import config
from paddlecd.cluster import jobfile
from paddlecd.cluster.quantity import parse_quantity
from paddlecd.verify import budget
from paddlecd.verify import nodes as multinode

from support import ROOT

GIB, MIB = 1 << 30, 1 << 20


def test_nccl_shm_connection_is_ll_ll128_and_simple():
    assert budget.SHM_CONNECTION_BYTES == 512 * 1024 + 4_915_200 + 4 * MIB == 9_633_792


def test_per_rank_budget_of_the_1_gib_sweep():
    b = budget.allreduce_sweep()
    assert b.rank_bytes == 2 * GIB + (4 + 1) * GIB  # process + 4 NumPy buffers + Paddle's copy
    assert b.shm_rank_bytes == 64 * 9_633_792 == 588 * MIB


@pytest.mark.parametrize("gpus, memory, shm", [
    (1, "8780Mi", "588Mi"),  # 7 GiB rank + 1 GiB launcher + 588 MiB shm
    (2, "16536Mi", "1176Mi"),
    (8, "63072Mi", "4704Mi"),  # 8 × 7 GiB + 1 GiB + 8 × 588 MiB
])
def test_gpu_node_memory_and_shm(gpus, memory, shm):
    assert budget.gpu_node(gpus) == (memory, shm)


def test_no_gpu_is_no_gpu_node():
    with pytest.raises(ValueError, match="at least one rank"):
        budget.gpu_node(0)


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_verify_gpu_jobs_get_the_budget_and_pass_the_job_checks(tmp_path, gpus):
    settings = config.load(root=ROOT, environ={})
    spec = multinode.job_spec(settings, nodes=2, gpus_per_node=gpus, out=tmp_path)
    r = spec.resources
    assert (r.memory, r.shm) == budget.gpu_node(gpus)
    assert parse_quantity(r.memory) >= gpus * budget.allreduce_sweep().rank_bytes + parse_quantity(
        r.shm)  # the memory-backed /dev/shm counts against the limit
    jobfile.check_quantities(spec)
    jobfile.check(spec, gpu_variant=True, variant="cuda12.6")
    cpu = multinode.job_spec(settings, nodes=2, gpus_per_node=0, out=tmp_path)
    assert (cpu.resources.memory, cpu.resources.shm) == ("2Gi", "512Mi")  # CPU: unchanged


def _worker(monkeypatch):
    """smoke/workers/allreduce.py as a module (it imports paddle: the tests have the CPU wheel)."""
    pytest.importorskip("paddle")
    monkeypatch.syspath_prepend(str(ROOT / "smoke"))  # its ``from _common import …``
    path = ROOT / "smoke/workers/allreduce.py"
    spec = importlib.util.spec_from_file_location("budget_worker", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.xdist_group("paddle")  # one worker imports paddle (~2.5 s of CPU), not both
def test_the_budget_is_the_workers_sweep(monkeypatch):
    worker = _worker(monkeypatch)
    assert max(worker.GPU_SWEEP) * 4 == budget.SWEEP_MAX_BYTES  # float32 elements → bytes
    assert worker.HOST_BUFFERS == budget.NUMPY_BUFFERS


@pytest.mark.xdist_group("paddle")  # one worker imports paddle (~2.5 s of CPU), not both
@pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("int32", 4), ("float64", 8)])
def test_a_rank_holds_fewer_numpy_buffers_than_the_budget(monkeypatch, dtype, itemsize):
    """One rank of one message, world size 1 (the sum is the input), all_reduce as a no-op: the
    NumPy peak tracemalloc sees stays under HOST_BUFFERS messages (int64 temporaries of
    ``np.arange(size) % 13`` made it 4 messages for 32-bit types)."""
    worker = _worker(monkeypatch)
    monkeypatch.setattr(worker, "dist", types.SimpleNamespace(all_reduce=lambda t: None,
                                                              barrier=lambda: None))
    size = 1 << 21
    tracemalloc.start()
    try:
        result = worker.one(size, dtype, 0, 1, iters=1, checks=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result["wrong"] == 0
    assert 2 * size * itemsize < peak < worker.HOST_BUFFERS * size * itemsize
