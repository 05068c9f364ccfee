"""What an export's program says about itself: its inputs, read from the file, not from Paddle.

A manifest records the ``InputSpec`` and format of the export, never a guess from the
uploading host. A Paddle 3.x PIR program (``<prefix>.json``) is JSON: each feed is a ``data`` op
(``"#": "1.data"``) whose attributes name the input, its shape (``-1`` for a dynamic dimension)
and its dtype. A Paddle 2.x program (``<prefix>.pdmodel``) is a protobuf ``ProgramDesc``, readable
only with Paddle: its inputs are left to the check, which runs inside the runtime image.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd.errors import ConfigError

# Op name of a feed in the PIR JSON serialisation (paddle/fluid/pir/serialize_deserialize).
PIR_DATA_OPS = ("1.data", "pd_op.data")


@dataclass(frozen=True)
class InputSpec:
    """One model input as ``paddle.static.InputSpec`` describes it: ``name``, ``shape`` (``-1``
    marks a dynamic dimension, e.g. the batch) and ``dtype`` (``float32``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def dynamic(self) -> tuple[int, ...]:
        """Indexes of the dynamic (``-1``) dimensions."""
        return tuple(i for i, d in enumerate(self.shape) if d < 0)

    def to_json(self) -> dict[str, Any]:
        """``{"name", "shape", "dtype"}`` (the manifest's and the check's form)."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> InputSpec:
        """The inverse of :meth:`to_json`."""
        return cls(str(doc["name"]), tuple(int(d) for d in doc["shape"]), str(doc["dtype"]))


def pir_inputs(program: Path) -> tuple[InputSpec, ...]:
    """The feeds of a PIR ``<prefix>.json`` program, in program order.

    Raises:
        ConfigError: the file is not JSON, not a PIR program (no ``base_code.magic == "pir"``), or
            holds no ``data`` op.
    """
    try:
        doc = json.loads(program.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{program} is not a PIR program: {e}",
                          "re-export with paddle.jit.save under Paddle 3.x") from e
    if not isinstance(doc, dict) or (doc.get("base_code") or {}).get("magic") != "pir":
        raise ConfigError(f"{program} is not a PIR program (no base_code.magic 'pir')",
                          "pass the folder given to paddle.jit.save")
    specs = [_spec(op) for op in _ops(doc) if op.get("#") in PIR_DATA_OPS]
    if not specs:
        raise ConfigError(f"{program} has no input (no data op)",
                          "export with paddle.jit.save(layer, path, input_spec=[...])")
    return tuple(specs)


def _ops(doc: dict[str, Any]) -> list[dict[str, Any]]:
    regions = (doc.get("program") or {}).get("regions") or []
    return [op for r in regions for b in r.get("blocks") or [] for op in b.get("ops") or []]


def _spec(op: dict[str, Any]) -> InputSpec:
    attrs = {a.get("N"): (a.get("AT") or {}).get("D") for a in op.get("A") or []
             if isinstance(a, dict)}
    return InputSpec(str(attrs.get("name")), tuple(int(d) for d in attrs.get("shape") or ()),
                     str(attrs.get("dtype")))


def inputs_of(folder: Path, prefix: str, fmt: str) -> tuple[InputSpec, ...] | None:
    """The export's inputs when its program can be read here (PIR), else None (legacy protobuf:
    the check reads them inside the runtime image).

    Raises:
        ConfigError: as :func:`pir_inputs`.
    """
    if fmt != "paddle-pir-json":
        return None
    return pir_inputs(folder / f"{prefix}.json")
