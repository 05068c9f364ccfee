"""The ONNX output of a model check: paddle2onnx in the runtime image, ONNX Runtime parity here.

For TensorRT and ONNX Runtime servers, ``artifacts.check --onnx`` converts the
export with the pinned paddle2onnx INSIDE the runtime image (``smoke/workers/to_onnx.py``), so the
program is read by the Paddle it will be served with, and checks the ``.onnx`` with the pinned
ONNX Runtime on this host against the export's reference outputs, at batch 1 and the second batch.

Where paddle2onnx comes from (measured, README "ONNX"): not from the image. Baking it into the cpu
image costs every image build ~13 s and 52 MB (pip with its onnx, onnxoptimizer and polygraphy
dependencies), in every test session and benchmark that builds an image; installing the one pinned
wheel (3.6 MB) from a host wheel cache into the check container costs ~1.5 s, and only for
``--onnx``. The cache (``<state>/wheels/paddle2onnx-<v>-cp<xy>-<machine>``) is filled once by
``pip download`` for the image's Python and machine (reported by the loader), through the host's
pip configuration (``PIP_INDEX_URL`` for a mirror).

Formats the pinned paddle2onnx 2.1.0 accepts (tried with Paddle 3.0.0, PIR on and off): PIR
``<prefix>.json`` and legacy ``<prefix>.pdmodel`` (translated to PIR by paddle2onnx first); in a
Paddle 2.x image neither, since 2.1.0 refuses any Paddle older than 3.0.0.dev20250426 at import.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd import engine, proc
from paddlecd.errors import ConfigError, ModelCheckError
from paddlecd.files import free_space
from paddlecd.types import Echo

# Pinned; pyproject.toml's `paddle2onnx` and `onnx` extras name the same versions (unit-tested).
PADDLE2ONNX_VERSION = "2.1.0"
ONNXRUNTIME_VERSION = "1.32.0"
REQUIREMENT = f"paddle2onnx=={PADDLE2ONNX_VERSION}"
CONVERTER = "/smoke/workers/to_onnx.py"
# 13: the opset TensorRT 8.x and every ONNX Runtime since 1.6 run; paddle2onnx raises it by
# itself when an operator needs more (auto_upgrade_opset), and the manifest records the real one.
DEFAULT_OPSET = 13
# Two fp32 kernel sets (Paddle's and ONNX Runtime's MLAS) sum in different orders: looser than
# the same-engine check (1e-5/1e-6); 1e-5 absolute is ~100 ulp of a unit-scale float32 output.
ONNX_RTOL, ONNX_ATOL = 1e-4, 1e-5


@dataclass(frozen=True, kw_only=True)
class OnnxOutput:
    """A converted and checked ``<prefix>.onnx``, as ``check.json`` and the manifest list it.

    Attributes:
        path: file name next to the export; size (B), sha256: of the file.
        opset: the model's default-domain opset (read from the file); paddle2onnx: its version.
        image: ``repo@sha256:…`` the conversion ran in; paddle_version: that image's Paddle.
        onnxruntime: the version that checked parity; parity: ``passed``, ``passed (shapes
            only)`` (no references) or ``failed``; rtol, atol: of ``numpy.allclose``; batches:
            the batch sizes fed; max_abs_err: the largest absolute error (None: no references).
    """

    path: str
    size: int
    sha256: str
    opset: int
    paddle2onnx: str
    image: str
    paddle_version: str | None
    onnxruntime: str
    parity: str
    rtol: float
    atol: float
    batches: tuple[int, ...]
    max_abs_err: float | None

    def to_json(self) -> dict[str, Any]:
        """The record (``check.json``'s ``onnx`` and the manifest's ``onnx``)."""
        doc = dict(vars(self))
        doc["batches"] = list(self.batches)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> OnnxOutput:
        """The inverse of :meth:`to_json`.

        Raises:
            KeyError, TypeError: not an ONNX record.
        """
        return cls(**{**doc, "batches": tuple(doc["batches"])})


def require_runtime() -> None:
    """Fail before anything runs when this host lacks ONNX Runtime or onnx (the ``onnx`` extra).

    Raises:
        ConfigError: naming the missing package.
    """
    for module in ("onnxruntime", "onnx"):
        try:
            __import__(module)
        except ImportError as e:
            raise ConfigError(
                f"--onnx needs the Python package {module} on this host ({e})",
                "pip install 'paddlecd[onnx]' (onnxruntime and onnx, pinned)",
            ) from e


def wheelhouse(settings: Any, python: str, machine: str, *, on_line: Echo | None = None) -> Path:
    """The folder holding the pinned paddle2onnx wheel for CPython ``python`` (``3.11``) on
    ``machine`` (``x86_64``), downloaded once (``pip download``; renamed into place when whole).

    Raises:
        ModelCheckError: pip could not fetch the wheel (no such wheel, or no index reachable).
    """
    tag = f"cp{python.replace('.', '')}"
    cache = settings.state / "wheels" / f"paddle2onnx-{PADDLE2ONNX_VERSION}-{tag}-{machine}"
    if cache.is_dir() and any(cache.glob("paddle2onnx-*.whl")):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache.name}.", dir=cache.parent))
    # paddle2onnx 2.1.0 publishes manylinux_2_24/2_28 wheels (PyPI file list).
    platforms = [f"--platform=manylinux_2_{v}_{machine}" for v in (28, 24, 17)]
    try:
        proc.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-input",
                  "--only-binary=:all:", "--implementation=cp", f"--python-version={python}",
                  *platforms, "-d", str(tmp), REQUIREMENT],
                 echo=on_line, error=ModelCheckError, timeout=600,
                 what=f"downloading {REQUIREMENT} for {tag} {machine}",
                 hint="set PIP_INDEX_URL to a reachable index, or put the wheel into "
                      f"{cache} by hand")
        tmp.chmod(0o755)  # mkdtemp makes 0700; the image's non-root user reads it
        tmp.rename(cache)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cache


def convert(settings: Any, export: Any, *, image: str, python: str, machine: str, opset: int,
            env: dict[str, str], on_line: Echo | None = None) -> tuple[Path | None, dict]:
    """Run ``to_onnx.py`` in ``image`` on ``export``: ``(path of the .onnx in a temp folder, the
    converter's onnx.json)``; the path is None when the converter reports a failure ``code``.

    Raises:
        ModelCheckError: the converter did not run (no record), or its record is cut.
        ContainerTimeout: it ran past ``verify.timeout`` (the check names it as its failure).
        EngineError: as engine.container.
    """
    wheels = wheelhouse(settings, python, machine, on_line=on_line)
    from paddlecd.artifacts import scratch

    out = scratch.folder(settings, f"{export.prefix}-onnx")  # the image's non-root user writes it
    spec = engine.ContainerSpec(
        image=image, workdir="/tmp", keep=settings.runtime.keep, labels=scratch.owned_labels(),
        command=("python3", CONVERTER, "/model", export.prefix, export.format, "/out",
                 str(opset), "/wheels", REQUIREMENT),
        env={"PYTHONDONTWRITEBYTECODE": "1", **env},
        mounts=(engine.Mount(str(settings.root / "smoke"), "/smoke", read_only=True),
                engine.Mount(str(export.folder.resolve()), "/model", read_only=True),
                engine.Mount(str(wheels.resolve()), "/wheels", read_only=True),
                engine.Mount(str(out), "/out")))
    with engine.container(spec) as c:  # past verify.timeout: the check names it (ContainerTimeout)
        finished = engine.wait(c, timeout=settings.verify.timeout, on_line=on_line)
    record = out / "onnx.json"
    if not record.is_file():
        tail = " | ".join(finished.logs.strip().splitlines()[-3:])
        raise ModelCheckError(f"the ONNX conversion did not run in {image} "
                              f"(exit {finished.exit_code}): {tail[:300]}",
                              "run it by hand: docker run --rm IMAGE python3 -c 'import paddle'")
    try:
        doc = json.loads(record.read_text())
        if not isinstance(doc, dict):
            raise ValueError(f"a JSON {type(doc).__name__}, not an object")
    except ValueError as e:  # cut by a full disk, or not the converter's record
        raise ModelCheckError(f"the ONNX conversion's record {record} is cut or not a record "
                              f"({str(e).splitlines()[0][:120]}): is the state folder full?",
                              free_space(record.parent)) from e
    return (None if doc.get("code") else out / f"{export.prefix}.onnx"), doc


def opset_of(path: Path) -> int:
    """The default-domain (``""`` / ``ai.onnx``) opset version of the ONNX model at ``path``."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def parity(path: Path, folder: Path, *, feeds: Mapping[str, Any] | None,
           batches: tuple[int, ...], rtol: float, atol: float) -> list[dict[str, Any]]:
    """Run ``path`` with ONNX Runtime (CPU) at each batch size on the arrays the loader fed
    Paddle, and compare with the outputs it expected.

    Args:
        folder: where the loader saved them; feeds: its record of them (``loader.json``'s
            ``feeds``: ``{"<batch>": {"inputs": file, "expected": file or None}}``, written by
            ``smoke/workers/check_export.py``, the one place the feeds are made).

    Returns:
        One case per batch, ``onnxruntime/batch-<n>``, in the loader's form (``name``,
        ``passed``, ``code``: None, ``fixed-dim``, ``onnx-mismatch`` or ``error`` for a batch the
        loader fed nothing, ``message``, ``shapes``, ``max_abs_err``). Without references: output
        shapes only (``max_abs_err`` None).
    """
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    cases: list[dict[str, Any]] = []
    first: list[list[int]] | None = None
    for batch in batches:
        name = f"onnxruntime/batch-{batch}"
        fed = (feeds or {}).get(str(batch))
        if fed is None:
            cases.append(_case(name, "error", "the loader fed Paddle nothing at this batch size "
                                              "(its load failed: see the cases above)"))
            continue
        inputs = dict(np.load(folder / fed["inputs"]))
        expected = _outputs(np, folder / fed["expected"]) if fed.get("expected") else None
        try:
            got = session.run(None, inputs)
        except Exception as e:  # noqa: BLE001 - ORT raises its own types; each is a failed case
            cases.append(_case(name, "fixed-dim" if first else "error", str(e)[-1500:]))
            continue
        shapes = [list(g.shape) for g in got]
        first = first or shapes
        want = ([list(e.shape) for e in expected] if expected is not None
                else [[batch, *s[1:]] if s and s[0] == 1 else s for s in first])
        if shapes != want:
            cases.append(_case(name, "fixed-dim", f"output shapes {shapes}, expected {want}",
                               shapes=shapes))
        elif expected is None:
            cases.append(_case(name, None, "shapes only (no reference outputs)", shapes=shapes))
        else:
            err = max((float(np.max(np.abs(g - e))) if g.size else 0.0)
                      for g, e in zip(got, expected))
            ok = all(np.allclose(g, e, rtol=rtol, atol=atol) for g, e in zip(got, expected))
            cases.append(_case(name, None if ok else "onnx-mismatch",
                               f"max abs error {err:.3g} (rtol {rtol:g}, atol {atol:g})",
                               shapes=shapes, max_abs_err=err))
    return cases


def _case(name: str, code: str | None, message: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "passed": code is None, "code": code, "message": message, **extra}


def _outputs(np: Any, path: Path) -> list[Any]:
    """The arrays of an ``output_<i>`` .npz in output order."""
    outs = dict(np.load(path))
    return [outs[k] for k in sorted(outs, key=lambda k: int(k.rsplit("_", 1)[1]))]


def output(path: Path, folder: Path, *, prefix: str, converter: dict, image: str,
           cases: list[dict[str, Any]], rtol: float, atol: float,
           batches: tuple[int, ...]) -> OnnxOutput:
    """Copy the converted ``path`` next to the export in ``folder`` as ``<prefix>.onnx`` and
    describe it (:class:`OnnxOutput`) from the converter's record and the parity ``cases``."""
    import onnxruntime as ort

    target = folder / f"{prefix}.onnx"
    shutil.copyfile(path, target)
    data = target.read_bytes()
    errors = [c["max_abs_err"] for c in cases if c.get("max_abs_err") is not None]
    passed = bool(cases) and all(c["passed"] for c in cases)
    limited = passed and not errors
    return OnnxOutput(
        path=target.name, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
        opset=opset_of(target), paddle2onnx=converter.get("paddle2onnx") or PADDLE2ONNX_VERSION,
        image=image, paddle_version=converter.get("paddle"), onnxruntime=ort.__version__,
        parity="failed" if not passed else "passed (shapes only)" if limited else "passed",
        rtol=rtol, atol=atol, batches=tuple(batches),
        max_abs_err=max(errors) if errors else None)
