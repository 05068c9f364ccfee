"""paddlecd tasks: thin wrappers over the paddlecd package (STYLE.md §3).

Each task parses flags, calls one package function, and turns PaddlecdError into invoke.Exit with a
stable exit code. Run `invoke --list` for the tasks, `invoke <task> --help` for one.
Set PADDLECD_DEBUG=1 to see tracebacks.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from invoke import Collection, Exit, task

sys.path.insert(0, str(Path(__file__).parent / "src"))  # works from a plain checkout, too

from rich.console import Console  # noqa: E402

from paddlecd import config  # noqa: E402
from paddlecd.errors import PaddlecdError  # noqa: E402

console = Console(stderr=False, highlight=False)
err = Console(stderr=True, highlight=False)


def guarded(fn):
    """The one catch site: PaddlecdError → 'error: cause' + 'hint: …' on stderr, exit code kept."""

    @functools.wraps(fn)
    def wrapper(c, *args, **kwargs):
        try:
            return fn(c, *args, **kwargs)
        except PaddlecdError as e:
            if os.environ.get("PADDLECD_DEBUG"):
                raise
            err.print(f"[bold red]error:[/] {e.cause}", markup=True, soft_wrap=True)
            if e.hint:
                err.print(f"[yellow]hint:[/] {e.hint}", markup=True, soft_wrap=True)
            raise Exit(code=e.exit_code) from None

    return wrapper


def settings(**flags):
    """Resolve configuration with task flags on top (``None`` flags are ignored)."""
    return config.load(flags)


def say(msg: str) -> None:
    """Progress line for the user."""
    console.print(msg, soft_wrap=True, markup=False)


# ============================================================== image: lock, bootstrap, build, push, verify
# (section owned by the main-job work)

image = Collection("image")
smoke = Collection("smoke")

# ============================================================== release (promotion)
release = Collection("release")

# ============================================================== artifacts (object storage)
artifacts = Collection("artifacts")

_STORE_HELP = "store URL: s3://BUCKET[/prefix] or file:///path (default: storage.url, else file://<state>/artifacts)"


def _bytes_bar(total: int | None = None):
    """A rich progress bar counting bytes on stderr; returns (progress, task id)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                   TransferSpeedColumn(), TimeRemainingColumn(), console=err, transient=True)
    return bar, bar.add_task("bytes", total=total)


@task(positional=[], help={
    "model_dir": "folder given to paddle.jit.save (holds <prefix>.json|.pdmodel + <prefix>.pdiparams)",
    "name": "model name: lowercase letters, digits, '-' (a DNS label), e.g. ocr-det",
    "version": "model version, semver: 1.4.0, 2.0.0-rc.1",
    "to": _STORE_HELP,
    "image": "repo@sha256:... of the image that produced the model (recorded in the manifest)",
    "metrics": 'JSON file of metric name -> number, e.g. {"hmean": 0.83} (recorded in the manifest)',
    "paddle_version": "Paddle version that exported the model (default: the installed paddlepaddle)",
    "overwrite": "replace a DIFFERENT model already stored under this name and version",
    "dry_run": "print the plan, write nothing",
})
@guarded
def artifacts_upload(c, model_dir=None, name=None, version=None, to=None, image=None, metrics=None,
                     paddle_version=None, overwrite=False, dry_run=False):
    """Upload a paddle.jit.save export to <store>/<name>/<version>/ with a sha256 manifest.

    The folder must be one complete export (Paddle 3.x <prefix>.json or 2.x <prefix>.pdmodel, plus
    <prefix>.pdiparams and any <prefix>.pdiparams.info). manifest.json is written LAST: a reader that
    finds it finds a complete model. Re-uploading the same files moves no bytes; a different model
    under an existing version is refused unless --overwrite. Leftovers of an interrupted upload are
    deleted by the next one. S3 endpoint, region, addressing and multipart knobs: the storage.*
    settings (PADDLECD_STORAGE_ENDPOINT_URL, ...); credentials: the standard AWS chain.

    Example: invoke upload --model-dir out/model --name ocr-det --version 1.4.0 --to s3://models/paddle
    """
    from paddlecd import artifact_manifest, artifacts as arts
    from paddlecd.errors import ConfigError

    missing = [f"--{k}" for k, v in (("model-dir", model_dir), ("name", name), ("version", version)) if not v]
    if missing:
        raise ConfigError(f"upload needs {' '.join(missing)}", "see: invoke --help upload")
    cfg = settings()
    store = arts.store_for(cfg, to)
    plan = arts.plan_upload(store, Path(model_dir), name=name, version=version, image=image,
                            metrics=Path(metrics) if metrics else None, paddle_version=paddle_version,
                            git_revision=artifact_manifest.git_revision(cfg.root), overwrite=overwrite)
    for line in plan.lines():
        say(line)
    if dry_run:
        say("dry run: nothing written")
        return
    bar, tid = _bytes_bar(plan.bytes_to_move)
    with bar:
        arts.upload(store, plan, progress=lambda n: bar.advance(tid, n))
    say(f"{'unchanged' if plan.action == 'unchanged' else 'uploaded'}: {plan.url} "
        f"({plan.bytes_to_move} bytes moved)")


@task(help={"url": "<store-url>/<name>/<version>, or <name>/<version> on the configured store",
            "dest": "folder to create (must be absent or empty)"})
@guarded
def artifacts_download(c, url, dest):
    """Download a model and verify every file's sha256 against its manifest.

    Files land in a temporary folder next to DEST, renamed to DEST only when all checks pass.

    Example: invoke artifacts.download s3://models/paddle/ocr-det/1.4.0 ./ocr-det
    """
    from paddlecd import artifacts as arts

    cfg = settings()
    base, (name, version) = arts.split_model_url(url, cfg, parts=2)
    bar, tid = _bytes_bar()
    with bar:
        doc = arts.download(arts.store_for(cfg, base), name, version, Path(dest),
                            progress=lambda n: bar.advance(tid, n), on_size=lambda t: bar.update(tid, total=t))
    say(f"downloaded {name} {version} to {dest}: {len(doc['files'])} files, sha256 verified")


@task(help={"url": "<store-url>/<name>, or <name> on the configured store"})
@guarded
def artifacts_list(c, url):
    """List a model's versions (semver order) with their manifests' summary.

    A version without manifest.json is an interrupted upload, shown as 'incomplete'.

    Example: invoke artifacts.list s3://models/paddle/ocr-det
    """
    from rich.table import Table

    from paddlecd import artifacts as arts

    cfg = settings()
    base, (name,) = arts.split_model_url(url, cfg, parts=1)
    table = Table("version", "created", "files", "bytes", "image digest", "metrics", title=f"{base}/{name}")
    for v in arts.list_versions(arts.store_for(cfg, base), name):
        if not v["complete"]:
            table.add_row(v["version"], "incomplete", "", "", "", "")
            continue
        metrics = ", ".join(f"{k}={x:g}" for k, x in (v["metrics"] or {}).items())
        table.add_row(v["version"], v["created"], str(v["files"]), str(v["bytes"]),
                      (v["image_digest"] or "-")[:19], metrics or "-")
    console.print(table)


artifacts.add_task(artifacts_upload, name="upload")
artifacts.add_task(artifacts_download, name="download")
artifacts.add_task(artifacts_list, name="list")

# ============================================================== cluster (training jobs)
cluster = Collection("cluster")

# ============================================================== pipeline, doctor
pipeline = Collection("pipeline")

# ============================================================== namespace
ns = Collection()
for _sub in (image, smoke, release, artifacts, cluster, pipeline):
    ns.add_collection(_sub)
ns.add_task(artifacts_upload, name="upload")  # short verb (artifacts section)
