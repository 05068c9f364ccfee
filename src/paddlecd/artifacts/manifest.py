"""What an artifact is: a ``paddle.jit.save`` export, its names, and its manifest.

A jit.save export is ``<prefix>.pdiparams`` next to the program: ``<prefix>.json`` (Paddle 3.x, PIR)
or ``<prefix>.pdmodel`` (Paddle 2.x), plus an optional ``<prefix>.pdiparams.info``
(https://www.paddlepaddle.org.cn/documentation/docs/en/api/paddle/jit/save_en.html). The manifest
(``manifest.json``, schema ``schemas/artifact-manifest.schema.json``) lists each file's path, size
and sha256 with the producing image digest, Paddle version, git revision, metrics and creation time.
The Paddle version is the producing image's (its label) or given, never the uploading
host's; ``input_spec`` is read from the program itself (:mod:`.program`); the reference inputs and
outputs recorded at export time (:data:`REFERENCE_FILES`) travel with the export.
No I/O to stores here: :mod:`paddlecd.artifacts.transfer` moves the bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import semver

from paddlecd import __version__, files, git
from paddlecd import schema as validation
from paddlecd.errors import ConfigError, PaddlecdError, quoted
from paddlecd.files import kind_of
from paddlecd.types import JsonSchema, ModelManifest

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1
PROGRAM_SUFFIXES = {".json": "paddle-pir-json", ".pdmodel": "paddle-program"}
# Recorded next to the export by the training script (examples/train_linear.py): input name →
# array, and output_<i> → array in fetch order; ``artifacts.check`` compares against them.
REFERENCE_INPUTS, REFERENCE_OUTPUTS = "reference_inputs.npz", "reference_outputs.npz"
REFERENCE_FILES = (REFERENCE_INPUTS, REFERENCE_OUTPUTS)
# Written next to manifest.json by artifacts.check (paddlecd.artifacts.check); not in the manifest.
CHECK_JSON, CHECK_JUNIT = "check.json", "check.junit.xml"
CHECK_FILES = (CHECK_JSON, CHECK_JUNIT)
# RFC 1123 DNS label: the name is a key segment and often a Kubernetes/registry name, too.
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")  # \Z: "$" takes a final "\n"
DIGEST_REF_RE = re.compile(r"^(?P<repo>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})\Z")


@dataclass(frozen=True)
class Export:
    """A detected jit.save export: ``folder``, file ``prefix``, ``format`` and ``files`` (names);
    ``extra``: the folder's other files and its sub-folders (``name/``), which no upload stores
    (named in its plan)."""

    folder: Path
    prefix: str
    format: str
    files: tuple[str, ...]
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileEntry:
    """One manifest entry: ``path`` (file name), ``size`` in bytes, hex ``sha256``."""

    path: str
    size: int
    sha256: str


def check_name(name: str) -> str:
    """Return ``name`` if it is a lowercase DNS label (RFC 1123), else raise ConfigError."""
    if not NAME_RE.match(name or ""):
        raise ConfigError(
            f"invalid model name {quoted(name)}",
            "use lowercase letters, digits and '-' (at most 63, e.g. ocr-det)",
        )
    return name


# The longest model version: a folder name of the store and part of a log file's name, both
# within Linux's 255-byte NAME_MAX beside a 63-character model name (a trial: a 306-character
# version passed --dry-run, then failed on "File name too long" for the upload's log); the
# distribution spec's tag length, which a release version meets too.
MAX_VERSION = 128


def check_version(version: str) -> str:
    """``version`` if it is Semantic Versioning 2.0.0 (parsed by ``semver``) of at most
    :data:`MAX_VERSION` characters, else ConfigError. ``semver``'s pattern ends in ``$``, which
    takes a final newline: white space is refused."""
    if len(version or "") > MAX_VERSION:
        raise ConfigError(
            f"invalid model version {quoted(version, 40)}: at most "
            f"{MAX_VERSION}", "use a shorter pre-release or build part, e.g. 1.4.0-rc.1")
    try:
        if any(ch.isspace() for ch in version or ""):
            raise ValueError("white space")
        semver.Version.parse(version or "")
    except ValueError as e:
        raise ConfigError(
            f"invalid model version {quoted(version)}: not semver",
            "use MAJOR.MINOR.PATCH[-prerelease][+build], e.g. 1.4.0",
        ) from e
    return version


def version_order(version: str) -> tuple[Any, ...]:
    """A sort key for model versions (checked by :func:`check_version`): Semantic Versioning
    2.0.0 precedence (§11), then, as a tie-break of paddlecd's own, the build metadata, whose
    identifiers are compared as §11.4 compares pre-release ones (numeric ones numerically and
    below alphanumeric ones; a version without build metadata first). §10 says build metadata is
    ignored in precedence, so 1.0.0, 1.0.0+b1 and 1.0.0+b2 are of equal precedence: without the
    tie-break their order, and so the "highest" version, came out of a set's order (trial 18).
    A text that is no version sorts after every version, by its text.
    """
    try:
        parsed = semver.Version.parse(version)
    except ValueError:
        return (1, version)
    build = tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                  for p in (parsed.build or "").split(".") if p)
    return (0, parsed, build)


def highest(versions: list[str], *, where: str) -> str:
    """The highest of ``versions`` (complete model versions of ``where``, any order) by Semantic
    Versioning precedence.

    Raises:
        ConfigError: two or more versions share the highest precedence, differing only in build
            metadata (SemVer 2.0.0 §10): which is "highest" is no rule's answer, so none is
            picked; the message names them and the hint how to name one.
    """
    top = max(versions, key=version_order)
    ties = sorted((v for v in versions
                   if semver.Version.parse(v).compare(top) == 0), key=version_order)
    if len(ties) > 1:
        shown = ", ".join(ties[:3]) + (f" and {len(ties) - 3} more" if len(ties) > 3 else "")
        raise ConfigError(
            f"{where}: no single highest version: {shown} differ only in build metadata, "
            "which Semantic Versioning leaves out of precedence",
            f"name one: {where.rsplit('/', 1)[-1]}@{ties[-1]}")
    return top


# A Paddle release as its wheels name it (PEP 440 as Paddle uses it): 3.0.0, 2.6.1.post117,
# 3.0.0rc1, 3.1.0.dev20250101, 3.0.0+cu126.
PADDLE_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+){1,3}([.+-]?[A-Za-z0-9]+){0,4}\Z")


def check_paddle_version(version: str | None, *, flag: str = "--paddle-version") -> str | None:
    """``version`` if it reads as a Paddle release (:data:`PADDLE_VERSION_RE`); None stays None.

    Raises:
        ConfigError: naming ``flag`` and the value (:func:`paddlecd.errors.quoted`).
    """
    if version is not None and not PADDLE_VERSION_RE.match(version):
        raise ConfigError(
            f"{flag} {quoted(version)} is not a Paddle version",
            "give the version paddle.__version__ prints, e.g. 3.0.0 or 2.6.1.post117",
        )
    return version


def find_export(model_dir: Path) -> Export:
    """Detect the single jit.save export in ``model_dir``.

    Raises:
        ConfigError: the folder is missing or a file, holds no export, holds an incomplete one
            (the error names the missing file), or holds several.
    """
    # a prefix names its folder by any of its files (a trial: with .pdiparams gone, the prefix
    # was "model folder … does not exist", its folder and model.json being there)
    if not model_dir.is_dir() and any(Path(f"{model_dir}{s}").is_file()
                                      for s in (".pdiparams", *PROGRAM_SUFFIXES)):
        model_dir = (
            model_dir.parent
        )  # a jit.save prefix (what deploy prints as `model:`): use its folder
    if model_dir.exists() and not model_dir.is_dir():  # a trial: model.json "does not exist"
        stem = model_dir.with_suffix("") if model_dir.suffix else model_dir
        raise ConfigError(
            f"model folder {model_dir} is a file, not a folder",
            f"pass its folder {model_dir.parent} (or the prefix {stem} given to paddle.jit.save)",
        )
    if not model_dir.is_dir():
        raise ConfigError(
            f"model folder {model_dir} does not exist",
            "pass the folder (or the prefix) given to paddle.jit.save",
        )
    # a dangling link is listed too, so it is named as a link (check_links), not as "missing"
    names = {p.name for p in model_dir.iterdir() if p.is_file() or p.is_symlink()}
    for p in model_dir.iterdir():
        # a FIFO, a socket, a device: never an export's file, nor one to leave out unsaid (a
        # trial: a FIFO model.pdiparams.info or reference_outputs.npz was silently not stored);
        # a folder is an export's file only by its name (sub-folders are warned as extras)
        if p.name not in names and (not p.is_dir() or p.suffix in (
                ".pdiparams", ".pdmodel", ".json", ".onnx", ".info", ".npz")):
            raise ConfigError(
                f"{p} is not a regular file ({kind_of(p)})",
                "give the folder paddle.jit.save wrote, with its files as files",
            )
    params = sorted(
        n[: -len(".pdiparams")] for n in names if n.endswith(".pdiparams") and n != ".pdiparams"
    )
    if len(params) > 1:
        raise ConfigError(
            f"{model_dir} holds several exports: {', '.join(params)}",
            "give a folder holding one jit.save export",
        )
    if params:
        return _export(model_dir, params[0], names)
    programs = sorted(n for n in names if n.endswith(".pdmodel")) or sorted(
        n for n in names if n.endswith(".json")
    )
    if len(programs) == 1:
        return _export(
            model_dir, programs[0].rsplit(".", 1)[0], names
        )  # names the missing .pdiparams
    raise ConfigError(
        f"{model_dir} is not a paddle.jit.save export: no <prefix>.pdiparams file",
        "run paddle.jit.save(layer, 'DIR/inference', input_spec=[...]) and pass DIR",
    )


def _export(folder: Path, prefix: str, names: set[str]) -> Export:
    programs = [s for s in PROGRAM_SUFFIXES if prefix + s in names]
    missing = (
        [] if programs else [f"{prefix}.json (Paddle 3.x) or {prefix}.pdmodel (Paddle 2.x)"]
    ) + ([] if prefix + ".pdiparams" in names else [f"{prefix}.pdiparams"])
    if missing:
        raise ConfigError(
            f"{folder} is an incomplete jit.save export: missing {' and '.join(missing)}",
            "re-run paddle.jit.save into an empty folder",
        )
    if len(programs) > 1:  # a trial: both were stored, the .pdmodel never checked
        raise ConfigError(
            f"{folder} holds both {prefix}.json (Paddle 3.x) and {prefix}.pdmodel (Paddle 2.x): "
            "one jit.save writes one of them",
            "re-run paddle.jit.save into an empty folder, or remove the program that is not "
            "this export's",
        )
    files = [prefix + s for s in programs] + [prefix + ".pdiparams"]
    files += [prefix + ".pdiparams.info"] if prefix + ".pdiparams.info" in names else []
    files += [n for n in REFERENCE_FILES if n in names]
    files += [prefix + ".onnx"] if prefix + ".onnx" in names else []  # artifacts.check --onnx
    # what download writes beside the files (manifest, signature) and check's records are known
    known = {*files, MANIFEST, "model.sig", *CHECK_FILES}
    # folders too (a trial: files and links beside the export were named, a sub-folder was not)
    folders = {f"{p.name}/" for p in folder.iterdir() if p.is_dir() and not p.is_symlink()}
    export = Export(
        folder=folder, prefix=prefix, format=PROGRAM_SUFFIXES[programs[0]], files=tuple(files),
        extra=tuple(sorted((names - known) | folders)),
    )
    check_links(export)
    for name in (prefix + ".pdiparams", *(prefix + s for s in programs)):
        if (folder / name).stat().st_size == 0:  # a trial: an empty one was stored and signed
            raise ConfigError(
                f"{folder / name} is empty (0 bytes): not what paddle.jit.save writes (it writes "
                "no .pdiparams at all for a model without parameters)",
                "re-run paddle.jit.save into an empty folder")
    return export


def check_links(export: Export) -> None:
    """Refuse an export whose files are symlinks that leave its folder, or lead nowhere.

    A link inside the folder (``model.pdiparams -> weights/v3.pdiparams``) is read as its target;
    a link out of it (``model.pdiparams -> /etc/shadow``) would upload, check or mount a file the
    user never meant to publish, so upload, check and download callers run this before they read.

    Raises:
        ConfigError: naming the link and its target.
    """
    root = export.folder.resolve()
    for name in (*export.files, *(n for n in CHECK_FILES if (export.folder / n).is_symlink())):
        path = export.folder / name
        if not path.is_symlink():
            continue
        target = path.resolve()
        if not target.is_relative_to(root):
            raise ConfigError(
                f"{path} is a symlink to {target}, outside the export folder {export.folder}",
                "copy the file into the folder: paddlecd never follows a link out of an export",
            )
        if not target.is_file():
            raise ConfigError(
                f"{path} is a symlink to {target}, which is not a file",
                "re-run paddle.jit.save, or point the link at the export's file",
            )


def hash_file(path: Path, *, chunk: int = 1 << 20) -> FileEntry:
    """Size (bytes) and sha256 of ``path``, read in ``chunk``-byte blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return FileEntry(path.name, path.stat().st_size, digest.hexdigest())


def parse_image(reference: str | None) -> dict[str, str] | None:
    """``repo@sha256:…`` → ``{"reference", "digest"}``; None stays None.

    Raises:
        ConfigError: the reference carries no digest (a tag is a pointer, not an identity), or the
            digest is a local image's ID rather than its manifest digest.
    """
    if not reference:
        return None
    from paddlecd.engine import refuse_image_id
    from paddlecd.registry.client import parse_reference

    parse_reference(reference)  # a bare sha256:… is named as a digest without its repository
    m = DIGEST_REF_RE.match(reference)
    if not m:
        raise ConfigError(
            f"image reference '{reference}' has no digest",
            "pass the repo@sha256:... reference printed by push",
        )
    refuse_image_id(parse_reference(reference))  # a local image ID is no manifest digest
    return {"reference": reference, "digest": m["digest"]}


METRICS_MAX_BYTES = 1 << 20  # a metrics file is a few names and numbers


def load_metrics(path: Path | None) -> dict[str, float] | None:
    """Read a JSON object of metric name → number from ``path`` (None → None).

    Raises:
        ConfigError: missing, not a regular file, more than :data:`METRICS_MAX_BYTES`, unreadable,
            not JSON, not an object of numbers, or a name not 1..128 printable characters.
    """
    if path is None:
        return None
    path = Path(path)
    if not path.exists() and not path.is_symlink():  # trial 18: was "not a regular file of …"
        raise ConfigError(f"metrics file {path} does not exist",
                          "check --metrics: a path from the folder you run in, or absolute")
    if not path.is_file() or path.is_symlink() and not path.resolve().is_file():
        raise ConfigError(f"metrics file {path} is {kind_of(path)}, not a regular file",
                          "give --metrics a JSON file")  # a folder, a pipe: named, never opened
    try:
        if (size := path.stat().st_size) > METRICS_MAX_BYTES:
            raise ValueError(f"{size} bytes, more than the {METRICS_MAX_BYTES} a metrics file "
                             "may hold")
        data = json.loads(path.read_bytes(), object_pairs_hook=files.unique_keys)
    except (OSError, ValueError) as e:  # trial 19: "Expecting value: line 1 column 1 (char 0)"
        why = (e.strerror or str(e)) if isinstance(e, OSError) else files.json_problem(e)
        raise ConfigError(
            f"metrics file {path}: {why}", 'write a JSON object, e.g. {"hmean": 0.83}'
        ) from e
    ok = isinstance(data, dict) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for v in data.values()
    )
    if ok and not data:  # trial 19: {} was stored as if --metrics had not been given
        raise ConfigError(f"metrics file {path} holds no metric ({{}})",
                          'give at least one, e.g. {"hmean": 0.83}, or drop --metrics')
    if not ok:  # NaN and Infinity parse in Python but are not JSON (RFC 8259 §6): the manifest
        raise ConfigError(  # would not be either
            f"metrics file {path}: expected a JSON object of finite numbers",
            'e.g. {"hmean": 0.83} (no NaN or Infinity)',
        )
    bad = next((k for k in data if not 0 < len(k) <= 128 or not k.isprintable()), None)
    if bad is not None:  # a name is a label in artifacts.list and the manifest, not a payload
        raise ConfigError(f"metrics file {path}: a metric name of {len(bad)} characters "
                          f"({bad[:40]!r}…) is not 1..128 printable characters",
                          'e.g. {"hmean": 0.83}')
    return data


def git_revision(root: Path) -> str | None:
    """``git rev-parse HEAD`` in ``root``, or None outside a git checkout (see paddlecd.git)."""
    rev = git.revision(root)
    return rev.full if rev.known else None


def build_manifest(
    export: Export,
    entries: list[FileEntry],
    *,
    name: str,
    version: str,
    image: dict[str, str] | None = None,
    paddle_version: str | None = None,
    git_revision: str | None = None,
    metrics: dict[str, float] | None = None,
    created: dt.datetime | None = None,
    paddle_version_from: str | None = None,
    input_spec: list[dict[str, Any]] | None = None,
    onnx: dict[str, Any] | None = None,
) -> ModelManifest:
    """The manifest document (validated against the schema). ``created`` defaults to now (UTC).

    ``paddle_version_from`` says where ``paddle_version`` came from: ``flag`` (given) or ``image``
    (the producing image's label); ``input_spec``: ``[{"name", "shape", "dtype"}]`` read from the
    program (None for a legacy program, whose inputs only Paddle can read); ``onnx``: the ONNX
    output's record (:func:`onnx_record`), whose file is one of ``entries``.
    """
    when = (created or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "version": version,
        "format": export.format,
        "model_prefix": export.prefix,
        "files": [{"path": e.path, "size": e.size, "sha256": e.sha256} for e in entries],
        "image": image,
        "paddle_version": paddle_version,
        "paddle_version_from": paddle_version_from if paddle_version else None,
        "input_spec": input_spec,
        "git_revision": git_revision,
        "metrics": metrics,
        "created": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tool": f"paddlecd {__version__}",
    }
    if onnx is not None:
        doc["onnx"] = onnx
    return validate_manifest(doc, where=f"manifest of {name} {version}", error=ConfigError)


@cache
def schema() -> JsonSchema:
    """The artifact manifest JSON schema (draft 2020-12), packaged with paddlecd."""
    return json.loads(
        resources.files("paddlecd").joinpath("schemas/artifact-manifest.schema.json").read_text()
    )


def validate_manifest(
    doc: Any, *, where: str, error: type[PaddlecdError] = ConfigError
) -> ModelManifest:
    """``doc`` if it matches the schema, else ``error`` naming ``where`` and the first problem."""
    problem = jsonschema.exceptions.best_match(
        validation.VALIDATOR(schema()).iter_errors(doc)
    )
    if problem is not None:
        at = "/".join(str(p) for p in problem.absolute_path) or "(top)"
        raise error(
            f"{where}: invalid manifest at {at}: {problem.message}",
            "see src/paddlecd/schemas/artifact-manifest.schema.json",
        )
    paths = [f["path"] for f in doc["files"]]
    twice = next((p for i, p in enumerate(paths) if p in paths[:i]), None)
    if twice is not None:  # a trial: download fetched the entry twice, without a word
        raise error(f"{where}: invalid manifest at files: {twice!r} is listed twice",
                    "a manifest lists each file once: re-upload the model with --overwrite")
    return doc


def with_onnx(doc: ModelManifest, onnx: dict[str, Any], *, where: str) -> ModelManifest:
    """``doc`` listing the ONNX output ``onnx`` (``OnnxOutput.to_json()``): its file in ``files``
    (replacing an older one of that name) and the record as ``onnx``; validated.

    Raises:
        ConfigError: the result does not match the schema (naming ``where``).
    """
    entry = {"path": onnx["path"], "size": onnx["size"], "sha256": onnx["sha256"]}
    files = [f for f in doc["files"] if f["path"] != onnx["path"]] + [entry]
    return validate_manifest({**doc, "files": files, "onnx": onnx}, where=where)


def onnx_record(export: Export) -> dict[str, Any] | None:
    """The ONNX output's record for an export folder that holds ``<prefix>.onnx``: the ``onnx``
    of the folder's ``check.json`` (written by ``artifacts.check --onnx``), which must name the
    file's sha256. None when the folder holds no ``.onnx``.

    Raises:
        ConfigError: a ``.onnx`` without a record of its conversion and parity, or a different
            one, or a record of the wrong shape (named as check.json's).
    """
    name = f"{export.prefix}.onnx"
    if name not in export.files:
        return None
    rerun = f"run invoke artifacts.check {export.folder} --image IMAGE --onnx, or delete {name}"
    path = export.folder / CHECK_JSON
    try:  # a trial: {"onnx": "x"} ended in AttributeError, "onnx" given twice took the last
        doc = json.loads(files.read_regular(path, "check record"),
                         object_pairs_hook=files.unique_keys)
    except FileNotFoundError:
        doc = None
    except (OSError, ValueError) as e:  # ValueError: not JSON, a key twice, not UTF-8
        raise ConfigError(f"{path}: " + (e.strerror if isinstance(e, OSError) and e.strerror
                                         else f"not a check record ({e})"), rerun) from e
    record = doc.get("onnx") if isinstance(doc, dict) else None
    if record is None:
        raise ConfigError(f"{export.folder / name} has no conversion record: check.json "
                          "lists no ONNX output", rerun)
    # the record's shape, named as check.json's (a trial: named as the manifest's, not written
    # yet): the manifest schema's own "onnx" part
    onnx_schema = validation.load_schema("artifact-manifest.schema.json")["properties"]["onnx"]
    validation.check(record, "artifact-manifest.schema.json", schema=onnx_schema,
                     source=f"{path} (its onnx record)")
    have = hash_file(export.folder / name)
    if (record["path"], record["sha256"], record["size"]) != (name, have.sha256, have.size):
        # a trial: a record whose size was not the file's was stored and signed
        raise ConfigError(f"{export.folder / name} has no conversion record: check.json names "
                          "another file (" + ("name" if record["path"] != name else "sha256"
                                             if record["sha256"] != have.sha256 else "size")
                          + " differs)", rerun)
    return record


def check_status(passed: bool, limited: bool) -> str:
    """A model check's ``status``: ``failed``, ``passed (load + shapes only)`` (no reference
    outputs) or ``passed``, as ``artifacts.list`` shows it and ``check.json`` stores it."""
    if not passed:
        return "failed"
    return "passed (load + shapes only)" if limited else "passed"


def read_check_record(raw: bytes, *, where: str) -> dict[str, Any]:
    """A stored ``check.json`` (artifacts.check's record) as a dict whose fields agree with one
    another: ``passed`` is whether every case passed, and ``status`` what
    :func:`check_status` makes of ``passed`` and ``limited``.

    Raises:
        ConfigError: not JSON, a key given twice, a field missing or of the wrong type, or
            fields that contradict each other (naming ``where``; a trial: ``{"status":
            "passed"}`` was a KeyError traceback in artifacts.show, a record whose case failed
            but whose status said passed was shown as passed, a second ``status`` taken).
    """
    def bad(why: str) -> ConfigError:
        return ConfigError(f"{where}: not a check record ({why[:200]})", "re-run artifacts.check")

    try:
        doc = json.loads(raw, object_pairs_hook=files.unique_keys)
    except ValueError as e:
        raise bad(files.json_problem(e)) from e
    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    missing = next((k for k in ("model", "image", "passed", "limited", "status", "cases",
                                "created") if k not in doc), None)
    if missing:
        raise bad(f"no {missing!r}")
    cases = doc["cases"]
    if not isinstance(cases, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str)
            and isinstance(c.get("passed"), bool) for c in cases):
        raise bad("'cases' is not a list of {name, passed}")
    if not isinstance(doc["passed"], bool) or not isinstance(doc["limited"], bool):
        raise bad("'passed' and 'limited' are not true or false")
    failed = sum(not c["passed"] for c in cases)
    passed = bool(cases) and not failed
    if doc["passed"] != passed or doc["status"] != check_status(passed, doc["limited"]):
        raise bad(f"status {str(doc['status'])[:40]!r} and passed {doc['passed']!r}, but "
                  f"{failed} of {len(cases)} cases failed")
    return doc


def entries_of(doc: ModelManifest) -> dict[str, FileEntry]:
    """The manifest's files as ``{path: FileEntry}``."""
    return {f["path"]: FileEntry(f["path"], f["size"], f["sha256"]) for f in doc["files"]}


def manifest_bytes(doc: ModelManifest) -> bytes:
    """Canonical serialisation: sorted keys, two-space indent, trailing newline."""
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
