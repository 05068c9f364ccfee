"""Environment: paddle imports as the image's default user, versions match the labels."""

from __future__ import annotations

import os

import pytest
from _common import is_gpu_run

gpu_only = pytest.mark.skipif(not is_gpu_run(), reason="GPU-only check; this variant is CPU")


def test_runs_as_non_root_default_user(metric):
    uid = os.getuid()
    metric("uid", uid)
    assert uid != 0, "the image's default user is root; the Dockerfile must end with a non-root USER"


def test_import_paddle(metric):
    import paddle

    x = paddle.to_tensor([1.0, 2.0, 3.0])
    assert float((x * 2).sum()) == 12.0
    metric("paddle_version", paddle.__version__)


def test_paddle_version_matches_label(expect):
    import paddle

    assert expect.paddle, "PADDLECD_EXPECT_PADDLE not set (the image lacks the io.paddlecd.paddle.version label)"
    assert paddle.__version__ == expect.paddle, (
        f"paddle.__version__ is {paddle.__version__} but the image label says {expect.paddle}")


def test_compiled_with_cuda_matches_variant(expect, metric):
    import paddle

    compiled = paddle.is_compiled_with_cuda()
    metric("compiled_with_cuda", compiled)
    assert compiled == (expect.device == "gpu"), (
        f"is_compiled_with_cuda() is {compiled} on a {expect.device} variant")


@gpu_only
def test_gpu_devices_visible(expect, metric):  # GPU-only
    import paddle

    count = paddle.device.cuda.device_count()
    metric("device_count", count)
    assert count >= 1, "no CUDA device visible inside the container (--gpus all missing?)"
    assert count == expect.gpus, f"{count} devices visible but {expect.gpus} cards were given"


@gpu_only
def test_cuda_and_cudnn_match_labels(expect, metric):  # GPU-only
    import paddle

    cuda, cudnn = str(paddle.version.cuda()), str(paddle.version.cudnn())
    metric("cuda", cuda)
    metric("cudnn", cudnn)
    assert cuda.startswith(expect.cuda or "?"), f"Paddle reports CUDA {cuda}, label says {expect.cuda}"
    # paddle.version.cudnn() reports e.g. '8.9.7' (or '8907' in some builds): compare major.minor
    norm = cudnn if "." in cudnn else f"{int(cudnn) // 1000}.{int(cudnn) % 1000 // 100}"
    assert norm.startswith(expect.cudnn or "?"), f"Paddle reports cuDNN {cudnn}, label says {expect.cudnn}"
