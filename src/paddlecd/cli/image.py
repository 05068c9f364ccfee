"""Image tasks: lock, bootstrap, build, push, verify (``invoke image.*``; all but bootstrap are also
short verbs at the top level)."""

from __future__ import annotations

from pathlib import Path

from paddlecd.cli import common, view
from paddlecd.cli.common import (
    VARIANT_HELP,
    VERBOSE_HELP,
    count,
    guarded,
    result,
    say,
    settings,
    task,
)
from paddlecd.cli.common import variant as pick_variant
from paddlecd.errors import ConfigError, PaddlecdError


@task(
    help={
        "variant": "lock only this variant (repeatable); default: all variants",
        "dry_run": "resolve and show the digests without writing images/lock.yaml",
    },
    iterable=["variant"],
)
@guarded
def lock(c, variant=None, dry_run=False):
    """Pin base images: resolve each variant's base tag to its manifest digest (no pull).

    Through the registry API. Writes images/lock.yaml (commit it) — and, for bases built by
    image.bootstrap, the per-machine .paddlecd/lock.local.yaml; `build` only ever uses base@sha256
    from them. All-or-nothing: when one base cannot be resolved (e.g. Docker Hub unreachable from
    an air-gapped machine) nothing is written.
    Examples: invoke lock --variant cpu     invoke lock   (all variants)
    """
    from paddlecd.image import lock as pins

    s, variant = settings(), common.variants_given(variant)
    if dry_run:
        for entry in pins.resolve(s, variant or None).values():
            result(f"{entry.variant}: {entry.base} -> {entry.digest}")
        return say("dry run: no lock file written")
    before = pins.read(s)
    try:
        entries = pins.lock(s, variant or None, on_progress=say)
    except PaddlecdError as e:  # trial 19: the resolved lines above read as written
        e.hint = (f"{e.hint}; " if e.hint else "") + (
            "nothing was written (a lock is all or nothing)"
            + ("" if variant else ": lock what resolves with --variant, e.g. --variant cpu"))
        raise
    shared, local = pins.paths(s)
    for name, entry in entries.items():
        where = local if pins.is_local(s, name) else shared
        how = "unchanged" if before.get(name) == entry else "written"
        note = " (per machine)" if where == local else " (commit it)" if how == "written" else ""
        result(f"{name}: {entry.digest} in {where}: {how}{note}")


@task(
    help={
        "variant": "variant whose base to bootstrap (needs a 'bootstrap:' block; default cpu)",
        "force": "rebuild and push even when the registry already has the base",
        "lock": "also lock the variant afterwards (default: yes)",
        "dry_run": "say whether the base would be built and where it would be pushed; "
        "change nothing",
        "verbose": VERBOSE_HELP,
    }
)
@guarded
def bootstrap(c, variant=None, force=False, lock=True, dry_run=False, verbose=False):
    """Build the CPU Paddle base locally (debootstrap + PyPI paddlepaddle) and push it.

    The air-gapped path: no image hub needed. Skipped when the registry already holds the base
    (cached; use --force to rebuild). Needs root for debootstrap. Then locks the variant.

    Example: invoke image.bootstrap --variant cpu --dry-run
    """
    from paddlecd.image import bootstrap as boot

    variant = common.variant(variant)  # a --variant shared on the line counts; else cpu
    if dry_run:
        return say(boot.plan(settings(), variant, force=force))
    s = settings()
    with view.stage("base", variant, state=s.state, verbose=verbose) as st:
        done = boot.bootstrap_and_lock(s, variant, force=force, then_lock=lock, on_line=st.line,
                                       on_progress=st.progress, on_transfer=st.transfer)
        st.done(_bootstrapped(st, done.digest))
    result(
        f"base of '{variant}' "
        + (
            f"pushed: {done.digest}"
            if done.digest
            else "already in the registry (use --force to rebuild)"
        )
    )
    if done.locked:
        result(f"locked {done.locked.variant}: {done.locked.pinned}")


def _bootstrapped(st: view.Stage, digest: str | None) -> str:
    """The base stage's result line: the digest, the bytes fetched (packages, wheels) and
    pushed."""
    if not digest:
        return "cached in the registry"
    moved = [f"{view.human_bytes(n)} {name}" for name, n in st.moved.items() if n]
    pushed = st.bytes_pushed
    return (f"{digest[:19]}…  " + " + ".join(moved) + (", " if moved else "")
            + (f"{view.human_bytes(pushed)} pushed" if pushed else "layers already there"))


@task(iterable=["label"], help={"variant": VARIANT_HELP,
                                "no_cache": "build without the layer cache",
                                "label": "an image label KEY=VALUE more (repeatable; not one "
                                "paddlecd sets)",
                                "verbose": VERBOSE_HELP})
@guarded
def build(c, variant=None, no_cache=False, label=None, verbose=False):
    """Build a variant's image FROM its locked base digest (BuildKit).

    Tagged <registry>/<repo>:<variant>-<gitsha>. Adds OCI labels (source, revision, created,
    version, base.name, base.digest) and paddle/cuda/cudnn/variant labels; the CA bundle and index
    URL enter as BuildKit secrets. --label adds labels of your own: the same cached layers, a new
    image config, hence a new digest. Progress is shown; the full log is kept under
    .paddlecd/logs/. Refuses an unlocked or drifted base (run `invoke lock`).

    Example: invoke build push verify --variant cpu
    """
    from paddlecd.image import build as builder

    s, name = settings(), pick_variant(variant)
    with view.stage("build", name, state=s.state, verbose=verbose) as st:
        built = builder.build(s, name, on_line=st.line, no_cache=no_cache,
                              extra_labels=label or ())
        st.done(built.tag)
    result(
        f"built {built.tag} ({built.image_id[:19]}) with {built.builder} in "
        f"{built.seconds:.1f}s; log: {built.log}"
    )


@task(
    help={
        "variant": VARIANT_HELP,
        "json": common.JSON_HELP,
        "dry_run": "show what would be pushed and where, push nothing",
        "verbose": VERBOSE_HELP,
    }
)
@guarded
def push(c, variant=None, dry_run=False, json=False, verbose=False):
    """Push the variant's last build to the registry and read its digest back.

    Credentials: Docker's config.json (docker login) or PADDLECD_REGISTRY_USERNAME/PASSWORD.
    Transient failures are retried with backoff; every chunk of the push stream is checked. The
    pushed repo@sha256:... is recorded as the variant's candidate for verify and promote. With a
    signing key (verify's), the build's SLSA provenance (Dockerfile and base digests, build args,
    git revision and dirtiness, builder, start/finish) is signed and attached as a Sigstore
    bundle referrer of the digest; invoke evidence.show shows it.

    Example: invoke push --variant cpu --dry-run
    """
    from paddlecd.image import push as publish

    s, name = settings(), pick_variant(variant)
    if dry_run:
        build, signing = publish.preflight(s, name)
        tag = build["tag"]
        say(f"dry run: would push {tag} and read its digest back from {s.registry.url}"
            + (", then attach its signed SLSA provenance" if signing else ""))
        if json:  # the plan, as every --json --dry-run (a trial: stdout was empty)
            common.json_result({"executed": False, "variant": name, "tag": tag,
                                "registry": s.registry.url, "provenance": signing})
        return None
    with view.stage("push", name, state=s.state, verbose=verbose) as st:
        pushed = publish.push(s, name, on_progress=st.progress)
        moved = st.bytes_pushed
        st.done(f"{pushed.digest[:19]}…  "
                + (f"{view.human_bytes(moved)} pushed" if moved else "layers already there"))
    if json:
        return common.json_result(pushed)
    result(f"pushed {pushed.tag}\n  reference: {pushed.reference}\n  provenance: "
           + (pushed.provenance or "not attached (no signing key: invoke evidence.keygen)"))


@task(
    help={
        "variant": VARIANT_HELP,
        "image": "verify this image instead (repo@sha256:..., or a tag resolved once)",
        "out": "output folder for junit.xml, evidence copy, smoke.log, model/ "
        "(default .paddlecd/verify/...)",
        "json": "print the evidence record as JSON on stdout instead of text",
        "nodes": "run the collective checks as an N-node job (default 1: one container)",
        "cluster": "where an N-node run goes: local (N containers on one network) or k8s "
        "(one Indexed Job + headless Service for the collective checks, on the kubeconfig's "
        "cluster)",
        "gpus_per_node": "cards per node of an N-node GPU run (default: host cards / N; "
        "required with --cluster k8s for a GPU image)",
        "kind": "with --cluster k8s: job (Indexed Job + Service) or paddlejob (Kubeflow)",
        "models": "also check each model of release.models in the image (artifacts.check at its "
        "stored references); the results go into the attestation, which promote requires",
        "dry_run": "with --cluster k8s: print the manifests (ConfigMap, Service, Job), "
        "create nothing",
        "verbose": VERBOSE_HELP,
    }
)
@guarded
def verify(
    c,
    variant=None,
    image=None,
    out=None,
    json=False,
    nodes=None,
    cluster="local",
    gpus_per_node=None,
    kind=None,
    dry_run=False,
    verbose=False,
    models=False,
):
    """Run the smoke suite inside the pushed image (by digest) and record evidence for that digest.

    Checks: paddle imports as the non-root default user with the labelled version; CUDA as the
    variant says; AllReduce over all cards (NCCL) or 2 CPU processes (gloo) with exact sums and
    busbw; a short training run converges and 2-rank data parallel matches 1 process;
    paddle.jit.save export reloads (jit.load and paddle.inference) within 1e-5. Exits 6 if any
    check fails.

    --nodes N runs AllReduce (exact sums, busbw) and data-parallel training == one process as one
    N-node job through deploy's launcher and rendezvous; the evidence lists every node and the
    transport (NCCL's on GPU, none/gloo on CPU); each rank's log is kept under <out>/logs/. A
    rank that cannot reach the master fails within a minute, naming the address. --cluster k8s
    submits that job as deploy submits one (the smoke suite in a ConfigMap), watches it,
    reads every rank's result from its pod log and deletes the objects (PADDLECD_KEEP=1 keeps
    them); an unreachable API server exits 9 like deploy.

    Examples:
      invoke verify --variant cpu
      invoke verify --image registry.example.com/ml/paddle@sha256:<64 hex> --out /tmp/verify-out
      invoke verify --variant cpu --nodes 2 --cluster local
      invoke verify --variant cu126 --nodes 2 --gpus-per-node 8 --cluster k8s [--dry-run]
    """
    from paddlecd import files
    from paddlecd.verify import run as smoke

    if out:  # verify fills the folder (junit, evidence, rank logs): never /etc, /usr, a top folder
        files.refuse_output_place(out, "--out", folder=True)
    given = count("nodes", nodes)  # invoke passes a string (default None): parsed and checked
    nodes, gpus = 1 if given is None else given, count("gpus-per-node", gpus_per_node)
    if kind is not None and cluster != "k8s":  # a trial: --kind job without k8s was dropped
        raise ConfigError(f"--kind {kind} is for --cluster k8s",
                          "drop --kind, or add --cluster k8s")
    kind = kind or "job"
    smoke.check_where(nodes, cluster, kind, gpus, dry_run=dry_run)
    if dry_run:
        return _verify_manifests(variant, image, nodes, gpus, kind, json)
    s = settings()
    check_models = _models_gate(s) if models else None
    name = variant if image else pick_variant(variant)  # given with --image: checked
    with view.stage("verify", name or "image", state=s.state, verbose=verbose) as st:
        done = smoke.verify(s, variant=name, image=image, out_dir=Path(out) if out else None,
                            on_line=st.line, nodes=nodes, gpus_per_node=gpus, cluster=cluster,
                            kind=kind, on_event=st.note, check_models=check_models)
        st.done(done.record.tally, failed=done.error() is not None)
    if json:
        common.json_result(done.record)
    else:
        _say_verified(done)
    error = done.error()
    if error:
        raise error
    if not json:
        result(f"verified {done.reference}: {done.record.tally}")


def _say_verified(done) -> None:
    """Where verify's evidence, JUnit XML, node logs and attestation went, and each model's
    result, for a person."""
    result(f"evidence: {done.evidence_path}\njunit: {done.out_dir / 'junit.xml'}")
    if done.record.nodes:
        ranks = ", ".join(f"rank {f['rank']} {f['transport']}" for f in done.record.nodes)
        result(f"nodes: {done.record.node_count} ({ranks}); logs: {done.out_dir / 'logs'}")
    result(
        f"attestation: {done.attestation}"
        if done.attestation
        else "attestation: none (no signing key: set verify.signing_key or "
        "PADDLECD_SIGNING_KEY; promotion needs one)"
    )
    for m in done.record.models:
        result(f"model {m['model']}: " + ("passed" if m["passed"] else
                                          f"FAILED, {m['code']}: {m['cause']}"))


def _verify_manifests(variant, image, nodes, gpus_per_node, kind, as_json):
    """``verify --cluster k8s --dry-run``: every check's manifests as YAML (or, ``--json``, one
    JSON document) on stdout; nothing is submitted."""
    import yaml

    from paddlecd.verify import nodes_k8s
    from paddlecd.verify import run as smoke

    s = settings()
    reference = smoke.target(s, None if image else pick_variant(variant), image)
    smoke.checked_labels(s, reference, variant=variant, on_k8s=True,
                         gpus_per_node=int(gpus_per_node or 0))  # as the real run does
    docs = nodes_k8s.planned_manifests(s, reference, variant=variant or "image", nodes=nodes,
                                       gpus_per_node=int(gpus_per_node or 0), kind=kind)
    say("dry run: nothing created")
    if as_json:
        return common.json_result({"executed": False, "manifests": docs})
    result(yaml.safe_dump_all(docs, sort_keys=False))


def _models_gate(s):
    """The models gate's check verify runs (the artifacts room's loader); ConfigError when
    ``release.models`` lists none, StorageError when one is not in the store, before the suite
    runs (config.load checked each entry)."""
    from paddlecd.artifacts import gate

    if not s.release.models:
        raise ConfigError("--models: no models listed (release.models is not set)",
                          'set release.models: "name@version,name" (PADDLECD_RELEASE_MODELS)')
    gate.check_stored(s)  # each in the store before the suite runs
    return gate.check_models
