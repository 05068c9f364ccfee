"""Environment: paddle imports as the image's default user, versions match the labels."""

from __future__ import annotations

import os

import pytest
from _common import is_gpu_run
from _figures import hardware

gpu_only = pytest.mark.skipif(not is_gpu_run(), reason="GPU-only check; this variant is CPU")


def test_runs_as_non_root_default_user(metric):
    uid = os.getuid()
    metric("uid", uid)
    assert (
        uid != 0
    ), "the image's default user is root; the Dockerfile must end with a non-root USER"


def test_import_paddle(metric):
    import paddle

    x = paddle.to_tensor([1.0, 2.0, 3.0])
    assert float((x * 2).sum()) == 12.0
    metric("paddle_version", paddle.__version__)


def test_paddle_version_matches_label(expect):
    import paddle

    assert expect.paddle, (
        "SMOKE_EXPECT_PADDLE not set " "(the image lacks the io.paddlecd.paddle.version label)"
    )
    assert (
        paddle.__version__ == expect.paddle
    ), f"paddle.__version__ is {paddle.__version__} but the image label says {expect.paddle}"


def test_hardware_class(expect, metric):
    """The hardware the figures were measured on: GPU model and count from the driver, else the
    CPU model and core count (smoke/_figures.py)."""
    import paddle

    gpu = expect.device == "gpu" and paddle.device.cuda.device_count() > 0
    name = paddle.device.cuda.get_device_name(0) if gpu else None  # GPU-only
    label = hardware(expect.device, gpu_name=name, gpus=paddle.device.cuda.device_count()
                     if gpu else 0)
    metric("hardware", label)
    assert label.strip(), "no hardware class could be read"


def test_compiled_with_cuda_matches_variant(expect, metric):
    import paddle

    compiled = paddle.is_compiled_with_cuda()
    metric("compiled_with_cuda", compiled)
    assert compiled == (
        expect.device == "gpu"
    ), f"is_compiled_with_cuda() is {compiled} on a {expect.device} variant"


@gpu_only
def test_gpu_devices_visible(expect, metric):  # GPU-only
    import paddle

    count = paddle.device.cuda.device_count()
    metric("device_count", count)
    metric("gpu_name", paddle.device.cuda.get_device_name(0))  # the busbw table's key
    assert count >= 1, "no CUDA device visible inside the container (--gpus all missing?)"
    assert count == expect.gpus, f"{count} devices visible but {expect.gpus} cards were given"


def cudnn_major_minor(version: int) -> str:
    """``major.minor`` from cuDNN's integer version: M*1000 + m*100 + p up to cuDNN 8 (8907 =
    8.9.7), M*10000 + m*100 + p from cuDNN 9 on (90501 = 9.5.1) — the CUDNN_VERSION macro of
    cudnn_version.h."""
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}"
    return f"{version // 1000}.{version % 1000 // 100}"


@gpu_only
def test_cuda_and_cudnn_match_labels(expect, metric):  # GPU-only
    import paddle

    cuda = str(paddle.version.cuda())  # the CUDA Paddle was built with, e.g. "12.6"
    runtime = cudnn_major_minor(int(paddle.device.get_cudnn_version()))  # the cuDNN the image loads
    metric("cuda", cuda)
    metric("cudnn_runtime", runtime)
    metric(
        "cudnn_compiled", str(paddle.version.cudnn())
    )  # build-time version: recorded, not compared
    assert cuda.startswith(
        expect.cuda or "?"
    ), f"Paddle reports CUDA {cuda}, label says {expect.cuda}"
    assert runtime == expect.cudnn, f"the image loads cuDNN {runtime}, label says {expect.cudnn}"
