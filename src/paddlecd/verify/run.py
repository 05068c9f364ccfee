"""verify: run the smoke suite inside ``repo@sha256:…`` and turn its JUnit XML into evidence.

GPU variants get every card (``--gpus all``), a large ``--shm-size`` and ``--ipc=host`` (NCCL's
shared-memory transport needs them); the host driver is checked against NVIDIA's table before any
container starts. CPU variants run the collective checks on 2 processes with gloo.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecd import engine, files, git, proc
from paddlecd.cluster import jobfile
from paddlecd.cluster.render import CLUSTERS, Target
from paddlecd.config import Settings
from paddlecd.errors import ConfigError, ContainerTimeout, VerifyError
from paddlecd.files import now_iso, write_json
from paddlecd.image import candidate, variants
from paddlecd.registry import auth as registry_auth
from paddlecd.registry import client as registry
from paddlecd.registry.reference import parse_reference
from paddlecd.signing import keys
from paddlecd.types import Echo
from paddlecd.verify import (
    bandwidth,
    charts,
    drivers,
    evidence,
    figures,
    nccl,
    registry_store,
)
from paddlecd.verify import nodes as multinode
from paddlecd.verify.models import ModelResult

SMOKE_CMD = [
    "python3",
    "-m",
    "pytest",
    "/smoke",
    "-p",
    "no:cacheprovider",
    "-o",
    "junit_family=xunit1",
    "--junitxml=/out/junit.xml",
    "-q",
    "-rfE",
]


@dataclass(frozen=True)
class Verified:
    """A finished verification: ``passed``, the ``evidence`` record and the files written;
    ``attestation``: ``host/repo@sha256:…`` of the signed attestation pushed (None: no signing
    key)."""

    reference: str
    passed: bool
    record: evidence.Evidence
    evidence_path: Path
    out_dir: Path
    attestation: str | None = None

    @property
    def failed(self) -> tuple[evidence.Check, ...]:
        """The checks that did not pass."""
        return self.record.failed

    def error(self) -> VerifyError | None:
        """The failure as one error (None when every check passed): the first failed check's name
        and the first line of its message, the names of the others (one cause often fails every
        check: a missing library), and the smoke log as the hint. Used by ``invoke verify`` and
        the pipeline's verify stage alike, so both say the same."""
        if self.passed:
            return None
        failed = ""
        if self.failed:
            first, *others = self.failed
            failed = f"{first.name}: {(first.message or 'failed').splitlines()[0]}"
            if others:
                failed += f"; {len(others)} more failed: " + ", ".join(c.name for c in others)
        return VerifyError(
            f"verify failed for {self.reference}: " f"{failed or 'smoke suite exited non-zero'}",
            f"see {self.out_dir / 'smoke.log'}",
        )


# A release name as promote makes it (X.Y.Z[-pre]-<variant>, release/query.split_release_tag).
_RELEASE_NAME = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+[-.+A-Za-z0-9]*$")


def target(settings: Settings, variant: str | None, image: str | None) -> str:
    """The ``host/repo@sha256:…`` to verify: ``image`` (a tag is resolved once, here) or the
    candidate last pushed for ``variant``.

    Raises:
        ConfigError: neither given, no candidate recorded for the variant, or ``image`` names an
            image ID or a release (``1.4.0-cpu``: the hint gives its reference).
        NotFoundError: the registry lacks ``image``.
    """
    if image and "/" not in image and _RELEASE_NAME.match(image):  # Docker Hub would be asked
        raise ConfigError(
            f"--image {image} names a release, not an image (it would be looked up on Docker Hub)",
            f"verify the release's image by reference: --image {settings.release_repo}:{image}",
        )
    if image:  # an image ID where a manifest digest belongs is refused here, by the engine
        engine.refuse_image_id(parse_reference(image))
        return str(registry.pin(settings, image))
    if not variant:
        raise ConfigError(
            "nothing to verify: give --variant or --image", "e.g. invoke verify --variant cpu"
        )
    variants.get(settings, variant)
    cand = candidate.load_candidate(settings, variant)
    if not cand:
        raise ConfigError(
            f"no pushed candidate for variant '{variant}'",
            f"run: invoke build push --variant {variant}",
        )
    return cand.reference


def smoke_container(
    settings: Settings, reference: str, labels: dict[str, str], out: Path
) -> engine.ContainerSpec:
    """The smoke container for image ``reference`` with ``labels``: smoke/ read-only at /smoke,
    ``out`` at /out, the expected versions in the environment, the shm size for the device."""
    gpu = labels.get("io.paddlecd.device") == "gpu"
    # The smoke suite's contract (smoke/README.md) has its own prefix, SMOKE_*: not PADDLECD_*, so
    # nothing for the container looks like a setting; smoke/ is mounted from this
    # checkout, so both sides of the contract always change together.
    env = {
        "SMOKE_DEVICE": "gpu" if gpu else "cpu",
        "SMOKE_EXPECT_PADDLE": labels.get("io.paddlecd.paddle.version", ""),
        "SMOKE_EXPECT_CUDA": labels.get("io.paddlecd.cuda.version", ""),
        "SMOKE_EXPECT_CUDNN": labels.get("io.paddlecd.cudnn.version", ""),
        "SMOKE_CPU_RANKS": str(settings.verify.cpu_ranks),
        "SMOKE_REPEAT": str(settings.verify.repeat),  # the timed parts (smoke/_figures.py)
        "SMOKE_OUT": "/out",
        "PYTHONDONTWRITEBYTECODE": "1",
        # the suite's pytest takes its options from SMOKE_CMD only: an image's ENV must not
        # deselect a check or drop the JUnit report (a trial: PYTEST_ADDOPTS="--deselect=…"
        # verified an image whose export check never ran; pytest reads both variables)
        "PYTEST_ADDOPTS": "",
        "PYTEST_PLUGINS": "",
    }
    gpus: tuple[str, ...] | str | None = None
    if gpu:  # GPU-only: all (or the pinned) cards and host IPC for NCCL's shared-memory transport
        _, count = drivers.host_gpus()
        env["SMOKE_GPUS"] = str(count)
        # Paddle allows TF32 in cuBLAS/cuDNN by default; the 1e-5 export check needs fp32 on Ampere+
        env["NVIDIA_TF32_OVERRIDE"] = "0"
        env["NCCL_DEBUG"] = "INFO"  # the transports NCCL chose go into the evidence
        pinned = drivers.pinned_devices()  # a shared host's runner pins its cards
        gpus = tuple(pinned) if pinned else "all"
    # With --ipc=host Docker uses the host's /dev/shm and ignores --shm-size; it is kept (large) so
    # the same spec works if IPC is private.
    return engine.ContainerSpec(
        image=reference,
        command=tuple(SMOKE_CMD),
        env=env,
        workdir="/tmp",
        mounts=(
            engine.Mount(str(settings.root / "smoke"), "/smoke", read_only=True),
            engine.Mount(str(out), "/out"),
        ),
        shm_size=settings.verify.gpu_shm_size if gpu else settings.verify.shm_size,
        gpus=gpus,
        ipc="host" if gpu else None,
        keep=settings.runtime.keep,
        labels={**out_label(out), engine.OWNER: proc.owner()},
    )


def out_label(out: Path) -> dict[str, str]:
    """The label a smoke container carries for its output folder ``out``: a run killed with
    SIGKILL cannot remove its container, and the next run into the same folder finds it by this
    label and removes it before it starts (so no stale container writes into ``out``)."""
    key = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]
    return {"io.paddlecd.smoke-out": key}


def write_junit(checks: list[evidence.Check], path: Path, *, suite: str) -> Path:
    """Write ``checks`` as JUnit XML (xunit1, as pytest's ``--junitxml`` with
    ``junit_family=xunit1``: ``classname`` = ``smoke.test_<module>``, metrics as JSON-encoded
    ``<property>`` values), so :func:`parse_junit` reads back the same checks. Used for a
    multi-node run, whose checks come from the ranks' result files rather than one pytest run;
    its attestation then carries a real JUnit layer, not an empty one."""
    import json

    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(checks)),
        failures=str(sum(1 for c in checks if not c.passed)),
        skipped=str(sum(1 for c in checks if c.skipped)),
        time=f"{sum(c.duration_s for c in checks):.3f}",
    )
    for c in checks:
        module, _, test = c.name.partition("/")
        case = ET.SubElement(
            root, "testcase", classname=f"smoke.test_{module}", name=test or module,
            time=f"{c.duration_s:.3f}",
        )
        if c.metrics:
            props = ET.SubElement(case, "properties")
            for key, value in c.metrics.items():
                ET.SubElement(props, "property", name=str(key), value=json.dumps(value))
        if c.skipped:
            ET.SubElement(case, "skipped", message=c.message)
        elif not c.passed:
            ET.SubElement(case, "failure", message=c.message).text = c.message
    files.write_text(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
    return path


def parse_junit(path: Path) -> list[evidence.Check]:
    """Checks from a pytest JUnit XML (xunit1): one per test case, with its JSON-decoded properties
    as ``metrics``; skipped cases are reported with ``skipped=True`` and count as passed."""
    import json

    checks = []
    for case in ET.parse(path).iter("testcase"):
        problem = next(
            (case.find(t) for t in ("failure", "error") if case.find(t) is not None), None
        )
        metrics = {}
        for prop in case.iter("property"):
            try:
                metrics[prop.get("name")] = json.loads(prop.get("value", "null"))
            except ValueError:
                metrics[prop.get("name")] = prop.get("value")
        module = (case.get("classname") or "").rsplit(".", 1)[-1].removeprefix("test_")
        message = (problem.get("message") or "")[:2000] if problem is not None else ""
        checks.append(
            evidence.Check(
                name=f"{module}/{case.get('name')}",
                passed=problem is None,
                skipped=case.find("skipped") is not None,
                duration_s=float(case.get("time") or 0),
                metrics=metrics,
                message=message,
            )
        )
    return checks


def nccl_transports(out: Path) -> tuple[str, ...]:
    """The NCCL transports logged in the worker logs of the collective checks
    (smoke/workers/collective.py) that the smoke suite kept in ``out``."""
    lines = (
        line
        for log in sorted(out.glob("collective.workerlog.*"))
        for line in log.read_text(errors="replace").splitlines()
    )
    return nccl.transports(lines)


def warnings(checks: list[evidence.Check]) -> tuple[str, ...]:
    """One line per check that is neither pass nor fail (a busbw with no expectation, one card)."""
    return tuple(
        f"{c.name}: {c.message}"
        for c in checks
        if c.skipped and c.name == bandwidth.CHECK_NAME and c.message
    )


def verify(
    settings: Settings,
    *,
    variant: str | None = None,
    image: str | None = None,
    out_dir: Path | None = None,
    on_line: Echo | None = None,
    nodes: int = 1,
    gpus_per_node: int | None = None,
    cluster: str = "local",
    kind: str = "job",
    on_event: Echo | None = None,
    check_models: Callable[..., tuple[ModelResult, ...]] | None = None,
) -> Verified:
    """Verify one image by digest and store its evidence.

    Args:
        nodes: 1 runs the whole smoke suite in one container; N > 1 runs the collective checks as
            an N-node job (:mod:`paddlecd.verify.nodes`), its evidence listing every node.
        gpus_per_node: cards per node of an N-node GPU run (default: the host's cards / N; with
            ``cluster="k8s"`` required for a GPU variant, the host's cards being irrelevant).
        cluster: where an N-node job runs: ``local`` (containers) or ``k8s`` (the kubeconfig's
            cluster, :mod:`paddlecd.verify.nodes_k8s`; the image's labels are read from the
            registry, no local engine is used). kind: ``job`` or ``paddlejob`` (k8s only).
        on_event: lifecycle lines of an N-node run (created, pod phases, removed).
        check_models: checks each model of ``release.models`` in the image
            (:func:`paddlecd.artifacts.gate.check_models`, called as ``(settings, reference,
            on_line=…)``); its results go into the evidence (``models``). None: no models gate.

    Returns:
        :class:`Verified`; ``passed`` is False when any check failed (the caller decides the exit).

    Raises:
        ConfigError: no target, ``nodes`` < 1 or ``nodes``/``gpus_per_node`` past the job
            schema's bounds, an unknown cluster or kind, ``k8s`` with one node, or a GPU
            variant on ``k8s`` without ``gpus_per_node``. RegistryError: the digest cannot be
            pulled. ClusterError: the kubeconfig or API server is unusable, or a manifest was
            refused. VerifyError: GPU image on a host without a suitable driver, or the smoke
            suite could not run at all (no JUnit written). SigningKeyError: a signing key is
            configured but unusable (checked before the run).
    """
    on_k8s = check_where(nodes, cluster, kind, gpus_per_node)
    reference = target(settings, variant, image)
    if image and "@" not in image and on_line:  # a tag is resolved once, and said so
        on_line(f"resolved {image} to {reference}")
    if keys.configured(settings):
        keys.signer(settings)  # a bad signing key fails now, not after the smoke suite ran
    labels = checked_labels(settings, reference, variant=variant, on_k8s=on_k8s,
                            gpus_per_node=gpus_per_node)
    driver = _driver(reference, labels, on_k8s=on_k8s)
    out = _out_folder(settings, reference, labels, out_dir=out_dir, nodes=nodes)
    started = time.monotonic()
    ok, checks, facts, transports = _run_staged(
        settings, reference, labels, out, nodes=nodes, cluster_k8s=on_k8s, kind=kind,
        gpus_per_node=gpus_per_node, driver=driver, on_line=on_line, on_event=on_event)
    checked = check_models(settings, reference, on_line=on_line) if check_models else ()
    driver = driver or next((f["driver"] for f in facts if f.get("driver")), None)  # GPU-only
    return _record(settings, reference, labels, out, nodes=nodes, ok=ok, checks=checks,
                   facts=facts, transports=transports, driver=driver,
                   seconds=time.monotonic() - started, models=checked)


def checked_labels(settings: Settings, reference: str, *, variant: str | None, on_k8s: bool,
                   gpus_per_node: int | None) -> dict[str, str]:
    """The labels of ``reference`` (from the registry on k8s, else the pulled image), once the
    options fit them (:func:`_check_labels`); ``verify --cluster k8s --dry-run`` asks this too (a
    trial: it printed manifests asking cards for a CPU image, which the real run refuses).

    Raises:
        ConfigError: an option the labels contradict. RegistryError, EngineError: no labels.
    """
    labels = _labels(settings, reference, pull=not on_k8s)
    _check_labels(reference, labels, variant=variant, on_k8s=on_k8s, gpus_per_node=gpus_per_node)
    return labels


def _check_labels(reference: str, labels: dict[str, str], *, variant: str | None,
                  on_k8s: bool, gpus_per_node: int | None) -> None:
    """Refuse options the image's labels contradict (ConfigError): a GPU image on k8s without
    ``--gpus-per-node``, another variant than ``variant``, cards for a CPU image."""
    if on_k8s and labels.get("io.paddlecd.device") == "gpu" and not gpus_per_node:
        raise ConfigError(
            f"{reference} is a GPU image: --cluster k8s needs --gpus-per-node",
            "pass the cards each pod gets, e.g. --gpus-per-node 8",
        )
    if variant and labels.get("io.paddlecd.variant") not in (None, variant):
        raise ConfigError(
            f"{reference} is variant '{labels['io.paddlecd.variant']}', not '{variant}'",
            "check --image, or drop --variant (the image's label names its variant)",
        )
    if gpus_per_node and labels.get("io.paddlecd.device") != "gpu":
        raise ConfigError(
            f"--gpus-per-node {gpus_per_node}: {reference} is not a GPU image "
            f"(io.paddlecd.device={labels.get('io.paddlecd.device', 'unset')})",
            "drop --gpus-per-node for a CPU image (its ranks are processes: verify.cpu_ranks)",
        )


def _driver(reference: str, labels: dict[str, str], *, on_k8s: bool) -> str | None:
    """The host driver a local GPU image needs (None: a CPU image, or k8s), checked before any
    container starts; the toolkit's own rule on the image's NVIDIA_REQUIRE_CUDA, read from its
    config."""
    if labels.get("io.paddlecd.device") != "gpu" or on_k8s:
        return None
    cuda, env = labels.get("io.paddlecd.cuda.version", ""), engine.image_env(reference)
    return drivers.require_for(cuda, env).driver


def _out_folder(settings: Settings, reference: str, labels: dict[str, str], *,
                out_dir: Path | None, nodes: int) -> Path:
    """The folder the run's evidence goes to; ``--out`` must be new or empty (ConfigError)."""
    digest = reference.split("@", 1)[1]
    name = f"{labels.get('io.paddlecd.variant', 'image')}-{digest[7:19]}"
    out = out_dir or settings.state / "verify" / (name if nodes == 1 else f"{name}-{nodes}nodes")
    if out_dir and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(
            f"--out {out_dir} is not empty",
            "give a new or empty folder: verify writes and replaces files there",
        )
    return out


def _run_staged(settings: Settings, reference: str, labels: dict[str, str], out: Path,
                **options: Any) -> tuple[bool, list[evidence.Check], tuple, Any]:
    """:func:`_run_suite` into a folder of its own beside ``out``, which replaces ``out`` only
    once the suite has run: a run that cannot start leaves the previous run's folder whole."""
    stage = staging_folder(out)
    try:
        result = _run_suite(settings, reference, labels, stage, key=out, **options)
    except VerifyError as e:
        kept = _keep_smoke_log(settings, stage, out)
        shutil.rmtree(stage, ignore_errors=True)
        if kept is None:
            raise
        raise VerifyError(e.cause, (e.hint or "").replace(str(stage / "smoke.log"), str(kept))
                          ) from e
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    replace_folder(out, stage)
    return result


def _keep_smoke_log(settings: Settings, stage: Path, out: Path) -> Path | None:
    """The smoke log of a run that failed before its folder replaced ``out``, moved to
    ``<state>/logs`` (the staging folder goes; a trial: the hint named its smoke.log, deleted by
    then), or None when there is none or it cannot be kept."""
    log = stage / "smoke.log"
    if not log.is_file():
        return None
    kept = settings.state / "logs" / f"smoke-{out.name}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(log), kept)
    except OSError:
        return None
    return kept


def _run_suite(settings: Settings, reference: str, labels: dict[str, str], out: Path, *,
               key: Path, nodes: int, cluster_k8s: bool, gpus_per_node: int | None, kind: str,
               driver: str | None, on_line: Echo | None, on_event: Echo | None,
               ) -> tuple[bool, list[evidence.Check], tuple, Any]:
    """Run the smoke suite into ``out`` (one container, or ``nodes`` local containers or pods);
    ``key`` is the folder the run is for (its containers' label). Returns ``(exited 0, checks,
    per-node facts, NCCL transports)``."""
    if nodes == 1:
        ok, checks = _one_container(settings, reference, labels, out, on_line, key=key)
        return ok, checks, (), nccl_transports(out)
    on_line, on_event = on_line or _quiet, on_event or on_line or _quiet
    run_on = Target(
        reference=reference,
        variant=labels.get("io.paddlecd.variant") or "image",
        revision=git.revision(settings.root).full,
    )
    if cluster_k8s:
        # the kubernetes client (half a second of imports) loads only for k8s runs
        from paddlecd.verify import nodes_k8s

        gpus = int(gpus_per_node or 0) if labels.get("io.paddlecd.device") == "gpu" else 0
        ran = nodes_k8s.run_k8s(settings, run_on, nodes=nodes, gpus_per_node=gpus, out=out,
                                on_event=on_event, on_line=on_line, kind=kind)
    else:
        gpus = 0 if not driver else gpus_per_node or drivers.host_gpus()[1] // nodes  # GPU-only
        ran = multinode.run_local(settings, run_on, nodes=nodes, gpus_per_node=gpus, out=out,
                                  on_line=on_line)
    files.write_text(out / "smoke.log", "\n".join(ran.lines) + "\n")
    return True, list(ran.checks), ran.facts, ran.transports


def _record(settings: Settings, reference: str, labels: dict[str, str], out: Path, *,
            nodes: int, ok: bool, checks: list[evidence.Check], facts: tuple, transports: Any,
            driver: str | None, seconds: float, models: tuple = ()) -> Verified:
    """The evidence of a run whose files are in ``out``: judged (busbw on GPU), saved (by digest
    for one container, in ``out`` for N nodes), signed and attached, summarised."""
    if driver:  # GPU-only: busbw against the expectation table
        checks.append(
            bandwidth.check(
                checks, fraction=settings.verify.busbw_fraction, nodes=nodes, transports=transports
            )
        )
    if nodes > 1:  # no single pytest run wrote one: the ranks' checks become the junit layer
        write_junit(checks, out / "junit.xml", suite=f"paddlecd verify --nodes {nodes}")
    digest = reference.split("@", 1)[1]
    record = evidence.Evidence(
        digest=digest,
        reference=reference,
        variant=labels.get("io.paddlecd.variant"),
        passed=ok and all(c.passed for c in checks) and bool(checks),
        warnings=warnings(checks) + tuple(f"model {m.model}: {m.code}: {m.cause}"
                                          for m in models if not m.passed),
        nodes=facts,
        models=tuple(m.to_json() for m in models),
        hardware=figures.hardware_of(checks),
        figures=tuple(f.to_json(hardware=False) for f in figures.collect(checks)),
        created=now_iso(),
        duration_s=round(seconds, 3),
        checks=tuple(checks),
        versions={
            "paddle": labels.get("io.paddlecd.paddle.version"),
            "cuda": labels.get("io.paddlecd.cuda.version"),
            "cudnn": labels.get("io.paddlecd.cudnn.version"),
            "driver": driver,
        },
        revision=labels.get("org.opencontainers.image.revision"),
        junit=str(out / "junit.xml"),
        model_dir=str(out / "model") if (out / "model").exists() else None,
    )
    # A multi-node run holds only the collective checks: it is kept in its folder and signed,
    # never stored over the digest's one-container evidence.
    path = (
        evidence.save(settings, record)
        if nodes == 1
        else write_json(out / "evidence.json", record.to_json())
    )
    # Every run, passing or not, is signed and attached to the digest in the registry
    att = (registry_store.publish(settings, record, out).location
           if keys.configured(settings) else None)
    write_summary(record, out, attestation=att)
    return Verified(
        reference=reference,
        passed=record.passed,
        record=record,
        evidence_path=path,
        out_dir=out,
        attestation=att,
    )


def staging_folder(out: Path) -> Path:
    """A new, empty, world-writable folder beside ``out`` (the smoke suite runs as the image's
    non-root user) for one run into ``out``; those of runs that were killed are removed first."""
    out.parent.mkdir(parents=True, exist_ok=True)
    files.sweep_killed(out.parent, out.name)
    stage = out.parent / f".{out.name}.{os.getpid()}.run"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    stage.chmod(0o777)
    return stage


def replace_folder(out: Path, stage: Path) -> None:
    """Put ``stage`` in the place of ``out`` (a previous run's folder goes)."""
    old = out.parent / f".{out.name}.{os.getpid()}.old"
    if out.exists():
        out.rename(old)
    stage.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _quiet(_: str) -> None:
    pass


def check_where(nodes: int, cluster: str, kind: str, gpus_per_node: int | None = None, *,
                dry_run: bool = False) -> bool:
    """The one check of verify's options (the task's and :func:`verify`'s): True for a
    Kubernetes run; raises ConfigError for a combination that cannot run (``dry_run`` is for
    ``k8s`` only: nothing else has manifests to show), and for ``nodes`` / ``gpus_per_node``
    outside the job schema's bounds (the ones deploy holds to)."""
    if cluster not in CLUSTERS:
        raise ConfigError(f"--cluster {cluster}: not a cluster kind",
                          f"use --cluster {' or '.join(CLUSTERS)}")
    if dry_run and cluster != "k8s":
        raise ConfigError("--dry-run is for --cluster k8s", "drop --dry-run, or add --cluster k8s")
    if nodes < 1:
        raise ConfigError(f"--nodes {nodes}: a run needs at least 1 node", "pass --nodes 1 or more")
    jobfile.within_schema("--nodes", nodes, "nodes")
    jobfile.within_schema("--gpus-per-node", gpus_per_node, "resources", "gpus")
    if kind not in ("job", "paddlejob"):
        raise ConfigError(f"--kind {kind}: not a job kind", "use --kind job or paddlejob")
    if cluster == "k8s" and nodes < 2:
        raise ConfigError(
            f"--cluster k8s with --nodes {nodes}: the cluster runs the collective checks only",
            "pass --nodes 2 or more (one node: the whole suite in one local container)",
        )
    if kind == "paddlejob" and cluster != "k8s":
        raise ConfigError("--kind paddlejob runs only with --cluster k8s", "drop --kind")
    return cluster == "k8s" and nodes > 1


def _labels(settings: Settings, reference: str, *, pull: bool) -> dict[str, str]:
    """The image's labels: pulled and inspected on the engine (``pull``, the image runs here),
    else read from the registry's config blob (a cluster pulls it, not this machine)."""
    if pull:
        engine.pull(reference, credentials=registry_auth.engine_credentials(settings, reference))
        return engine.image_labels(reference)
    client, ref = registry.open_reference(settings, reference)
    return client.image_labels(ref.repository, str(ref.digest))


def _one_container(
    settings: Settings, reference: str, labels: dict[str, str], out: Path, on_line: Echo | None,
    *, key: Path,
) -> tuple[bool, list[evidence.Check]]:
    """The whole smoke suite in one container writing into ``out``: (exited 0, its checks from
    the JUnit XML). ``key``: the folder the run is for, whose label its container carries."""
    busy = engine.live_owners(out_label(key))
    if busy:  # a trial: a second verify of the digest removed the first's live container
        raise VerifyError(f"another verify is writing into {key} now (process {busy[0]})",
                          "wait for it to end, or give this run its own --out folder")
    for name in engine.remove_orphans(out_label(key)):
        (on_line or _quiet)(f"removed {name}: left running into {key} by a killed run")
    spec = smoke_container(settings, reference, labels, out)
    with engine.container(dataclasses.replace(spec, labels={**spec.labels, **out_label(key)})) as c:
        try:
            finished = engine.wait(c, timeout=settings.verify.timeout, on_line=on_line)
        except ContainerTimeout as e:  # a trial: "container blissful_solomon did not finish
            # within 10s", exit 4, no log: the smoke suite's own failure, with its output
            files.write_text(out / "smoke.log", e.logs + "\n")
            raise VerifyError(
                f"the smoke suite in {reference} did not finish within "
                f"{settings.verify.timeout}s (verify.timeout); its container was stopped",
                f"raise verify.timeout (PADDLECD_VERIFY_TIMEOUT); its output until then: "
                f"{out / 'smoke.log'}") from e
    files.write_text(out / "smoke.log", finished.logs)
    if not (out / "junit.xml").exists():  # the log holds the output; the hint stays one line
        last = next((line for line in reversed(finished.logs.splitlines()) if line.strip()), "")
        raise VerifyError(
            f"the smoke suite wrote no junit.xml in {reference} (container exit "
            f"{finished.exit_code}; last line: {last[:160]!r})",
            f"see {out / 'smoke.log'}",
        )
    try:
        checks = parse_junit(out / "junit.xml")
    except ET.ParseError as e:
        raise VerifyError(
            f"the smoke suite's {out / 'junit.xml'} is not valid XML ({e})",
            f"the run was cut short; see {out / 'smoke.log'}",
        ) from e
    missing = not_run(settings, checks, gpu=labels.get("io.paddlecd.device") == "gpu")
    return finished.exit_code == 0 and not missing, checks + missing


def not_run(settings: Settings, checks: list[evidence.Check], *, gpu: bool
            ) -> list[evidence.Check]:
    """A failed check for each test of ``smoke/`` (:func:`paddlecd.verify.suite.read`) that the
    run's report does not hold: deselected or not collected, so it proved nothing (a skip is
    reported, and stays a skip). Parametrized cases (``test_x[2]``) count for ``test_x``."""
    from paddlecd.verify import suite

    reported = {c.name.split("[", 1)[0] for c in checks}
    return [evidence.Check(name=c.name, passed=False,
                           message="not run: the report has no such case (deselected or not "
                                   "collected in the image)")
            for c in suite.read(settings.root / "smoke", gpu=gpu) if c.name not in reported]


def write_summary(record: evidence.Evidence, out: Path, *, attestation: str | None = None) -> str:
    """Markdown summary of a verification, written to ``out/summary.md`` and appended to
    ``$GITHUB_STEP_SUMMARY`` under GitHub Actions; returns the text."""
    icon = {True: "✅", False: "❌"}
    lines = [
        f"### {icon[record.passed]} verify `{record.variant}` `{record.digest[:19]}…`",
        "",
        "| check | result | seconds |",
        "|---|---|---|",
    ]
    for c in record.checks:
        result = "skipped" if c.skipped else icon[c.passed]
        lines.append(f"| {c.name} | {result} | {c.duration_s:.2f} |")
    if record.warnings:
        lines += ["", *(f"- ⚠️ {w}" for w in record.warnings)]
    for chart in charts.charts(record):
        lines += ["", chart]
    if attestation:
        # host/repo@sha256:… of a referrer, or host/repo:sha256-<hex>.att@sha256:… (cosign's tag)
        image = f"{attestation.split('@')[0].split(':sha256-')[0]}@{record.digest}"
        lines += ["", f"attestation: `{attestation}` (`invoke evidence.show {image}`)"]
    text = "\n".join(lines) + "\n"
    files.write_text(out / "summary.md", text)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as fh:
            fh.write(text)
    return text
