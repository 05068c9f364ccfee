"""What an export's program says about itself: its inputs, read from the file, not from Paddle.

A manifest records the ``InputSpec`` and format of the export, never a guess from the
uploading host. A Paddle 3.x PIR program (``<prefix>.json``) is JSON: each feed is a ``data`` op
(``"#": "1.data"``) whose attributes name the input, its shape (``-1`` for a dynamic dimension)
and its dtype. A Paddle 2.x program (``<prefix>.pdmodel``) is a protobuf ``ProgramDesc``: its
inputs are left to the check, which runs inside the runtime image, but its outline (blocks, each
with its index) is read here, so a file that is no ``ProgramDesc`` is refused before it is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from paddlecd.errors import ConfigError
from paddlecd.files import json_problem

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
        why = e.strerror if isinstance(e, OSError) else json_problem(e)
        raise ConfigError(f"{program} is not a PIR program: {why}",
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


def _outline() -> Any:
    """The outline of Paddle's ``ProgramDesc`` as a protobuf message class: the fields of
    ``paddle/fluid/framework/framework.proto`` that every program has (``ProgramDesc.blocks = 1``,
    ``version = 4``, ``op_version_map = 5``; ``BlockDesc`` ``required int32 idx = 1``, ``required
    int32 parent_idx = 2``, ``repeated VarDesc vars = 3``, ``repeated OpDesc ops = 4``,
    ``optional int32 forward_block_idx = 5``), nested messages kept as bytes (the same wire
    form)."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="paddlecd_program_outline.proto",
                                               package="paddlecd.outline", syntax="proto2")
    block = proto.message_type.add(name="BlockDesc")
    for name, number, kind, label in (
            ("idx", 1, f.TYPE_INT32, f.LABEL_REQUIRED),
            ("parent_idx", 2, f.TYPE_INT32, f.LABEL_REQUIRED),
            ("vars", 3, f.TYPE_BYTES, f.LABEL_REPEATED),
            ("ops", 4, f.TYPE_BYTES, f.LABEL_REPEATED),
            ("forward_block_idx", 5, f.TYPE_INT32, f.LABEL_OPTIONAL)):
        block.field.add(name=name, number=number, type=kind, label=label)
    program = proto.message_type.add(name="ProgramDesc")
    program.field.add(name="blocks", number=1, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                      type_name=".paddlecd.outline.BlockDesc")
    program.field.add(name="version", number=4, type=f.TYPE_BYTES, label=f.LABEL_OPTIONAL)
    program.field.add(name="op_version_map", number=5, type=f.TYPE_BYTES,
                      label=f.LABEL_OPTIONAL)
    return message_factory.GetMessages([proto])["paddlecd.outline.ProgramDesc"]


def check_program_desc(program: Path) -> None:
    """Refuse a ``.pdmodel`` that is not a Paddle ``ProgramDesc``: protobuf that parses as its
    outline (:func:`_outline`) with every required field, at least one block, block 0 the
    global block (``idx`` 0), and no field the outline does not know at the top (a trial: a
    7-byte "garbage" ``model.pdmodel`` was stored and signed, and the check then crashed on it
    inside the image with a segmentation fault).

    Raises:
        ConfigError: naming the file and what is wrong.
    """
    outline = _outline()()
    try:
        outline.ParseFromString(program.read_bytes())
        why = ("it has no block" if not outline.blocks
               else "a block lacks its idx or parent_idx" if not outline.IsInitialized()
               else "its first block is not the global block (idx 0)" if outline.blocks[0].idx
               else "it holds fields a ProgramDesc has not" if len(UnknownFieldSet(outline))
               else None)
    except DecodeError as e:  # also a missing required field
        why = f"not protobuf of one ({str(e)[:120]})"
    if why:
        raise ConfigError(f"{program} is not a Paddle program (ProgramDesc): {why}",
                          "give the .pdmodel paddle.jit.save wrote (Paddle 2.x, or 3.x with "
                          "FLAGS_enable_pir_api=0)")


def inputs_of(folder: Path, prefix: str, fmt: str) -> tuple[InputSpec, ...] | None:
    """The export's inputs when its program can be read here (PIR), else None (legacy protobuf:
    the check reads them inside the runtime image, once :func:`check_program_desc` has passed).

    Raises:
        ConfigError: as :func:`pir_inputs` and :func:`check_program_desc`.
    """
    if fmt != "paddle-pir-json":
        check_program_desc(folder / f"{prefix}.pdmodel")
        return None
    return pir_inputs(folder / f"{prefix}.json")
