"""paddlecd: CI/CD toolkit for PaddlePaddle container images.

The public API, re-exported lazily (PEP 562) so that ``import paddlecd`` stays cheap and no client
library (docker, boto3, kubernetes) is imported before it is needed::

    import paddlecd
    s = paddlecd.load_settings()
    paddlecd.build(s, "cpu"); paddlecd.push(s, "cpu"); paddlecd.verify_image(s, variant="cpu")

:mod:`paddlecd.cli` (exposed by ``tasks.py``) is the command-line layer over these functions.
"""

from __future__ import annotations

import importlib
from typing import Any

from paddlecd.errors import (
    ClusterError,
    ConfigError,
    DoctorError,
    EngineError,
    LockError,
    PaddlecdError,
    PipelineError,
    PromotionError,
    RegistryAuthError,
    RegistryError,
    StorageError,
    VerifyError,
)

__version__ = "0.1.0"

_LAZY = {
    "load_settings": ("config", "load"),
    "Settings": ("config", "Settings"),
    "load_variants": ("image.variants", "load"),
    "lock": ("image.lock", "lock"),
    "bootstrap": ("image.bootstrap", "bootstrap"),
    "build": ("image.build", "build"),
    "push": ("image.push", "push"),
    "verify_image": ("verify.run", "verify"),  # not "verify": that name is the subpackage
    "promote": ("release.promote", "promote"),
    "rollback": ("release.promote", "rollback"),
    "find_release": ("release.promote", "find"),
    "parse_reference": ("registry.reference", "parse_reference"),
    "RegistryClient": ("registry.client", "RegistryClient"),
    "plan_upload": ("artifacts.transfer", "plan_upload"),
    "upload": ("artifacts.transfer", "upload"),
    "download": ("artifacts.transfer", "download"),
    "open_store": ("artifacts.storage", "open_store"),
    "load_pipeline": ("pipeline.spec", "load"),
    "run_pipeline": ("pipeline.runner", "run"),
    "run_doctor": ("doctor", "run"),  # not "doctor": that name is the module
}

__all__ = [
    "__version__",
    "PaddlecdError",
    "ConfigError",
    "LockError",
    "EngineError",
    "RegistryError",
    "RegistryAuthError",
    "VerifyError",
    "PromotionError",
    "StorageError",
    "ClusterError",
    "PipelineError",
    "DoctorError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'paddlecd' has no attribute {name!r}")
