"""Model artifact tasks: upload, download, list (``invoke artifacts.*``; ``upload`` is also a
short verb)."""

from __future__ import annotations

from pathlib import Path

from paddlecd import files
from paddlecd.cli import common, view
from paddlecd.cli.common import bytes_bar, guarded, out, result, say, settings, task, warn
from paddlecd.errors import ConfigError, StorageError

STORE_HELP = (
    "store URL: s3://BUCKET[/prefix] or file:///path "
    "(default: storage.url, else file://<state>/artifacts)"
)


@task(
    positional=[],
    help={
        "model_dir": "folder given to paddle.jit.save "
        "(holds <prefix>.json|.pdmodel + <prefix>.pdiparams)",
        "name": "model name: lowercase letters, digits, '-' (a DNS label), e.g. ocr-det",
        "version": "model version, semver: 1.4.0, 2.0.0-rc.1",
        "to": STORE_HELP,
        "image": "repo@sha256:... of the image that produced the model (recorded in the manifest)",
        "metrics": 'JSON file of metric name -> number, e.g. {"hmean": 0.83} '
        "(recorded in the manifest)",
        "paddle_version": "Paddle version that exported the model "
        "(default: the --image's io.paddlecd.paddle.version label; never this host's)",
        "overwrite": "replace a DIFFERENT model already stored under this name and version",
        "dry_run": "print the plan, write nothing",
        "json": "print the uploaded version (URL, manifest digest, files, action) as one JSON "
        "document on stdout",
        "onnx": "first convert the export to ONNX in --image (paddle2onnx) and check it with "
        "ONNX Runtime (artifacts.check --onnx); <prefix>.onnx is uploaded beside it",
        "verbose": common.VERBOSE_HELP,
    },
)
@guarded
def upload(c, model_dir=None, name=None, version=None, to=None, image=None, metrics=None,
           paddle_version=None, overwrite=False, dry_run=False, json=False, onnx=False,
           verbose=False):
    """Upload a paddle.jit.save export to <store>/<name>/<version>/ with a sha256 manifest.

    The folder must be one complete export (Paddle 3.x <prefix>.json or 2.x <prefix>.pdmodel,
    plus <prefix>.pdiparams and any <prefix>.pdiparams.info). manifest.json is written LAST: a
    reader that finds it finds a complete model. Re-uploading the same files moves no bytes; a
    different model under an existing version is refused unless --overwrite. Leftovers of an
    interrupted upload are deleted by the next one. S3 endpoint, region, addressing and multipart
    knobs: the storage.* settings (PADDLECD_STORAGE_ENDPOINT_URL, ...); credentials: the standard
    AWS chain. --json prints url, action (create/overwrite/sign/repair/unchanged), files, bytes
    and the manifest's sha256 digest (paddlecd.artifacts.transfer.Uploaded). A <prefix>.onnx in the
    folder (from artifacts.check --onnx, or --onnx here) is uploaded and listed in the manifest
    with its opset, paddle2onnx version and ONNX Runtime parity, from the folder's check.json;
    one without that record, or whose parity failed, is refused. The export is signed with
    OpenSSF Model Signing into model.sig, stored before manifest.json (key: artifacts.signing_key,
    else verify's signing key); `model_signing verify key` checks a downloaded copy.

    Example:
      invoke upload --model-dir out/model --name ocr-det --version 1.4.0 --to s3://models/paddle
    """
    from paddlecd.artifacts import model_upload
    from paddlecd.artifacts import transfer as arts

    missing = [f"--{flag}" for flag, value in
               (("model-dir", model_dir), ("name", name), ("version", version)) if not value]
    if missing:
        raise ConfigError(f"upload needs {' '.join(missing)}", "see: invoke --help upload")
    cfg = settings()
    convert = lambda: _convert_for_upload(cfg, Path(model_dir), image, dry_run=dry_run)  # noqa: E731
    planned = model_upload.plan_model_upload(
        cfg, Path(model_dir), name=name, version=version, to=to, image=image,
        metrics=Path(metrics) if metrics else None, paddle_version=paddle_version,
        overwrite=overwrite, prepare=convert if onnx else None)
    store, plan, lines = planned.store, planned.plan, planned.lines()
    for note in planned.notes:  # said on every output too (a trial: only in the collapsed plan)
        if note.strip().startswith("warning: "):
            common.warn(note.strip().removeprefix("warning: "),
                        "drop --paddle-version to record the image's own label")
    if plan.export.extra:  # said on every output, not only in the plan's log
        n = len(plan.export.extra)
        common.warn(f"{plan.export.folder}: {n} {'entry' if n == 1 else 'entries'} not part of the "
                    f"jit.save export {'is' if n == 1 else 'are'} not uploaded: "
                    f"{_listed(plan.export.extra)}",
                    "only the export's files are stored (see the plan's skip lines); move the "
                    "others out of --model-dir, or store them under another --name")
    if dry_run:
        _say_dry_run(lines, store)
        return common.json_result(arts.uploaded(store, plan, executed=False)) if json else None
    with view.stage("upload", f"{name}/{version}", state=cfg.state, verbose=verbose) as st:
        for line in lines:  # the plan: in the log, under the spinner, printed in CI
            st.line(line)
        st.bytes_total(plan.bytes_to_move)
        model_upload.upload_model(planned, progress=st.advance)
        st.done(f"{plan.action}, {view.human_bytes(plan.bytes_to_move)} moved")
    if json:
        return common.json_result(arts.uploaded(store, plan, executed=True))
    done = "unchanged" if plan.action == "unchanged" else "uploaded"
    result(f"{done}: {plan.url} ({plan.bytes_to_move} bytes moved)")


def _say_dry_run(lines: list[str], store) -> None:
    """An upload's plan, and the store's quirks (probed without writing: storage/quirks.py)."""
    for line in lines:
        say(line)
    for quirk in store.quirks():
        say(f"  store {quirk.detail}" + (f"\n  hint: {quirk.hint}" if quirk.hint else ""))
    say("dry run: nothing written")


def _listed(names: tuple[str, ...], most: int = 5) -> str:
    """The first ``most`` names, and how many more."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most
                                      else "")


def _convert_for_upload(cfg, model_dir: Path, image: str | None, *, dry_run: bool) -> None:
    """upload --onnx: the ONNX output made and checked in --image before anything is planned."""
    from paddlecd.artifacts import check as model_check

    if not image:
        raise ConfigError(
            "upload --onnx needs --image (the image paddle2onnx runs in)",
            "pass --image repo@sha256:... of the image that produced the model",
        )
    if dry_run:
        say(f"dry run: would convert {model_dir} to ONNX in {image} and check it (not run)")
        return
    record = model_check.check_folder(cfg, model_dir, image=image, onnx=True,
                                      on_line=lambda line: say(f"  | {line}"))
    error = record.error(onnx_only=True)
    if error:
        raise error
    say(f"onnx: {record.onnx.path} opset {record.onnx.opset}, parity {record.onnx.parity}")


@task(
    help={
        "url": "<store-url>/<name>/<version> (or <name>@<version>), or <name>/<version> on the "
               "configured store",
        "dest": "folder to create (must be absent or empty)",
    }
)
@guarded
def download(c, url, dest):
    """Download a model and verify its signature and every file's sha256 against its manifest.

    model.sig (OpenSSF Model Signing) must verify with a key of release.trusted_keys and sign
    exactly the manifest's files; a model that fails is refused by name (exit 6). Files land in a
    temporary folder next to DEST, renamed to DEST only when all checks pass.

    Example: invoke artifacts.download s3://models/paddle/ocr-det/1.4.0 ./ocr-det
    """
    from paddlecd.artifacts import transfer as arts
    from paddlecd.signing import keys

    cfg = settings()
    # name/version or name@version, as artifacts.show and check take (a trial: the @ form of a
    # file:// URL was "store URL 'file:///tmp' is a top-level folder")
    base, parts = _model_and_version(url, cfg)
    if len(parts) != 2:
        raise ConfigError(f"'{url[:200]}' names no version",
                          "e.g. invoke artifacts.download s3://models/paddle/ocr-det/1.4.0 "
                          "./ocr-det (or ocr-det@1.4.0)")
    name, version = parts
    files.refuse_output_place(dest, "--dest", folder=True)  # /proc, /etc: named, not its temp
    trusted = keys.trusted(cfg)
    bar, tid = bytes_bar()
    with bar:
        doc = arts.download(
            arts.store_for(cfg, base),
            name,
            version,
            Path(dest),
            progress=lambda n: bar.advance(tid, n),
            on_size=lambda t: bar.update(tid, total=t),
            trusted=trusted,
        )
    result(f"downloaded {name} {version} to {dest}: {len(doc['files'])} files, sha256 and "
           "signature verified")


@task(
    auto_shortflags=False,  # invoke derives '-' for --onnx-rtol (its letters are taken)
    help={
        "model": "export folder, or <name>[/<version>] on the store (default: highest version)",
        "image": "runtime image: a release (1.4.0-cpu) or repo@sha256:...",
        "store": STORE_HELP,
        "batch": "second batch size fed after batch 1 (default 3)",
        "rtol": "relative tolerance against the reference outputs (default 1e-5)",
        "atol": "absolute tolerance against the reference outputs (default 1e-6)",
        "no_pir": "run with FLAGS_enable_pir_api=0 (Paddle 2.x programs in a 3.x runtime)",
        "json": common.JSON_HELP,
        "onnx": "also convert to <prefix>.onnx with paddle2onnx 2.1.0 in IMAGE and check it with "
        "ONNX Runtime against the same references (stored beside the model, in the manifest)",
        "onnx_opset": "ONNX opset asked of paddle2onnx, 7..19 (default 13; it may raise it)",
        "onnx_rtol": "relative tolerance of the ONNX Runtime parity (default 1e-4)",
        "onnx_atol": "absolute tolerance of the ONNX Runtime parity (default 1e-5)",
    }
)
@guarded
def check(
    c,
    model,
    image=None,
    store=None,
    batch=None,  # numbers arrive as strings and are read by common.number (named errors)
    rtol=None,
    atol=None,
    no_pir=False,
    json=False,
    onnx=False,
    onnx_opset=None,
    onnx_rtol=None,
    onnx_atol=None,
):
    """Load a model inside its runtime image and compare it with its reference outputs.

    Runs smoke/workers/check_export.py in IMAGE: paddle.inference and paddle.jit.load at batch 1
    and --batch, outputs compared with reference_outputs.npz (numpy.allclose, --rtol/--atol).
    Without references only loading and output shapes are checked, and the result says so. The
    record (check.json + check.junit.xml) is stored next to manifest.json; artifacts.list shows
    it. Exit 6 with the cause and its fix when the model does not load or run there.
    --onnx converts it in IMAGE with the pinned paddle2onnx (installed into the check container
    from a wheel cache in the state folder) and runs the .onnx with ONNX Runtime on this host
    at the same batch sizes (--onnx-rtol/--onnx-atol); paddle2onnx 2.1.0 takes PIR .json and
    legacy .pdmodel exports, in a Paddle 3.x image only.

    Example: invoke artifacts.check linear-demo/1.4.0 --image 1.4.0-cpu
    """
    from paddlecd.artifacts import check as model_check
    from paddlecd.artifacts import transfer as arts

    cfg = settings()
    options = _check_options(image=image, batch=batch, rtol=rtol, atol=atol, no_pir=no_pir,
                             onnx=onnx, onnx_opset=onnx_opset, onnx_rtol=onnx_rtol,
                             onnx_atol=onnx_atol)
    local = Path(model).exists() or Path(f"{model}.pdiparams").is_file()  # a folder or a prefix
    if not local and model.startswith(("/", "./", "../", "~")):  # a path, never a store's model
        raise ConfigError(f"model folder {model[:200]} does not exist",  # (a trial: "does not
                          "pass the folder (or the prefix) given to paddle.jit.save, or a "  # end
                          "stored model as <name>/<version>")  # in <name>")
    if local:
        if store:  # a trial: dropped without a word
            raise ConfigError(f"--store {store[:80]}: {model} is a folder on this machine, not a "
                              "model of a store", "drop --store, or name the stored model: "
                              "<name>/<version> --store URL")
        record = model_check.check_folder(cfg, Path(model), **options)
    else:
        if store and "://" in model:  # a trial: the store inside --model was dropped unsaid
            raise ConfigError(f"--store {store[:80]} and --model {model[:200]} each name a store",
                              "give the model as <name>/<version> with --store, or its whole "
                              "URL without --store")
        base, parts = _model_and_version(model, cfg)
        record = model_check.check_stored(
            cfg,
            arts.store_for(cfg, store or base),
            parts[0],
            parts[1] if len(parts) > 1 else None,
            **options,
        )
    if json:
        common.json_result(record.to_json())
    else:
        for case in record.cases:
            say(f"  {'ok  ' if case.passed else 'FAIL'} {case.name}: {case.message[:120]}")
    if record.limited and (rtol is not None or atol is not None):  # a trial: named as applied
        warn(f"--rtol/--atol: {record.model} has no reference outputs, so nothing was compared "
             "within them", "export reference_outputs.npz beside the model to compare outputs")
    error = record.error()
    if error:
        raise error
    if not json:
        result(_check_line(record))


def _check_options(*, image, batch, rtol, atol, no_pir, onnx, onnx_opset, onnx_rtol,
                   onnx_atol) -> dict:
    """The keyword arguments of check_folder/check_stored from the task's flags, each number
    read by common.number (named errors).

    Raises:
        ConfigError: a number out of its range, or an ``--onnx-*`` flag without ``--onnx``.
    """
    number = common.number
    options = {
        "image": image,
        # a batch of the model's own inputs: 4096 keeps a check of a small model in memory
        "batch": number("batch", batch, 3, whole=True, least=2, most=4096),
        "rtol": number("rtol", rtol, 1e-5, least=0),
        "atol": number("atol", atol, 1e-6, least=0),
        "no_pir": no_pir,
        "on_line": lambda line: say(f"  | {line}"),
        "onnx": onnx,
        # paddle2onnx 2.1.0's range (artifacts/onnx.py)
        "opset": number("onnx-opset", onnx_opset, 13, whole=True, least=7, most=19),
        "onnx_rtol": number("onnx-rtol", onnx_rtol, 1e-4, least=0),
        "onnx_atol": number("onnx-atol", onnx_atol, 1e-5, least=0),
    }
    onnx_flags = {"onnx-opset": onnx_opset, "onnx-rtol": onnx_rtol, "onnx-atol": onnx_atol}
    stray = next((f for f, v in onnx_flags.items() if v is not None), None)
    if stray and not onnx:  # taken and dropped otherwise: the check would say nothing of them
        raise ConfigError(f"--{stray} is for --onnx", f"add --onnx, or drop --{stray}")
    return options


def _check_line(record) -> str:
    """The one summary line of a passed check (Paddle and ONNX parity tolerances; none when no
    output was compared)."""
    within = "" if record.limited else f", rtol {record.rtol:g}, atol {record.atol:g}"
    return (
        f"{record.status}: {record.model} in {record.image} "
        f"(Paddle {record.paddle_version}{within})"
        + (f"; onnx {record.onnx.path} opset {record.onnx.opset}, parity "
           f"{record.onnx.parity} (rtol {record.onnx.rtol:g}, atol {record.onnx.atol:g})"
           if record.onnx else "")
    )


def _model_and_version(model: str, cfg) -> tuple[str, list[str]]:
    """``[<store>/]<name>/<version>``, or artifacts.show's ``<name>@<version>`` (a trial: each
    task refused the other's form with a hint about name characters)."""
    from paddlecd.artifacts import transfer as arts

    head, at, tail = model.rpartition("@")
    if at and "/" not in tail:
        model = f"{head}/{tail}"
    if _names_a_version(model):  # …/<name>/<version>; else …/<name> (its newest version)
        try:
            return arts.split_model_url(model, cfg, parts=2)
        except ConfigError:
            pass
    return arts.split_model_url(model, cfg, parts=1)


def _names_a_version(where: str) -> bool:
    """Whether ``…/<name>/<last>`` ends in a version (``linear/1.0.0-rc1``), not a name."""
    from paddlecd.artifacts import manifest as am

    head, slash, last = where.rstrip("/").rpartition("/")
    if not slash or not head or head.endswith(":/"):
        return False
    try:
        am.check_version(last)
    except ConfigError:
        return False
    return True


@task(
    name="list",
    help={"url": "<store-url>/<name>, or <name> on the configured store", "json": common.JSON_HELP},
)
@guarded
def list_(c, url, json=False):
    """List a model's versions (semver order) with their manifests' summary.

    A version without manifest.json is an interrupted upload, shown as 'incomplete'. One whose
    manifest.json is not JSON or not a manifest is shown as 'damaged', and the listing then
    exits 8 naming it (after the list).

    Example: invoke artifacts.list s3://models/paddle/ocr-det
    """
    from paddlecd.artifacts import transfer as arts

    cfg = settings()
    base, (name,) = arts.split_model_url(url, cfg, parts=1)
    versions = arts.list_model(arts.store_for(cfg, base), name)
    if json:
        common.json_result({"store": base, "name": name, "versions": versions})
    else:
        _table(base, name, versions)
    damaged = [v for v in versions if v["damaged"]]
    if damaged:
        first = damaged[0]
        raise StorageError(
            f"{base}/{name}: the manifest.json of {', '.join(v['version'] for v in damaged)} "
            f"is damaged ({first['version']}: {first['problem']})",
            f"invoke artifacts.show {base}/{name}@{first['version']} names the problem; upload "
            "that version again with --overwrite",
        )


def _table(base: str, name: str, versions: list[dict]) -> None:
    rows = [_row(v) for v in versions]
    header = ("version", "created", "files", "bytes", "image digest", "metrics", "check")
    if not out.is_terminal:  # pipes and CI logs: whole values, tab-separated, nothing cut
        result(f"# {base}/{name}\n" + "\t".join(header))
        for row in rows:
            result("\t".join(row))
        return
    from rich.table import Table

    table = Table(*header, title=f"{base}/{name}")
    for row in rows:
        table.add_row(*row[:4], row[4][:19], *row[5:])
    out.print(table)


def _row(v: dict) -> tuple[str, ...]:
    if not v["complete"]:
        return (v["version"], "damaged" if v["damaged"] else "incomplete", "", "", "", "", "")
    metrics = ", ".join(f"{k}={x:g}" for k, x in (v["metrics"] or {}).items())
    check = v.get("check") or {}
    return (
        v["version"],
        v["created"],
        str(v["files"]),
        str(v["bytes"]),
        v["image_digest"] or "-",
        metrics or "-",
        check.get("status") or "-",
    )


@task(
    help={
        "model": "[<store-url>/]<name>[@<version>] (default: the highest complete version)",
        "json": common.JSON_HELP,
    }
)
@guarded
def show(c, model, json=False):
    """Show one stored model version: its manifest and its check.

    Files (size, sha256), format and model prefix, the Paddle version and where it came from
    (the image's label or a flag), the InputSpec, the producing image, the ONNX output (opset,
    paddle2onnx, ONNX Runtime parity), the stored artifacts.check result and the signature
    (model.sig, checked against release.trusted_keys and the manifest; a failing one is refused,
    exit 6). --json prints {"url", "name", "version", "manifest", "check", "signature"}.

    Example: invoke artifacts.show linear-demo@1.4.0
    """
    from paddlecd.artifacts import show as shown
    from paddlecd.artifacts import transfer as arts
    from paddlecd.signing import keys

    cfg = settings()
    where, version = shown.split_version(model)
    if version is None and _names_a_version(where):  # artifacts.check's <name>/<version> too
        where, version = where.rpartition("/")[0], where.rpartition("/")[2]
    base, (name,) = arts.split_model_url(where, cfg, parts=1)
    record = shown.show(arts.store_for(cfg, base), name, version, trusted=keys.trusted(cfg))
    if json:
        return common.json_result(record.to_json())
    result("\n".join(record.lines()))
