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
from rich.markup import escape  # noqa: E402

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
        except OSError as e:  # a path the user gave cannot be read or written: one line, exit 2
            if os.environ.get("PADDLECD_DEBUG"):
                raise
            where = f": {e.filename}" if e.filename else ""
            err.print(f"[bold red]error:[/] {escape(e.strerror or str(e))}{escape(str(where))}", markup=True, soft_wrap=True)
            err.print("[yellow]hint:[/] check the path and its permissions", markup=True)
            raise Exit(code=2) from None
        except PaddlecdError as e:
            if os.environ.get("PADDLECD_DEBUG"):
                raise
            err.print(f"[bold red]error:[/] {escape(e.cause)}", markup=True, soft_wrap=True)
            if e.hint:
                err.print(f"[yellow]hint:[/] {escape(e.hint)}", markup=True, soft_wrap=True)
            raise Exit(code=e.exit_code) from None

    return wrapper


def settings(**flags):
    """Resolve configuration with task flags on top (``None`` flags are ignored)."""
    return config.load(flags)


def say(msg: str) -> None:
    """Progress line for the user (blank lines from build output are dropped)."""
    if msg.strip():
        console.print(msg, soft_wrap=True, markup=False, highlight=False)


def layer_progress(every: float = 5.0):
    """A callback for push/pull streams: prints each layer's status changes, byte progress at most
    every ``every`` seconds, so a 1 GB push shows progress without thousands of lines."""
    import time

    last: dict[str, str] = {}
    clock = {"t": 0.0}

    def show(msg: str) -> None:
        layer, _, rest = msg.partition(" ")
        status = rest.split("[", 1)[0].strip()
        now = time.monotonic()
        if last.get(layer) != status or now - clock["t"] >= every:
            last[layer] = status
            clock["t"] = now
            say(f"  {msg}")

    return show


# ============================================================== image: lock, bootstrap, build, push, verify
# (section owned by the main-job work)

VARIANT_HELP = ("image variant from images/variants.yaml (default: cpu). Given once on a command line it "
                "applies to every task there, so `invoke build push verify --variant cu126` works")


def _variant(value: str | None, *, required_by: str | None = None) -> str:
    """The variant for this task: its own flag, else a --variant given to another task on the same
    command line (invoke binds flags to the task they follow), else ``cpu`` — except for release
    operations (``required_by``), which never default: promoting or rolling back the wrong one is costly."""
    if value:
        return value
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg == "--variant" and i + 1 < len(argv):  # not -v: other tasks use it for other flags
            return argv[i + 1]
        if arg.startswith("--variant="):
            return arg.split("=", 1)[1]
    if required_by:
        from paddlecd.errors import ConfigError

        raise ConfigError(f"{required_by} needs --variant", f"e.g. invoke {required_by} --variant cpu …")
    return "cpu"


@task(help={"variant": "lock only this variant (repeatable); default: all variants",
            "dry_run": "resolve and show the digests without writing images/lock.yaml"}, iterable=["variant"])
@guarded
def lock(c, variant=None, dry_run=False):
    """Pin base images: resolve each variant's base tag to its manifest digest (registry API, no pull).

    Writes images/lock.yaml (commit it) — and, for bases built by image.bootstrap, the per-machine
    .paddlecd/lock.local.yaml; `build` only ever uses base@sha256 from them. All-or-nothing: when one
    base cannot be resolved (e.g. Docker Hub unreachable from an air-gapped machine) nothing is written.
    Examples: invoke lock --variant cpu     invoke lock   (all variants)
    """
    from paddlecd.image import lock as lockmod
    from paddlecd.image import variants as var
    from paddlecd.registry import client as reg

    s = settings()
    if dry_run:
        for v in ([var.get(s, n) for n in variant] if variant else var.load(s).values()):
            r = reg.parse_reference(v.base)
            say(f"{v.name}: {v.base} -> {reg.client_for(s, r.registry).resolve(r.repository, r.tag or 'latest').digest}")
        say("dry run: no lock file written")
        return
    entries = lockmod.lock(s, variant or None, on_progress=say)
    say(f"locked {len(entries)} base(s): pulled bases in {s.lock_file} (commit it), bootstrapped ones in "
        f"{s.state / lockmod.LOCAL_LOCK} (per machine)")


@task(help={"variant": "variant whose base to bootstrap (needs a 'bootstrap:' block; default cpu)",
            "force": "rebuild and push even when the registry already has the base",
            "lock": "also lock the variant afterwards (default: yes)",
            "dry_run": "say whether the base would be built and where it would be pushed; change nothing"})
@guarded
def bootstrap(c, variant="cpu", force=False, lock=True, dry_run=False):
    """Build the CPU Paddle base locally (debootstrap + PyPI paddlepaddle) and push it to the registry.

    The air-gapped path: no image hub needed. Skipped when the registry already holds the base
    (cached; use --force to rebuild). Needs root for debootstrap. Then locks the variant.

    Example: invoke image.bootstrap --variant cpu --dry-run
    """
    from paddlecd.image import bootstrap as boot
    from paddlecd.image import lock as lockmod

    s = settings()
    if dry_run:
        v = boot.variants.get(s, variant)
        present = v.bootstrap is not None and boot.base_present(s, v)
        say(f"dry run: base {v.base} " + ("is in the registry: nothing to do" if present and not force else
            f"would be built (debootstrap {v.bootstrap.suite if v.bootstrap else '?'} from {boot.host_mirror(s)}) and pushed"))
        return
    digest = boot.bootstrap(s, variant, force=force, on_line=say, on_progress=layer_progress())
    say(f"base of '{variant}' " + (f"pushed: {digest}" if digest else "already in the registry (use --force to rebuild)"))
    if lock:
        for entry in lockmod.lock(s, [variant]).values():
            say(f"locked {entry.variant}: {entry.pinned}")


@task(help={"variant": VARIANT_HELP, "no_cache": "build without the layer cache"})
@guarded
def build(c, variant=None, no_cache=False):
    """Build a variant's image FROM its locked base digest (BuildKit), tagged <registry>/<repo>:<variant>-<gitsha>.

    Adds OCI labels (source, revision, created, version, base.name, base.digest) and paddle/cuda/cudnn/
    variant labels; the CA bundle and index URL enter as BuildKit secrets. Progress is shown; the full
    log is kept under .paddlecd/logs/. Refuses an unlocked or drifted base (run `invoke lock`).

    Example: invoke build push verify --variant cpu
    """
    from paddlecd.image import build as builder

    built = builder.build(settings(), _variant(variant), on_line=say, no_cache=no_cache)
    say(f"built {built.tag} ({built.image_id[:19]}) with {built.builder} in {built.seconds:.1f}s; log: {built.log}")


@task(help={"variant": VARIANT_HELP, "dry_run": "show what would be pushed and where, push nothing"})
@guarded
def push(c, variant=None, dry_run=False):
    """Push the variant's last build to the registry and read its digest back.

    Credentials: Docker's config.json (docker login) or PADDLECD_REGISTRY_USERNAME/PASSWORD.
    Transient failures are retried with backoff; every chunk of the push stream is checked. The pushed
    repo@sha256:... is recorded as the variant's candidate for verify and promote.

    Example: invoke push --variant cpu --dry-run
    """
    from paddlecd.image import push as publish

    s = settings()
    name = _variant(variant)
    if dry_run:
        say(f"dry run: would push {publish.last_build_tag(s, name)} and read its digest back from {s.registry.url}")
        return
    pushed = publish.push(s, name, on_progress=layer_progress())
    say(f"pushed {pushed.tag}\n  reference: {pushed.reference}")


@task(help={"variant": VARIANT_HELP, "image": "verify this image instead (repo@sha256:..., or a tag resolved once)",
            "out": "output folder for junit.xml, evidence copy, smoke.log, model/ (default .paddlecd/verify/...)"})
@guarded
def verify(c, variant=None, image=None, out=None):
    """Run the smoke suite inside the pushed image (by digest) and record evidence keyed by that digest.

    Checks: paddle imports as the non-root default user with the labelled version; CUDA as the variant
    says; AllReduce over all cards (NCCL) or 2 CPU processes (gloo) with exact sums and busbw; a short
    training run converges and 2-rank data parallel matches 1 process; paddle.jit.save export reloads
    (jit.load and paddle.inference) within 1e-5. Exits 6 if any check fails.

    Examples: invoke verify --variant cpu
              invoke verify --image registry.example.com/ml/paddle@sha256:<64 hex> --out /tmp/verify-out
    """
    from paddlecd.verify import run as ver

    s = settings()
    result = ver.verify(s, variant=None if image else _variant(variant), image=image,
                        out_dir=Path(out) if out else None, on_line=say)
    say(f"evidence: {result.evidence_path}\njunit: {result.out_dir / 'junit.xml'}")
    error = result.error()  # the package's one failure → VerifyError mapping (the pipeline's too)
    if error:
        raise error
    say(f"verified {result.reference}: {len(result.record.checks)} checks passed")


image = Collection("image")
for _t in (lock, bootstrap, build, push, verify):
    image.add_task(_t)


@task(help={"variant": "show the checks as they apply to this variant (GPU-only checks are skipped on CPU)"})
@guarded
def checks(c, variant="cpu"):
    """List the smoke checks verify runs inside every image (module/test), GPU-only ones marked.

    The suite lives in smoke/ and depends only on paddle + pytest + the stdlib; see smoke/README.md.
    """
    import ast

    from paddlecd.image import variants as var

    gpu = var.get(settings(), variant).is_gpu
    for path in sorted((Path(__file__).parent / "smoke").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                gpu_only = any("gpu_only" in ast.unparse(d) for d in node.decorator_list)
                mark = " (GPU-only: skipped on this variant)" if gpu_only and not gpu else (" (GPU-only)" if gpu_only else "")
                say(f"{path.stem.removeprefix('test_')}/{node.name}{mark}")


smoke = Collection("smoke")
smoke.add_task(checks)
smoke.add_task(verify, name="run")

# ============================================================== release (promotion)
_CONFIRM_HINT = "nothing was written: re-run with --yes to write this plan (--dry-run only shows it)"


def _confirmed(outcome, dry_run: bool, yes: bool, what: str) -> None:
    """After a plan-only run: exit 0 for --dry-run or a no-op, else refuse without --yes (no prompt in CI)."""
    from paddlecd.errors import ConfigError

    if dry_run or outcome.plan.noop:
        say("dry run: nothing written" if dry_run else "nothing to do")
        return
    if not yes:
        raise ConfigError(f"{what} not confirmed", _CONFIRM_HINT)


def _phases(outcome) -> str:
    return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in outcome.phases)


@task(help={"variant": "variant to promote (its last pushed candidate, unless --digest)",
            "version": "release version X.Y.Z or X.Y.Z-rc.N (semver 2.0; no 'v', no leading zeros)",
            "bump": "instead of --version: major, minor or patch, from the highest existing release",
            "digest": "promote this sha256:… from the candidate repository instead of the last candidate",
            "dry_run": "show the plan (and check evidence), write nothing, exit 0",
            "yes": "write the plan (required: CI has no prompt)",
            "force": "promote despite missing, failing or stale evidence (needs --reason; recorded)",
            "reason": "why --force is needed; stored in the ledger record"})
@guarded
def promote(c, variant=None, version=None, bump=None, digest=None, dry_run=False, yes=False, force=False,
            reason=None):
    """Promote a verified image digest to a semver release: X.Y.Z-V, and the moving X.Y-V, X-V, latest-V.

    Prints the plan first: every tag, in which repository, from which digest, and what each moving tag
    pointed to before. Writes only with --yes. Requires passing verify evidence for exactly that digest
    (younger than release.evidence_max_age_hours). Moving tags only move forward by semver precedence;
    a pre-release (1.5.0-rc.1) gets only its own tag; an existing release is never overwritten; a
    re-run after a crash finishes the job; a complete re-run does nothing. Blobs are mounted inside one
    registry (no layer moves). Every promotion appends a record to the ledger (invoke release.list).
    Examples: invoke promote --variant cpu --version 1.4.0 --dry-run
              invoke promote --variant cu126 --bump minor --yes
    """
    from paddlecd.release import promote as rel

    outcome = rel.promote(settings(), variant=_variant(variant, required_by="promote"), version=version, part=bump, digest=digest,
                          force=force, reason=reason, execute=yes and not dry_run, report=say)
    if not yes or dry_run:
        return _confirmed(outcome, dry_run, yes, "promotion")
    say(f"promoted {outcome.plan.version}-{outcome.plan.variant} = {outcome.plan.digest} "
        f"({outcome.bytes_uploaded} bytes uploaded; {_phases(outcome)})")


@task(help={"variant": "variant whose moving tags to re-point", "to": "the earlier release version, e.g. 1.3.2",
            "dry_run": "show the plan, write nothing, exit 0", "yes": "write the plan (required)"})
@guarded
def rollback(c, variant=None, to=None, dry_run=False, yes=False):
    """Re-point the moving tags of release --to (X.Y-V, X-V, latest-V) back to it; recorded in the ledger.

    The one case where a moving tag goes back. Later promotions move forward from there. Immutable
    release tags are never touched. Example: invoke release.rollback --variant cpu --to 1.3.2 --yes
    """
    from paddlecd.errors import ConfigError
    from paddlecd.release import promote as rel

    if not to:
        raise ConfigError("release.rollback needs --to X.Y.Z", "see: invoke release.list --variant V")
    outcome = rel.rollback(settings(), variant=_variant(variant, required_by="release.rollback"), to=to, execute=yes and not dry_run, report=say)
    if not yes or dry_run:
        return _confirmed(outcome, dry_run, yes, "rollback")
    say(f"rolled back {', '.join(outcome.written) or 'nothing'} to {to} ({_phases(outcome)})")


def _evidence_text(record) -> str:
    ev = record.evidence_summary
    text = "no evidence" if not ev else f"{ev['checks'] - len(ev['failed'])}/{ev['checks']} checks passed, {ev['created']}"
    return text + (f"; FORCED: {record.reason}" if record.forced else "")


@task(name="list", help={"variant": "only this variant"})
@guarded
def release_list(c, variant=None):
    """Show releases from the ledger: version, variant, digest, when, by whom, evidence, moving tags."""
    from paddlecd.image import variants as var
    from paddlecd.release import promote as rel

    s = settings()
    if variant:
        var.get(s, variant)  # an unknown variant is an error, not an empty list
    rows = rel.list_releases(s, variant)
    for record, tags in rows:
        say(f"{record.version}-{record.variant}  {record.digest}  {record.when}  {record.who}  "
            f"[{_evidence_text(record)}]  {' '.join(tags)}")
    if not rows:
        say("no releases yet")


@task(help={"version": "a version (1.4.0: every variant) or a release (1.4.0-cpu)"})
@guarded
def show(c, version):
    """Show one release: digest, reference, moving tags on it now, evidence, and its ledger history."""
    from paddlecd.release import promote as rel

    s = settings()
    for record, tags, history in rel.show(s, version):
        say(f"{record.version}-{record.variant}\n  reference: {s.release_repo}@{record.digest}\n"
            f"  moving tags: {' '.join(tags) or '(none)'}\n  evidence: {_evidence_text(record)}")
        for h in history:
            say(f"  {h.when} {h.action} by {h.who} (record {h.id})")


release = Collection("release")
for _t in (promote, rollback, release_list, show):
    release.add_task(_t)

# ============================================================== artifacts (object storage)
artifacts = Collection("artifacts")

_STORE_HELP = "store URL: s3://BUCKET[/prefix] or file:///path (default: storage.url, else file://<state>/artifacts)"


def _bytes_bar(total: int | None = None):
    """A rich progress bar counting bytes on stderr; returns (progress, task id)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

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
    from paddlecd.artifacts import manifest as artifact_manifest
    from paddlecd.artifacts import transfer as arts
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
    from paddlecd.artifacts import transfer as arts

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

    from paddlecd.artifacts import transfer as arts

    cfg = settings()
    base, (name,) = arts.split_model_url(url, cfg, parts=1)
    versions = arts.list_versions(arts.store_for(cfg, base), name)
    if not versions:
        from paddlecd.errors import StorageError

        raise StorageError(f"no model named '{name}' in {base}", "check the name, or upload a version first (invoke upload …)")
    rows = []
    for v in versions:
        metrics = ", ".join(f"{k}={x:g}" for k, x in (v["metrics"] or {}).items())
        rows.append((v["version"], "incomplete", "", "", "", "") if not v["complete"] else
                    (v["version"], v["created"], str(v["files"]), str(v["bytes"]), v["image_digest"] or "-", metrics or "-"))
    if not console.is_terminal:  # pipes and CI logs: whole values, tab-separated, nothing cut
        say(f"# {base}/{name}\nversion\tcreated\tfiles\tbytes\timage digest\tmetrics")
        for row in rows:
            say("\t".join(row))
        return
    table = Table("version", "created", "files", "bytes", "image digest", "metrics", title=f"{base}/{name}")
    for row in rows:
        table.add_row(*row[:4], row[4][:19], row[5])
    console.print(table)


artifacts.add_task(artifacts_upload, name="upload")
artifacts.add_task(artifacts_download, name="download")
artifacts.add_task(artifacts_list, name="list")

# ============================================================== cluster (training jobs)
cluster = Collection("cluster")

_DEPLOY_HELP = {
    "release": "release to run, X.Y.Z-<variant> (e.g. 1.4.0-cu126); resolved once to its digest",
    "image": "instead of --release: an image by digest, host/repo@sha256:<64 hex> (tags are refused)",
    "variant": "with --image: the image's variant (default cpu); decides whether GPUs are allowed",
    "job": "the job file (schema: src/paddlecd/schemas/train.schema.json; example: examples/train.yaml)",
    "nodes": "number of nodes (pods or containers); default: 'nodes' in the job file",
    "gpus_per_node": "GPUs per node, one training process each; default: resources.gpus in the job file",
    "cluster": "local (N containers on one Docker network) or k8s (kubeconfig); default: settings cluster.kind",
    "kind": "job (Indexed batch/v1 Job + headless Service) or paddlejob (Kubeflow PaddleJob, k8s only)",
}


def _count(flag: str, value):
    """An optional integer flag (invoke passes strings when the default is None)."""
    from paddlecd.errors import ConfigError

    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"--{flag} must be a whole number, got {value!r}", f"e.g. --{flag} 2") from None


def _plan(job, release, image, variant, nodes, gpus_per_node, cluster_kind, kind):
    from paddlecd import cluster as jobs

    return jobs.plan(settings(), job=job, release=release, image=image, variant=variant,
                     nodes=_count("nodes", nodes), gpus_per_node=_count("gpus-per-node", gpus_per_node),
                     kind=kind, cluster=cluster_kind)


@task(positional=[], help={**_DEPLOY_HELP, "dry_run": "print the plan and the manifests, create nothing"})
@guarded
def deploy(c, job=None, release=None, image=None, variant=None, nodes=None, gpus_per_node=None, cluster=None,
           kind="job", dry_run=False):
    """Run a promoted image as a distributed Paddle training job, locally or on Kubernetes.

    Every node runs `python -m paddle.distributed.launch --master <job>-0.<job>:<port> --nnodes N
    --rank <i>` on the image by digest, with the environment the Kubeflow PaddleJob controller sets
    (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID). The plan is printed first; --dry-run also prints the
    manifests and stops. --cluster local runs N containers on a fresh Docker network (gloo on CPU),
    streams every rank's log and removes everything afterwards (PADDLECD_KEEP=1 keeps it). --cluster
    k8s creates a headless Service + Indexed Job (or a PaddleJob with --kind paddlejob), watches the
    pods (image pull errors, unschedulable pods, completion, backoff limit) and streams rank 0's log.
    Prints the exported model location on success (hand it to `invoke upload`).
    Examples: invoke deploy --release 1.4.0-cpu --job examples/train.yaml --nodes 2
              invoke deploy --release 1.4.0-cu126 --job train.yaml --nodes 2 --gpus-per-node 8 --cluster k8s --dry-run
    """
    from paddlecd import cluster as jobs

    plan = _plan(job, release, image, variant, nodes, gpus_per_node, cluster, kind)
    for line in plan.describe():
        say(line)
    if dry_run:
        import yaml

        say(yaml.safe_dump_all(plan.manifests, sort_keys=False))
        return say("dry run: nothing created")
    location = jobs.run(settings(), plan, on_event=lambda m: say(f"-- {m}"), on_line=say)
    say(f"model: {location}")
    return location


@task(positional=[], help={**_DEPLOY_HELP, "out": "folder to write the manifests to (created; one YAML file per object)"})
@guarded
def cluster_render(c, job=None, out=None, release=None, image=None, variant=None, nodes=None, gpus_per_node=None, cluster="k8s",
           kind="job"):
    """Write the Kubernetes manifests of a training job to a folder, create nothing.

    The same checks as deploy run first (job file schema, release → digest, GPUs vs variant, shm vs
    memory). Files are NN-<kind>-<name>.yaml in creation order, ready for kubectl apply -f <out>.
    Example: invoke cluster.render --release 1.4.0-cu126 --job train.yaml --nodes 2 --gpus-per-node 8 --out manifests/
    """
    from paddlecd import cluster as jobs
    from paddlecd.errors import ConfigError

    if not out:
        raise ConfigError("no output folder given", "pass --out manifests/")
    plan = _plan(job, release, image, variant, nodes, gpus_per_node, cluster, kind)
    for path in jobs.render_to(plan, out):
        say(f"wrote {path}")


cluster.add_task(cluster_render, name="render")
cluster.add_task(deploy)

# ============================================================== pipeline, doctor
pipeline = Collection("pipeline")

_LOG_FORMAT_HELP = "text (default) or json: one JSON object per line, one event per stage/variant/check " \
                   "(also PADDLECD_LOG_FORMAT=json)"


def _log_format(value: str | None) -> str:
    from paddlecd.errors import ConfigError

    fmt = (value or os.environ.get("PADDLECD_LOG_FORMAT") or "text").lower()
    if fmt not in ("text", "json"):
        raise ConfigError(f"--log-format must be text or json, got {fmt!r}", "e.g. --log-format json")
    return fmt


def _reporters(fmt: str):
    """(on_plan, on_event, on_line) printing text or JSON lines."""
    from paddlecd.pipeline import report

    if fmt == "json":
        emit = lambda event: console.out(report.json_line(event), highlight=False)  # noqa: E731
        return (lambda lines: emit({"event": "plan", "lines": lines}), emit,
                lambda stage, variant, line: emit({"event": "log", "stage": stage, "variant": variant, "line": line}))

    def on_event(event):
        line = report.text(event)
        if line:
            say(line)

    return (lambda lines: say("\n".join(lines)), on_event,
            lambda stage, variant, line: say(f"  {variant}| {line}"))


@task(name="run", iterable=["variant"], help={
    "name": "pipeline name: a file pipelines/<name>.yaml (pr, nightly, release; see invoke pipeline.list)",
    "variant": "run for this variant (repeatable); wins over the pipeline's own choice "
               "(pr: the variants the change touches, else cpu; nightly: all)",
    "base_ref": "git ref to diff against to find the variants a change touches (pr); under GitHub Actions "
                "default origin/$GITHUB_BASE_REF",
    "resume": "continue the last run of this pipeline from the first stage that did not succeed, reusing the "
              "recorded outputs (digests, evidence) of the stages before it",
    "log_format": _LOG_FORMAT_HELP,
    "dry_run": "print the plan (stages, variants, what each changes) and run nothing",
    "version": "release pipeline: the version to promote to (X.Y.Z); default: the pipeline's bump",
    "bump": "release pipeline: major, minor or patch instead of --version",
    "digest": "release pipeline: promote this sha256:... instead of the variant's last candidate",
})
@guarded
def pipeline_run(c, name, variant=None, base_ref=None, resume=False, log_format=None, dry_run=False, version=None,
                 bump=None, digest=None):
    """Run a pipeline from pipelines/<name>.yaml: its stages in order, for every selected variant.

    Prints the plan first, then one line per stage and variant (status, seconds, key outputs such as
    digests). Builds run in parallel (bounded, see the file's `parallel`). Writes
    <state>/pipelines/<name>/<run-id>/summary.json and summary.md; under GitHub Actions also appends
    the Markdown to $GITHUB_STEP_SUMMARY (capped at 1 MiB) and prints ::error:: annotations for failures.
    A failed stage stops the run (exit 10); `--resume` then continues from it.
    Examples: invoke pipeline.run pr                      (cpu, or --variant ...)
              invoke pipeline.run pr --base-ref origin/main
              invoke pipeline.run pr --resume
              invoke pipeline.run release --variant cpu --version 1.4.0 --dry-run
    """
    from paddlecd.pipeline import report
    from paddlecd.pipeline import runner as pl
    from paddlecd.pipeline import spec as pipeline_spec

    fmt = _log_format(log_format)
    s = settings()
    if base_ref is None and os.environ.get("GITHUB_BASE_REF"):
        base_ref = f"origin/{os.environ['GITHUB_BASE_REF']}"
    on_plan, on_event, on_line = _reporters(fmt)
    pdef = pipeline_spec.load(s, name)
    options = pipeline_spec.check_options({"version": version, "bump": bump, "digest": digest}, pdef)
    if dry_run:
        on_plan(pl.plan_lines(pdef, pl.select(s, pdef, tuple(variant or ()), base_ref), s, options))
        return say("dry run: nothing run, nothing written") if fmt == "text" else None
    result = pl.run(s, name, given=tuple(variant or ()), base_ref=base_ref, resume=resume,
                    options=options,
                    on_event=on_event, on_line=on_line, on_plan=on_plan)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in report.annotations(result.summary):
            print(line, flush=True)
    error = result.error()
    if error:
        raise error


@task(name="list")
@guarded
def pipeline_list(c):
    """List the pipelines in pipelines/ with their stages in run order and which variants they cover."""
    from paddlecd.pipeline import spec as pipeline_spec

    s = settings()
    for name in pipeline_spec.names(s):
        pdef = pipeline_spec.load(s, name)
        covers = ", ".join(pdef.variants) if isinstance(pdef.variants, tuple) else pdef.variants
        say(f"{name:<9} {' -> '.join(st.name for st in pdef.stages)}  [variants: {covers}]  {pdef.description}")


pipeline.add_task(pipeline_run)
pipeline.add_task(pipeline_list)


@task(iterable=["variant"], help={
    "variant": "a variant in use (repeatable); default: every variant in images/variants.yaml",
    "require_gpu": "fail (not warn) when GPU variants are in use and this host has no usable GPU",
    "log_format": _LOG_FORMAT_HELP,
})
@guarded
def doctor(c, variant=None, require_gpu=False, log_format=None):
    """Check this machine can run the pipelines: one line per check, a hint for each problem.

    engine reachable and BuildKit usable; registry reachable with the credentials push uses; NVIDIA
    driver against the CUDA of every GPU variant in use (NVIDIA's driver table); NVIDIA container
    runtime; free disk for the images; the artifact store (S3 credentials + bucket); the kubeconfig
    context when cluster.kind is k8s. Exits 11 only on a failure that would stop a pipeline: GPU
    variants on a host without a GPU only warn, unless --require-gpu.
    Examples: invoke doctor --variant cpu     invoke doctor --require-gpu   (on a GPU runner)
    """
    from paddlecd import doctor as doc
    from paddlecd.errors import DoctorError
    from paddlecd.pipeline import report as pipeline_report

    fmt = _log_format(log_format)
    rows = doc.run(settings(), names=variant or (), require_gpu=require_gpu)
    for r in rows:
        if fmt == "json":
            console.out(pipeline_report.json_line({"event": "check", "check": r.name, "status": r.status,
                                                   "detail": r.detail, "hint": r.hint}), highlight=False)
            continue
        say(f"{r.status.upper():<4}  {r.name:<15} {r.detail}" + (f"\n      hint: {r.hint}" if r.hint and r.status != "ok" else ""))
    failed = [r.name for r in rows if r.status == "fail"]
    if failed:
        raise DoctorError(f"doctor: {len(failed)} check(s) failed: {', '.join(failed)}", "fix the FAIL lines above, then re-run")

# ============================================================== namespace
ns = Collection()
for _t in (lock, build, push, verify):  # short verbs (image section)
    ns.add_task(_t)
for _sub in (image, smoke, release, artifacts, cluster, pipeline):
    ns.add_collection(_sub)
ns.add_task(artifacts_upload, name="upload")  # short verb (artifacts section)
ns.add_task(promote)  # short verb (release section)
ns.add_task(deploy)  # short verb (cluster section)
ns.add_task(doctor)  # top-level verb (pipeline section)


def _help_after_positional() -> None:
    """`invoke <task> --help` where the task takes positional arguments: invoke would hand `--help` to
    the first of them, so re-run as `invoke --help <task>` (tasks.py is imported before task args are parsed)."""
    argv = sys.argv
    for i, arg in enumerate(argv[1:-1], start=1):
        if arg in ns.task_names and argv[i + 1] in ("--help", "-h"):
            os.execvp(argv[0], [argv[0], "--help", arg])


_help_after_positional()
