"""Load a paddle.jit.save export where it will run, feed it, compare with its references (issue 13).

Run by ``invoke artifacts.check`` INSIDE the runtime image; depends only on paddle, numpy (a
dependency of paddle) and the standard library. Usage:

    python3 check_export.py MODEL_DIR PREFIX FORMAT OUT_JSON SPEC_JSON RTOL ATOL BATCHES

FORMAT is ``paddle-pir-json`` or ``paddle-program``; SPEC_JSON the recorded InputSpec (``null``:
read it from the predictor); BATCHES e.g. ``1,3``. For each batch size the export is run with
``paddle.inference`` and with ``paddle.jit.load``; outputs are compared with
``reference_outputs.npz`` for the rows of ``reference_inputs.npz`` (row ``i % rows`` for a batch
larger than the references). Without references only loading and output shapes are checked.
The feeds of each batch are saved next to OUT_JSON (``feeds-<batch>.npz``, and
``expected-<batch>.npz`` with references) and named in its ``feeds``: the host's ONNX Runtime
parity check reads them, so both engines are fed the same arrays by one rule.
Each case gets a ``code`` the caller turns into a cause and a fix: ``no-paddle``,
``legacy-in-pir``, ``pir-in-legacy``, ``unreadable``, ``missing-params``, ``fixed-dim``,
``mismatch``, ``error``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import traceback

OTHER_DYNAMIC = 8  # size given to a dynamic non-batch dimension when no reference fixes it


def main(argv: list[str]) -> int:
    folder, prefix, fmt, out, spec, rtol, atol, batches = argv
    result = {"format": fmt, "rtol": float(rtol), "atol": float(atol),
              "batches": [int(b) for b in batches.split(",")], "cases": [],
              # the wheel tag the ONNX conversion needs (artifacts/onnx.py)
              "python": "%d.%d" % sys.version_info[:2], "machine": platform.machine()}
    try:
        run(result, folder, prefix, fmt, json.loads(spec), out)
    finally:
        with open(out, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0 if result["cases"] and all(c["passed"] for c in result["cases"]) else 1


def case(result: dict, name: str, code: str | None, message: str = "", **extra) -> None:
    result["cases"].append({"name": name, "passed": code is None, "code": code,
                            "message": message[-1500:], **extra})


def run(result: dict, folder: str, prefix: str, fmt: str, spec: list | None, out: str) -> None:
    try:
        import numpy as np
        import paddle
        from paddle import inference
    except ImportError as e:
        return case(result, "import", "no-paddle", f"{type(e).__name__}: {e}")
    pir_on = os.environ.get("FLAGS_enable_pir_api", "1").lower() not in ("0", "false")
    major = int(paddle.__version__.split(".")[0])
    result.update(paddle=paddle.__version__, pir_api=pir_on and major >= 3)
    base = os.path.join(folder, prefix)
    program = base + (".json" if fmt == "paddle-pir-json" else ".pdmodel")
    # the image's user may not read a folder or file of mode 700/600 (a trial: "the export has no
    # <prefix>.pdiparams" for files that were there, owned by root on the host)
    unreadable = folder if not os.access(folder, os.R_OK | os.X_OK) else next(
        (p for p in (program, base + ".pdiparams")
         if os.path.lexists(p) and not os.access(p, os.R_OK)), None)
    if unreadable is not None:
        return case(result, "load", "unreadable",
                    f"{unreadable} is not readable by the image's user (uid {os.getuid()})")
    if not os.path.isfile(base + ".pdiparams"):
        return case(result, "load", "missing-params", f"{base}.pdiparams not found")
    if fmt == "paddle-pir-json" and (major < 3 and major != 0):  # 0.0.0: a develop build
        return case(result, "load", "pir-in-legacy", f"Paddle {paddle.__version__}")
    refs = references(np, folder)
    result["references"] = refs is not None
    try:
        predictor = _predictor(inference, program, base + ".pdiparams")
    except Exception as e:  # noqa: BLE001 - the loader reports every failure as a case
        return case(result, "load", "error", _short(e))
    names = predictor.get_input_names()
    spec = spec or (legacy_inputs(paddle, program) if fmt == "paddle-program" else None)
    result["inputs"] = spec
    case(result, "load", None, f"inputs {names}")
    fed = {b: inputs_for(np, spec, refs, b) for b in result["batches"]}
    result["feeds"] = save_feeds(np, os.path.dirname(os.path.abspath(out)), fed)
    layer = _jit_load(paddle, base, fmt, pir_on, result)
    first: dict = {}
    for batch in result["batches"]:
        feeds, expected = fed[batch]
        got = _run_predictor(predictor, names, feeds)
        judge(np, result, f"inference/batch-{batch}", got, expected, batch, first, "inference")
        if layer is not None:
            got = _run_layer(paddle, layer, names, feeds)
            judge(np, result, f"jit.load/batch-{batch}", got, expected, batch, first, "jit")


def legacy_inputs(paddle, program: str) -> list:
    """The feeds of a 2.x ``ProgramDesc`` (protobuf), read with Paddle's own reader."""
    from paddle.base import core
    from paddle.base.data_feeder import convert_dtype

    with open(program, "rb") as fh:
        desc = core.ProgramDesc(fh.read())  # kept: the block lives inside it
    block = desc.block(0)
    feeds = [block.op(i).output("Out")[0] for i in range(block.op_size())
             if block.op(i).type() == "feed"]
    return [{"name": n, "shape": list(block.var(n.encode()).shape()),
             "dtype": convert_dtype(block.var(n.encode()).dtype())} for n in feeds]


def references(np, folder: str):
    paths = [os.path.join(folder, f"reference_{k}.npz") for k in ("inputs", "outputs")]
    if not all(os.path.isfile(p) for p in paths):
        return None
    inputs, outputs = (dict(np.load(p)) for p in paths)
    return inputs, [outputs[k] for k in sorted(outputs, key=lambda k: int(k.rsplit("_", 1)[1]))]


def inputs_for(np, spec: list, refs, batch: int):
    """Feeds (name → array with ``batch`` rows) and the expected outputs (None without refs)."""
    if refs is not None:
        ins, outs = refs
        rows = np.arange(batch) % len(next(iter(ins.values())))
        return {n: ins[n][rows] for n in ins}, [o[rows] for o in outs]
    rng = np.random.default_rng(0)
    feeds = {}
    for s in spec:
        shape = [batch if i == 0 and d < 0 else OTHER_DYNAMIC if d < 0 else d
                 for i, d in enumerate(s["shape"])]
        feeds[s["name"]] = rng.normal(size=shape).astype(s["dtype"])
    return feeds, None


def save_feeds(np, folder: str, fed: dict) -> dict:
    """Write each batch's feeds (and expected outputs) as .npz files in ``folder``; returns
    ``{batch: {"inputs": file, "expected": file or None}}`` (file names, relative to it)."""
    named = {}
    for batch, (feeds, expected) in fed.items():
        inputs = f"feeds-{batch}.npz"
        np.savez(os.path.join(folder, inputs), **feeds)
        outputs = None
        if expected is not None:
            outputs = f"expected-{batch}.npz"
            np.savez(os.path.join(folder, outputs),
                     **{f"output_{i}": e for i, e in enumerate(expected)})
        named[str(batch)] = {"inputs": inputs, "expected": outputs}
    return named


def judge(np, result, name, got, expected, batch, first, key) -> None:
    if isinstance(got, Exception):
        code = "fixed-dim" if first.get(key) and batch != 1 else "error"
        return case(result, name, code, _short(got))
    shapes = [list(g.shape) for g in got]
    if batch == 1:
        first[key] = shapes
    want = ([list(e.shape) for e in expected] if expected is not None else
            [[batch, *s[1:]] if s and s[0] == 1 else s for s in first.get(key, shapes)])
    if shapes != want:
        return case(result, name, "fixed-dim", f"output shapes {shapes}, expected {want}",
                    shapes=shapes)
    if expected is None:
        return case(result, name, None, "shapes only (no reference outputs)", shapes=shapes)
    err = max(float(np.max(np.abs(g - e))) if g.size else 0.0 for g, e in zip(got, expected))
    ok = all(np.allclose(g, e, rtol=result["rtol"], atol=result["atol"])
             for g, e in zip(got, expected))
    case(result, name, None if ok else "mismatch", f"max abs error {err:.3g}", shapes=shapes,
         max_abs_err=err)


def _predictor(inference, program: str, params: str):
    config = inference.Config(program, params)
    config.disable_gpu()
    config.disable_glog_info()
    return inference.create_predictor(config)


def _jit_load(paddle, base: str, fmt: str, pir_on: bool, result: dict):
    try:
        layer = paddle.jit.load(base)
        layer.eval()
        return layer
    except Exception as e:  # noqa: BLE001
        legacy = fmt == "paddle-program" and pir_on
        case(result, "jit.load", "legacy-in-pir" if legacy else "error", _short(e))
        return None


def _run_predictor(predictor, names, feeds):
    try:
        for n in names:
            handle = predictor.get_input_handle(n)
            handle.reshape(list(feeds[n].shape))
            handle.copy_from_cpu(feeds[n])
        predictor.run()
        return [predictor.get_output_handle(o).copy_to_cpu() for o in predictor.get_output_names()]
    except Exception as e:  # noqa: BLE001
        return e


def _run_layer(paddle, layer, names, feeds):
    try:
        out = layer(*[paddle.to_tensor(feeds[n]) for n in names])
        return [t.numpy() for t in (out if isinstance(out, (list, tuple)) else [out])]
    except Exception as e:  # noqa: BLE001
        return e


def _short(e: Exception) -> str:
    lines = [x for x in traceback.format_exception_only(type(e), e)[-1].splitlines() if x.strip()]
    return " ".join(lines)[-1500:]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
