"""Export: paddle.jit.save with a dynamic batch dimension, reloaded with paddle.jit.load and with a
paddle.inference predictor; outputs equal the dynamic model within 1e-5.

File layouts: Paddle 2.x writes ``<prefix>.pdmodel`` + ``.pdiparams``; Paddle 3.x with the PIR API
(the default) writes ``<prefix>.json`` + ``.pdiparams``. Both are accepted. The export is copied to
``$SMOKE_OUT/model`` for the upload stage.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import D_IN, make_data, make_model, set_device
from _figures import figure, repeat

ATOL = 1e-5
LATENCY_BATCHES = (1, 64)  # inference latency at batch 1 and at a serving batch
LATENCY_ITERS, LATENCY_WARMUP = 30, 3


def program_file(prefix: Path) -> Path:
    """The program file of a jit.save export: ``.json`` (Paddle 3.x PIR) or ``.pdmodel`` (2.x)."""
    for suffix in (".json", ".pdmodel"):
        if prefix.with_suffix(suffix).exists():
            return prefix.with_suffix(suffix)
    raise AssertionError(
        f"no {prefix.name}.json or {prefix.name}.pdmodel written by paddle.jit.save"
    )


def inference_latency(predictor, handle, batch: int) -> dict:
    """``export.latency.batch<N>``: ms per ``predictor.run()`` on ``batch`` rows (input copy
    and output read included), median of the timed runs after :data:`LATENCY_WARMUP`."""
    x = np.resize(make_data()[0], (batch, D_IN))
    out = predictor.get_output_handle(predictor.get_output_names()[0])
    times = []
    for i in range(LATENCY_WARMUP + LATENCY_ITERS * repeat()):
        start = time.perf_counter()
        handle.reshape([batch, D_IN])
        handle.copy_from_cpu(x)
        predictor.run()
        out.copy_to_cpu()
        if i >= LATENCY_WARMUP:
            times.append((time.perf_counter() - start) * 1e3)
    return figure(f"export.latency.batch{batch}", times, "ms")


def test_jit_save_load_and_inference(expect, metric):
    import paddle
    from paddle import inference

    set_device(expect.device)
    model = make_model()
    model.eval()
    prefix = Path(tempfile.mkdtemp(prefix="export-")) / "model"
    spec = [paddle.static.InputSpec(shape=[None, D_IN], dtype="float32", name="x")]
    save_times = []
    for i in range(repeat()):  # the first export is the one kept and checked
        start = time.perf_counter()
        where = prefix if i == 0 else Path(tempfile.mkdtemp(prefix="export-again-")) / "model"
        paddle.jit.save(model, str(where), input_spec=spec)
        save_times.append(time.perf_counter() - start)
    program = program_file(prefix)
    metric("files", sorted(p.name for p in prefix.parent.iterdir()))

    x_np = make_data()[0][:7]  # batch 7: exercises the dynamic batch dimension
    x = paddle.to_tensor(x_np)
    reference = model(x).numpy()
    loaded = paddle.jit.load(str(prefix))
    loaded.eval()
    diff_jit = float(np.abs(loaded(x).numpy() - reference).max())

    config = inference.Config(str(program), str(prefix.with_suffix(".pdiparams")))
    if expect.device == "gpu":  # GPU-only
        config.enable_use_gpu(256, 0)
    else:
        config.disable_gpu()
    predictor = inference.create_predictor(config)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    handle.reshape(list(x_np.shape))
    handle.copy_from_cpu(x_np)
    predictor.run()
    out = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    diff_predictor = float(np.abs(out - reference).max())
    metric("figures", [figure("export.save_time", [t * 1e3 for t in save_times], "ms"),
                       *(inference_latency(predictor, handle, b) for b in LATENCY_BATCHES)])

    metric("max_abs_diff_jit_load", diff_jit)
    metric("max_abs_diff_predictor", diff_predictor)
    metric("format", program.suffix.lstrip("."))
    assert diff_jit <= ATOL, f"jit.load output differs by {diff_jit:.2e} > {ATOL}"
    assert (
        diff_predictor <= ATOL
    ), f"paddle.inference output differs by {diff_predictor:.2e} > {ATOL}"
    dest = expect.out / "model"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(prefix.parent, dest)
