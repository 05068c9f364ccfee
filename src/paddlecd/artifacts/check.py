"""The model check: an export loaded INSIDE the runtime image and compared with its references.

``smoke/workers/check_export.py`` runs in a container of the runtime image (smoke/
read-only at /smoke, the export read-only at /model, results in /out), the way verify runs the
smoke suite (:func:`paddlecd.verify.run.smoke_container`). It opens the export with
``paddle.inference`` and ``paddle.jit.load``, feeds batch 1 and a second batch size of the
recorded InputSpec and compares the outputs with ``reference_outputs.npz`` within ``rtol``/``atol``
(``numpy.allclose``: ``|got - want| <= atol + rtol * |want|``). The result is a :class:`CheckResult`
(``check.json`` + ``check.junit.xml``) stored next to ``manifest.json``. Each known failure has a
one-line cause and its fix (:data:`CAUSES`).
"""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddlecd import engine, files
from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import onnx as onnx_out
from paddlecd.artifacts import program, scratch
from paddlecd.errors import (
    ConfigError,
    ContainerTimeout,
    EngineError,
    ModelCheckError,
    NotFoundError,
)
from paddlecd.files import free_space, now_iso
from paddlecd.types import Echo

CHECK_JSON, CHECK_JUNIT = am.CHECK_JSON, am.CHECK_JUNIT
LOADER = "/smoke/workers/check_export.py"
RTOL, ATOL = 1e-5, 1e-6  # fp32 on CPU; a GPU runtime may need more (TF32: see verify.run)

# code (set by the loader) → (cause, fix). Sources: Paddle #75145, #71996, PR #65671 (legacy
# programs under PIR), #65106, #52392 (shape arithmetic on a dynamic dimension).
CAUSES: dict[str, tuple[str, str]] = {
    "legacy-in-pir": (
        "a Paddle 2.x program (.pdmodel) in a PIR-only Paddle 3.x runtime",
        "set FLAGS_enable_pir_api=0 before `import paddle` in the server "
        "(artifacts.check --no-pir), or re-export under Paddle 3.x "
        "(Paddle #75145, #71996, PR #65671)",
    ),
    "pir-in-legacy": (
        "a Paddle 3.x PIR program (.json) in a Paddle 2.x runtime, which cannot " "read it",
        "serve it from a Paddle 3.x image, or re-export under 2.x",
    ),
    "unreadable": (
        "the export's folder or files are not readable by the image's user (it is not root)",
        "make them readable to all: chmod -R a+rX <the export folder>",
    ),
    "missing-params": (
        "the export has no <prefix>.pdiparams",
        "upload the whole paddle.jit.save folder",
    ),
    "fixed-dim": (
        "a dynamic input dimension became fixed or negative in the export: the "
        "second batch gives the wrong output shape",
        "re-export computing sizes with paddle.shape(x) instead of x.shape "
        "(Paddle #65106, #52392)",
    ),
    "mismatch": (
        "the outputs differ from the reference outputs beyond the tolerance",
        "serve it from the image that exported it, or re-record the references",
    ),
    "no-paddle": (
        "the image has no Paddle (python3 -c 'import paddle' fails)",
        "check with a Paddle runtime image, e.g. a release of the cpu variant",
    ),
    "error": ("the export failed to load or run", "see the message in check.json"),
    # --onnx (artifacts/onnx.py): paddle2onnx in the runtime image, ONNX Runtime on this host
    "onnx-install": (
        "the pinned paddle2onnx wheel does not install in the runtime image",
        "check the image's python3 -m pip and Python version against the wheel cache "
        "(<state>/wheels)",
    ),
    "onnx-unsupported": (
        f"paddle2onnx {onnx_out.PADDLE2ONNX_VERSION} does not accept an export in this runtime: "
        "it needs Paddle >= 3.0 (it reads PIR .json, and .pdmodel translated to PIR)",
        "convert in a Paddle 3.x image (artifacts.check --onnx --image <3.x release>)",
    ),
    "onnx-convert": (
        "paddle2onnx could not convert the program",
        "see the message (an operator it lacks?); try another --onnx-opset",
    ),
    "onnx-mismatch": (
        "the ONNX Runtime outputs differ from the reference outputs beyond the tolerance",
        "compare another --onnx-opset, or re-record the references if they are stale",
    ),
}


@dataclass(frozen=True)
class Case:
    """One loader case: ``name`` (``load``, ``jit.load``, ``inference/batch-3``), ``passed``,
    ``code`` (a :data:`CAUSES` key, None when passed), the loader's ``message``, output
    ``shapes`` and the largest absolute error against the references."""

    name: str
    passed: bool
    code: str | None = None
    message: str = ""
    shapes: tuple[tuple[int, ...], ...] = ()
    max_abs_err: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The case as a JSON object (shapes as lists)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "code": self.code,
            "message": self.message,
            "shapes": [list(s) for s in self.shapes],
            "max_abs_err": self.max_abs_err,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Case:
        """The inverse of :meth:`to_json` (also reads the loader's output)."""
        return cls(
            doc["name"],
            bool(doc["passed"]),
            doc.get("code"),
            doc.get("message", ""),
            tuple(tuple(s) for s in doc.get("shapes") or ()),
            doc.get("max_abs_err"),
        )


@dataclass(frozen=True)
class CheckResult:
    """A finished model check.

    Attributes:
        image: ``repo@sha256:…`` it ran in; paddle_version: that image's Paddle (from the loader).
        format: the export's; pir_api: whether PIR was on in the runtime.
        passed: every case passed. limited: no reference outputs, so only load + shapes checked.
        rtol, atol: the tolerance of ``numpy.allclose``. batches: the batch sizes fed.
        inputs: the InputSpec fed (``[{"name", "shape", "dtype"}]``, ``-1`` dynamic).
        onnx: the ONNX output (``--onnx``) when it was converted; its cases (``onnx/convert``,
            ``onnxruntime/batch-<n>``) are in ``cases``.
    """

    model: str
    image: str
    paddle_version: str | None
    format: str
    pir_api: bool | None
    passed: bool
    limited: bool
    rtol: float
    atol: float
    batches: tuple[int, ...]
    inputs: tuple[dict[str, Any], ...]
    cases: tuple[Case, ...]
    created: str
    duration_s: float
    flags: dict[str, str] = field(default_factory=dict)
    onnx: onnx_out.OnnxOutput | None = None

    @property
    def failed(self) -> tuple[Case, ...]:
        """The cases that did not pass."""
        return tuple(c for c in self.cases if not c.passed)

    @property
    def status(self) -> str:
        """``passed``, ``passed (load + shapes only)`` or ``failed``, as ``artifacts.list`` says."""
        return am.check_status(self.passed, self.limited)

    def error(self, *, onnx_only: bool = False) -> ModelCheckError | None:
        """The first failure as one error: its cause, the case, the loader's message; the fix as
        the hint. None when the check passed (``onnx_only``: when its ONNX cases passed)."""
        failed = [c for c in self.failed if not onnx_only or c.name.startswith("onnx")]
        if not failed:
            return None
        first = next((c for c in failed if c.code != "error"), failed[0])
        cause, fix = CAUSES[first.code or "error"]
        detail = first.message.splitlines()[0][:300] if first.message else ""
        return ModelCheckError(
            f"{self.model} in {self.image}: {cause} ({first.name}: {detail})", fix
        )

    def to_json(self) -> dict[str, Any]:
        """The record as stored in ``check.json``."""
        return {
            "schema_version": 1,
            "model": self.model,
            "image": self.image,
            "paddle_version": self.paddle_version,
            "format": self.format,
            "pir_api": self.pir_api,
            "passed": self.passed,
            "limited": self.limited,
            "status": self.status,
            "rtol": self.rtol,
            "atol": self.atol,
            "batches": list(self.batches),
            "inputs": list(self.inputs),
            "cases": [c.to_json() for c in self.cases],
            "created": self.created,
            "duration_s": self.duration_s,
            "flags": dict(self.flags),
            "onnx": self.onnx.to_json() if self.onnx else None,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> CheckResult:
        """The inverse of :meth:`to_json`.

        Raises:
            KeyError, TypeError: not a check record.
        """
        return cls(
            model=doc["model"],
            image=doc["image"],
            paddle_version=doc["paddle_version"],
            format=doc["format"],
            pir_api=doc["pir_api"],
            passed=doc["passed"],
            limited=doc["limited"],
            rtol=doc["rtol"],
            atol=doc["atol"],
            batches=tuple(doc["batches"]),
            inputs=tuple(doc["inputs"]),
            cases=tuple(Case.from_json(c) for c in doc["cases"]),
            created=doc["created"],
            duration_s=doc["duration_s"],
            flags=dict(doc.get("flags") or {}),
            onnx=onnx_out.OnnxOutput.from_json(doc["onnx"]) if doc.get("onnx") else None,
        )

    def junit(self) -> bytes:
        """The cases as JUnit XML (one testsuite ``artifacts.check``), for CI report viewers."""
        suite = ET.Element(
            "testsuite",
            name="artifacts.check",
            tests=str(len(self.cases)),
            failures=str(len(self.failed)),
            time=f"{self.duration_s:.3f}",
        )
        for c in self.cases:
            tc = ET.SubElement(suite, "testcase", classname=self.model, name=c.name)
            if not c.passed:
                cause, fix = CAUSES[c.code or "error"]
                ET.SubElement(tc, "failure", message=f"{cause}: {fix}").text = c.message
        return ET.tostring(ET.ElementTree(suite).getroot(), encoding="utf-8", xml_declaration=True)


def resolve_image(settings: Any, image: str | None) -> str:
    """``--image`` as ``host/repo@sha256:…``: a digest reference as given, a release such as
    ``1.4.0-cpu`` in the release repository, any other tag resolved once in its registry.

    Raises:
        ConfigError: no image, an image ID, or no such release (as release.show says it).
        NotFoundError, RegistryError: as registry.pin.
    """
    from paddlecd.registry import client as registry

    if not image:
        raise ConfigError(
            "artifacts.check needs --image",
            "give the runtime image: a release " "(1.4.0-cpu) or repo@sha256:...",
        )
    if "@" in image or image.startswith("sha256:"):  # trial 21: a bare digest was glued onto
        am.parse_image(image)  # the release repository as a tag ("bad repository …:sha256")
        return image
    if "/" in image:
        return str(registry.pin(settings, image))
    try:  # a release (or moving tag) of this project's release repository
        return str(registry.pin(settings, f"{settings.release_repo}:{image}"))
    except NotFoundError as e:
        raise ConfigError(
            f"unknown release {image} in {settings.release_repo}", "see: invoke release.list"
        ) from e


def check_folder(
    settings: Any,
    folder: Path,
    *,
    image: str,
    name: str | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    batch: int = 3,
    no_pir: bool = False,
    on_line: Echo | None = None,
    onnx: bool = False,
    opset: int = onnx_out.DEFAULT_OPSET,
    onnx_rtol: float = onnx_out.ONNX_RTOL,
    onnx_atol: float = onnx_out.ONNX_ATOL,
) -> CheckResult:
    """Check the export in ``folder`` inside ``image`` and write ``check.json`` and
    ``check.junit.xml`` next to it.

    Args:
        image: the runtime image (see :func:`resolve_image`).
        batch: the second batch size fed (the first is 1), >= 2.
        no_pir: run with ``FLAGS_enable_pir_api=0`` (the flag path for 2.x programs).
        onnx: also convert it with paddle2onnx in ``image`` (opset ``opset``, 7..19) and check
            the ``.onnx`` with ONNX Runtime within ``onnx_rtol``/``onnx_atol``; it is written
            next to the export as ``<prefix>.onnx`` (an old one is removed first).

    Returns:
        The record; ``passed`` False when a case failed (``error()`` says why).

    Raises:
        ConfigError: not an export, bad tolerance, batch or opset; ``--onnx`` without ONNX
            Runtime on this host; ``no_pir`` for a PIR program. ModelCheckError: the image has
            no Paddle (no record is written). EngineError, RegistryError: the image cannot be run.
    """
    _check_parameters(settings, batch=batch, rtol=rtol, atol=atol, onnx=onnx, opset=opset,
                      onnx_rtol=onnx_rtol, onnx_atol=onnx_atol)
    export = am.find_export(folder)
    if no_pir and export.format == "paddle-pir-json":  # a trial: run anyway, failed, and the
        raise ConfigError(                               # store recorded a good model as failed
            f"--no-pir: {name or export.folder} holds a PIR program ({export.prefix}.json), which "
            "loads only with PIR on", "drop --no-pir: it is for Paddle 2.x programs "
            f"({export.prefix}.pdmodel) in a 3.x runtime")
    specs = program.inputs_of(export.folder, export.prefix, export.format)
    reference = resolve_image(settings, image)
    _pull(settings, reference)
    out = _out_dir(settings, export)
    flags = {"FLAGS_enable_pir_api": "0"} if no_pir else {}
    spec = _loader_spec(settings, export, reference, out, specs, rtol=rtol, atol=atol,
                        batch=batch, env=flags)
    started = time.monotonic()
    converted = None
    try:
        loader = _run(spec, settings.verify.timeout, on_line)
        if onnx:  # before the scratch folder goes: parity reads the feeds the loader saved there
            converted = _onnx(settings, export, loader, out, image=reference, opset=opset,
                              env=flags, rtol=onnx_rtol, atol=onnx_atol, on_line=on_line)
    finally:  # the loader's scratch folder: its result is read (the record is stored by save())
        if not settings.runtime.keep:
            shutil.rmtree(out, ignore_errors=True)
    record = _record(loader, name or export.folder.name, reference, export.format,
                     time.monotonic() - started, flags, converted)
    save(record, export.folder)
    return record


def _check_parameters(settings: Any, *, batch: int, rtol: float, atol: float, onnx: bool,
                      opset: int, onnx_rtol: float, onnx_atol: float) -> None:
    """Refuse bad parameters and a missing loader before any image is pulled (ConfigError)."""
    bad_onnx = onnx and (not 7 <= opset <= 19 or onnx_rtol < 0 or onnx_atol < 0)
    if batch < 2 or rtol < 0 or atol < 0 or bad_onnx:
        raise ConfigError(
            f"bad check parameters (batch {batch}, rtol {rtol}, atol {atol}"
            + (f", onnx opset {opset}, rtol {onnx_rtol}, atol {onnx_atol})" if onnx else ")"),
            "use --batch >= 2, non-negative tolerances and --onnx-opset 7..19 "
            "(paddle2onnx's range)",
        )
    if onnx:
        onnx_out.require_runtime()
    if not (settings.root / "smoke" / "workers" / "check_export.py").is_file():
        raise ConfigError(  # mounted at /smoke: without it the container fails obscurely
            f"no smoke/workers/check_export.py under the project root {settings.root}",
            "run from the paddlecd checkout, or set PADDLECD_ROOT to it",
        )


def _loader_spec(settings: Any, export: am.Export, reference: str, out: Path,
                 specs: tuple[program.InputSpec, ...] | None, *, rtol: float, atol: float,
                 batch: int, env: dict[str, str]) -> engine.ContainerSpec:
    """The loader's container: the export read-only at /model, its results in ``out``."""
    return engine.ContainerSpec(
        image=reference,
        workdir="/tmp",
        keep=settings.runtime.keep,
        labels=scratch.owned_labels(),
        command=(
            "python3",
            LOADER,
            "/model",
            export.prefix,
            export.format,
            "/out/loader.json",
            json.dumps(None if specs is None else [s.to_json() for s in specs]),
            repr(rtol),
            repr(atol),
            f"1,{batch}",
        ),
        env={"PYTHONDONTWRITEBYTECODE": "1", **env},
        mounts=(
            engine.Mount(str(settings.root / "smoke"), "/smoke", read_only=True),
            engine.Mount(str(export.folder.resolve()), "/model", read_only=True),
            engine.Mount(str(out), "/out"),
        ),
    )


def _onnx(
    settings: Any,
    export: am.Export,
    loader: dict[str, Any],
    fed: Path,
    *,
    image: str,
    opset: int,
    env: dict[str, str],
    rtol: float,
    atol: float,
    on_line: Echo | None,
) -> tuple[onnx_out.OnnxOutput | None, list[dict[str, Any]]]:
    """Convert in the runtime image, check parity here on the feeds the loader saved in ``fed``;
    the loader's cases gain ``onnx/*``."""
    (export.folder / f"{export.prefix}.onnx").unlink(missing_ok=True)  # never a stale one
    try:
        path, converter = onnx_out.convert(
            settings, export, image=image, python=loader.get("python") or "3.11",
            machine=loader.get("machine") or "x86_64", opset=opset, env=env, on_line=on_line)
    except ContainerTimeout as e:
        raise timed_out("the ONNX conversion", image, settings.verify.timeout, e) from e
    if path is None:
        return None, [{"name": "onnx/convert", "passed": False, "code": converter["code"],
                       "message": converter.get("message", "")}]
    batches = tuple(loader["batches"])
    cases = onnx_out.parity(path, fed, feeds=loader.get("feeds"), batches=batches, rtol=rtol,
                            atol=atol)
    out = onnx_out.output(path, export.folder, prefix=export.prefix, converter=converter,
                          image=image, cases=cases, rtol=rtol, atol=atol, batches=batches)
    shutil.rmtree(path.parent, ignore_errors=True)
    done = {"name": "onnx/convert", "passed": True, "code": None,
            "message": f"paddle2onnx {out.paddle2onnx}, opset {out.opset}, {out.size} B"}
    return out, [done, *cases]


def _pull(settings: Any, reference: str) -> None:
    from paddlecd.registry import auth as registry_auth

    engine.ensure_local(reference,
                        credentials=registry_auth.engine_credentials(settings, reference))


def timed_out(what: str, image: str, timeout: float, e: ContainerTimeout) -> ModelCheckError:
    """``what`` in ``image`` stopped past ``verify.timeout`` (``timeout`` seconds): a
    ModelCheckError whose cause ends in the last lines it printed (at most 300 characters)."""
    tail = " | ".join(e.logs.strip().splitlines()[-3:])[-300:]
    return ModelCheckError(
        f"{what} in {image} did not finish within {timeout:g}s (verify.timeout); its container "
        f"was stopped" + (f"; its last lines: {tail}" if tail else ""),
        "raise verify.timeout (PADDLECD_VERIFY_TIMEOUT), or check a smaller model")


def _out_dir(settings: Any, export: am.Export) -> Path:
    return scratch.folder(settings, export.prefix)


def _run(spec: engine.ContainerSpec, timeout: float, on_line: Echo | None) -> dict[str, Any]:
    try:
        with engine.container(spec) as c:
            finished = engine.wait(c, timeout=timeout, on_line=on_line)
    except ContainerTimeout as e:  # the check's own failure (as verify's smoke run), not exit 4
        raise timed_out("the model check", spec.image, timeout, e) from e
    except EngineError as e:
        if "executable file not found" in e.cause or "no such file" in e.cause.lower():
            raise _no_paddle(spec.image, "no python3") from e
        raise
    result = Path(spec.mounts[2].source) / "loader.json"
    if not result.is_file():
        tail = " | ".join(finished.logs.strip().splitlines()[-3:])
        if "No module named" in finished.logs or "not found" in finished.logs:
            raise _no_paddle(spec.image, tail)
        raise ModelCheckError(
            f"the model check did not run in {spec.image} "
            f"(exit {finished.exit_code}): {tail[:300]}",
            "run the image by hand: docker run --rm IMAGE python3 -c " "'import paddle'",
        )
    try:
        doc = json.loads(result.read_text())
        codes = {c.get("code") for c in doc["cases"]}
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # a trial: a full state
        # folder cut the loader's record (JSONDecodeError traceback)
        raise ModelCheckError(
            f"the model check's record {result} is cut or not a record "
            f"({str(e).splitlines()[0][:120]}): is the state folder full?",
            free_space(result.parent),
        ) from e
    if "no-paddle" in codes:
        raise _no_paddle(spec.image, doc["cases"][0].get("message", ""))
    return doc


def _unreached(cases: tuple[Case, ...], batches: list[int]) -> tuple[Case, ...]:
    """A failed case for each batch the loader never reported although the model loaded and no
    case failed: a loader that died (out of memory at a huge --batch, say) must not read as a
    pass. (After a failed case the loader stops on purpose: that case says why.)"""
    if not any(c.name == "load" and c.passed for c in cases) or any(not c.passed for c in cases):
        return ()
    names = {c.name for c in cases}
    return tuple(
        Case(name, False, "error", "the loader stopped before this case (see its output above)")
        for b in batches for name in (f"inference/batch-{b}", f"jit.load/batch-{b}")
        if name not in names
    )


def _no_paddle(image: str, detail: str) -> ModelCheckError:
    cause, fix = CAUSES["no-paddle"]
    return ModelCheckError(f"{image}: {cause}: {detail[:200]}", fix)


def _record(
    doc: dict[str, Any],
    model: str,
    image: str,
    fmt: str,
    seconds: float,
    flags: dict[str, str],
    converted: tuple[onnx_out.OnnxOutput | None, list[dict[str, Any]]] | None = None,
) -> CheckResult:
    onnx, onnx_cases = converted or (None, [])
    cases = tuple(Case.from_json(c) for c in [*doc["cases"], *onnx_cases])
    cases += _unreached(cases, doc["batches"])
    return CheckResult(
        model=model,
        image=image,
        paddle_version=doc.get("paddle"),
        format=fmt,
        pir_api=doc.get("pir_api"),
        passed=bool(cases) and all(c.passed for c in cases),
        limited=not doc.get("references"),
        rtol=doc["rtol"],
        atol=doc["atol"],
        batches=tuple(doc["batches"]),
        inputs=tuple(doc.get("inputs") or ()),
        cases=cases,
        created=now_iso(),
        duration_s=round(seconds, 3),
        flags=flags,
        onnx=onnx,
    )


def save(record: CheckResult, folder: Path) -> None:
    """Write ``check.json`` (the record) and ``check.junit.xml`` into ``folder``."""
    files.write_text(folder / CHECK_JSON,
                     json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    files.write_text(folder / CHECK_JUNIT, record.junit())


def check_stored(
    settings: Any, store: Any, name: str, version: str | None, *, image: str, **options: Any
) -> CheckResult:
    """Check ``<name>/<version>`` of ``store`` (default: its highest complete version): download
    it (sha256 and signature verified), check it (:func:`check_folder`), store ``check.json``
    and ``check.junit.xml`` next to its ``manifest.json``. With ``onnx=True`` and a converted
    model, ``<prefix>.onnx`` is stored beside the Paddle files, ``model.sig`` is signed again over
    them all, and the manifest, rewritten last, lists it (``files`` and ``onnx``: opset,
    paddle2onnx, parity).

    Raises:
        as :func:`check_folder`; ConfigError: no version given and the highest complete ones
            differ only in build metadata (:func:`~paddlecd.artifacts.manifest.highest`);
            StorageError: no such model, or the store failed.
    """
    import shutil
    import tempfile

    from paddlecd.artifacts import signature as sig
    from paddlecd.artifacts import transfer as arts
    from paddlecd.signing import keys

    version = version or _latest(arts.list_model(store, name), store.url, name)
    tmp = Path(tempfile.mkdtemp(prefix="paddlecd-check-"))
    try:
        arts.download(store, name, version, tmp / "model", trusted=keys.trusted(settings))
        record = check_folder(
            settings, tmp / "model", image=image, name=f"{name} {version}", **options
        )
        prefix = f"{name}/{version}/"
        checked = (tmp / "model" / am.MANIFEST).read_bytes()
        if store.get_bytes(prefix + am.MANIFEST) != checked:  # a trial: an --overwrite during
            # the check, and its record said "passed" about a model that does not load
            from paddlecd.errors import StorageError

            raise StorageError(f"{store.url}/{prefix}{am.MANIFEST} changed during the check "
                               "(uploaded again meanwhile): its result is not stored",
                               f"check it again: invoke artifacts.check {name}/{version} …")
        if record.onnx is not None:
            store.put_file(tmp / "model" / record.onnx.path, prefix + record.onnx.path)
        for f in (CHECK_JSON, CHECK_JUNIT):
            body = (tmp / "model" / f).read_bytes()
            store.put_bytes(body, prefix + f)
            if store.get_bytes(prefix + f) != body:  # a trial: answered 200, kept nothing
                from paddlecd.errors import StorageError

                raise StorageError(f"{store.url}/{prefix}{f}: the store took the check's record "
                                   "but does not serve it", "check the store (and any proxy in "
                                   f"front of it), then check again: invoke artifacts.check "
                                   f"{name}/{version} …")
        if record.onnx is not None:  # last: a reader that finds the entry finds the file
            doc = json.loads((tmp / "model" / am.MANIFEST).read_text())
            doc = am.with_onnx(doc, record.onnx.to_json(), where=f"{store.url}/{prefix}")
            # the signature names every file of the manifest: signed again with the .onnx, and
            # stored before the manifest that lists it
            signed = sig.sign(sig.signer_for(settings), tmp / "model",
                              [f["path"] for f in doc["files"]], name=name, manifest=doc)
            store.put_bytes(signed.data, prefix + sig.SIGNATURE)
            store.put_bytes(am.manifest_bytes(doc), prefix + am.MANIFEST)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def _latest(versions: list[dict[str, Any]], url: str, name: str) -> str:
    complete = [v["version"] for v in versions if v["complete"]]
    if not complete:
        from paddlecd.errors import StorageError

        raise StorageError(f"{url}/{name} has no complete version", "upload one first")
    return am.highest(complete, where=f"{url}/{name}")


def load(raw: bytes, *, where: str) -> CheckResult:
    """A stored ``check.json``.

    Raises:
        ConfigError: not JSON or not a check record (naming ``where``).
    """
    doc = am.read_check_record(raw, where=where)
    try:
        return CheckResult.from_json(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"{where}: not a check record ({str(e)[:200]})",
                          "re-run artifacts.check") from e
