"""paddlecd: CI/CD toolkit for PaddlePaddle container images.

The public API, re-exported lazily (PEP 562) so that ``import paddlecd`` stays cheap and no client
library (docker, boto3, kubernetes) is imported before it is needed::

    import paddlecd
    s = paddlecd.load_settings()
    paddlecd.build(s, "cpu"); paddlecd.push(s, "cpu"); paddlecd.verify(s, variant="cpu")

``tasks.py`` is the command-line layer over these functions.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
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
    "load_variants": ("variants", "load"),
    "lock": ("lock", "lock"),
    "bootstrap": ("bootstrap", "bootstrap"),
    "build": ("builder", "build"),
    "push": ("publish", "push"),
    "verify": ("verify", "verify"),
    "promote": ("release", "promote"),
    "rollback": ("release", "rollback"),
    "find_release": ("release", "find"),
    "parse_reference": ("registry", "parse_reference"),
    "RegistryClient": ("registry", "RegistryClient"),
    "plan_upload": ("artifacts", "plan_upload"),
    "upload": ("artifacts", "upload"),
    "download": ("artifacts", "download"),
    "open_store": ("storage", "open_store"),
    "load_pipeline": ("pipeline_spec", "load"),  # pipelines + doctor (issue 6)
    "run_pipeline": ("pipeline", "run"),
    "doctor": ("doctor", "run"),
}

__all__ = ["__version__", "PaddlecdError", "ConfigError", "LockError", "EngineError", "RegistryError",
           "RegistryAuthError", "VerifyError", "PromotionError", "StorageError", "ClusterError",
           "PipelineError", "DoctorError", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'paddlecd' has no attribute {name!r}")
