"""Convert a paddle.jit.save export to ONNX with paddle2onnx, INSIDE the runtime image (issue 13).

Run by ``invoke artifacts.check --onnx`` in a container of the image that checked the export, so
the conversion reads the program with that image's Paddle. paddle2onnx is not in the image: the
pinned wheel is installed from a wheel folder mounted read-only at WHEELS (the host's pip
download) into a temp folder, ``--no-deps``: its declared dependencies (onnx, onnxoptimizer,
polygraphy) serve only the optimisation passes, which are off here (``optimize_tool="None"``:
2.1.0's onnxoptimizer list names an unknown pass, ``eliminate_nop_cast `` with a trailing space,
and its polygraphy pass pip-installs onnx_graphsurgeon at run time). Usage:

    python3 to_onnx.py MODEL_DIR PREFIX FORMAT OUT_DIR OPSET WHEELS REQUIREMENT

Writes ``OUT_DIR/<PREFIX>.onnx`` and ``OUT_DIR/onnx.json``: ``paddle2onnx`` (version),
``paddle``, ``opset`` (asked), ``code`` (None, ``onnx-install``: the wheel does not install
here, ``onnx-unsupported``: paddle2onnx refuses this Paddle, ``onnx-convert``: the conversion
failed) and ``message``. Depends on paddle, pip and the
standard library only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import traceback


def main(argv: list[str]) -> int:
    folder, prefix, fmt, out, opset, wheels, requirement = argv
    result = {"format": fmt, "opset": int(opset), "requirement": requirement, "code": None,
              "message": ""}
    try:
        convert(result, folder, prefix, fmt, out, int(opset), wheels, requirement)
    except Exception as e:  # noqa: BLE001 - every failure is reported in onnx.json
        result.update(code="onnx-convert", message=_short(e))
    finally:
        with open(os.path.join(out, "onnx.json"), "w") as fh:
            json.dump(result, fh, indent=2)
    return 0 if result["code"] is None else 1


def convert(result: dict, folder: str, prefix: str, fmt: str, out: str, opset: int,
            wheels: str, requirement: str) -> None:
    import paddle

    result["paddle"] = paddle.__version__
    target = tempfile.mkdtemp(prefix="paddle2onnx-")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-input",
                          "--disable-pip-version-check", "--no-index", "--no-deps", "--no-compile",
                          "--find-links", wheels, "--target", target, requirement],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        tail = " ".join((pip.stderr or pip.stdout).strip().splitlines()[-2:])
        result.update(code="onnx-install", message=tail[-1500:] or f"pip exit {pip.returncode}")
        return
    sys.path.insert(0, target)
    try:
        import paddle2onnx
    except (ValueError, ImportError) as e:  # 2.1.0 refuses Paddle < 3.0.0.dev20250426
        result.update(code="onnx-unsupported", message=_short(e))
        return
    result["paddle2onnx"] = paddle2onnx.__version__
    base = os.path.join(folder, prefix)
    program = base + (".json" if fmt == "paddle-pir-json" else ".pdmodel")
    save = os.path.join(out, prefix + ".onnx")
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):  # paddle2onnx logs its error, then fails elsewhere
            paddle2onnx.export(program, base + ".pdiparams", save, opset_version=opset,
                               auto_upgrade_opset=True, enable_onnx_checker=True,
                               optimize_tool="None")
    except Exception as e:  # noqa: BLE001
        said = [x for x in log.getvalue().splitlines() if "Failed" in x or "rror" in x]
        result.update(code="onnx-convert", message=" | ".join([*said[-3:], _short(e)]))
        return
    if not os.path.isfile(save):
        result.update(code="onnx-convert", message=log.getvalue()[-1500:] or "no file written")


def _short(e: BaseException) -> str:
    lines = [x for x in traceback.format_exception_only(type(e), e)[-1].splitlines() if x.strip()]
    return " ".join(lines)[-1500:]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
