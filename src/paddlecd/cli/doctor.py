"""The doctor task (``invoke doctor``, top level only): can this machine run the pipelines?"""

from __future__ import annotations

from paddlecd.cli import common
from paddlecd.cli.common import LOG_FORMAT_HELP, guarded, out, result, settings, task
from paddlecd.cli.common import log_format as pick_log_format


@task(iterable=["variant"], help={
    "variant": "a variant in use (repeatable); default: every variant in images/variants.yaml",
    "require_gpu": "fail (not warn) when GPU variants are in use and this host has no usable GPU",
    "log_format": LOG_FORMAT_HELP,
})
@guarded
def doctor(c, variant=None, require_gpu=False, log_format=None):
    """Check this machine can run the pipelines: one line per check, a hint for each problem.

    engine reachable and BuildKit usable; registry reachable with the credentials push uses; NVIDIA
    driver against the CUDA of every GPU variant in use (NVIDIA's driver table); NVIDIA container
    runtime; free disk for the images; the artifact store (S3 credentials + bucket); the kubeconfig
    context when cluster.kind is k8s. Exits 11 only on a failure that would stop a pipeline: GPU
    variants on a host without a GPU only warn, unless --require-gpu.
    Examples: invoke doctor --variant cpu     invoke doctor --require-gpu   (on a GPU runner)
    """
    from paddlecd import doctor as checks

    fmt = pick_log_format(log_format)
    rows = checks.run(settings(), names=common.variants_given(variant) or (),
                      require_gpu=require_gpu)
    for row in rows:
        if fmt == "json":
            out.out(row.to_json(), highlight=False)
        else:
            result(row.text())
    error = checks.verdict(rows)
    if error:
        raise error
