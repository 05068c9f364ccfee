"""The training job file (``train.yaml``): read, schema-checked, resolved into a frozen
:class:`JobSpec`.

The schema is ``src/paddlecd/schemas/train.schema.json`` (every key is documented there); unknown
keys are rejected with a "did you mean". After the schema, :func:`parse` rejects quantities the
engine or the API cannot take and paths that leave their mount, ``with_overrides`` holds the flags
to the schema's bounds, and :func:`check` rejects what is well-formed but impossible:
GPUs on a CPU variant, ``/dev/shm`` larger than the memory limit (a memory-backed emptyDir counts
against the container's memory), checkpoints outside every writable mount.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import secrets
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from paddlecd import files
from paddlecd import schema as validation
from paddlecd.cluster.quantity import parse_quantity
from paddlecd.errors import ConfigError

SCHEMA_PATH = "schemas/train.schema.json"
# Docker and Kubernetes carry byte counts and nano-CPUs as int64; Docker refuses memory limits
# under 6 MiB (moby daemon/daemon_unix.go linuxMinMemory); Kubernetes CPU precision is 1m.
INT64_MAX = 2**63 - 1
MIN_MEMORY = 6 * 1024 * 1024


# The training script's contract: TRAIN_*. Not PADDLECD_*, which names settings, and
# not PADDLE_*, which belongs to Paddle itself (paddle.distributed.launch reads PADDLE_JOB_ID,
# PADDLE_MASTER…; context/args_envs.py) and is left to the PaddleJob operator (render._paddlejob).
TRAIN_ENV = ("TRAIN_OUTPUT", "TRAIN_MODEL", "TRAIN_CHECKPOINT_DIR", "TRAIN_RELEASE", "TRAIN_IMAGE")
# Deprecated since 0.2, removed in 0.3: the names scripts read before TRAIN_* (README "Deploy").
DEPRECATED_TRAIN_ENV = {name: "PADDLECD_" + name.removeprefix("TRAIN_") for name in TRAIN_ENV}
# Every variable paddlecd sets on a node (render.environment, and the Indexed Job's
# JOB_COMPLETION_INDEX): a job file's env may not replace them (a trial: env TRAIN_MODEL sent
# the export outside the output mount, PADDLE_MASTER another rendezvous than the launcher's).
RESERVED_ENV = frozenset({"PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_JOB_ID", "PYTHONUNBUFFERED",
                          "HOME", "JOB_COMPLETION_INDEX", *TRAIN_ENV,
                          *DEPRECATED_TRAIN_ENV.values()})

@dataclass(frozen=True)
class Volume:
    """A mounted folder: exactly one of ``path`` (absolute host folder) or ``claim`` (PVC / Docker
    volume)."""

    mount_path: str
    path: str | None = None
    claim: str | None = None
    read_only: bool = False


@dataclass(frozen=True)
class Resources:
    """Per node: ``cpu``/``memory``/``shm`` as Kubernetes quantities (``"2"``, ``"4Gi"``), ``gpus``
    a count."""

    cpu: str = "2"
    memory: str = "4Gi"
    gpus: int = 0
    shm: str = "1Gi"


@dataclass(frozen=True)
class JobSpec:
    """A resolved job file. Field meanings: ``train.schema.json``; ``source`` is the file read."""

    name: str
    script: str
    output: Volume
    args: tuple[str, ...] = ()
    nodes: int = 1
    code: Volume | None = None
    data: Volume | None = None
    model: str = "model"
    checkpoint: str = ""
    resources: Resources = Resources()
    backoff_limit: int = 0
    active_deadline_seconds: int = 86400
    port: int = 36543
    run_as_user: int = 1000
    env: tuple[tuple[str, str], ...] = ()
    source: str = "<memory>"
    flags: tuple[str, ...] = ()  # the flags whose values replaced the file's (with_overrides)

    def with_overrides(self, *, nodes: int | None = None, gpus: int | None = None) -> JobSpec:
        """A copy with ``--nodes`` / ``--gpus-per-node`` applied (``None`` keeps the file's value).

        Raises:
            ConfigError: a value outside the schema's bounds for ``nodes`` / ``resources.gpus``.
        """
        within_schema("--nodes", nodes, "nodes")
        within_schema("--gpus-per-node", gpus, "resources", "gpus")
        res = self.resources if gpus is None else dataclasses.replace(self.resources, gpus=gpus)
        given = tuple(f for f, v in (("--nodes", nodes), ("--gpus-per-node", gpus))
                      if v is not None)
        return dataclasses.replace(
            self, nodes=self.nodes if nodes is None else nodes, resources=res,
            flags=tuple(dict.fromkeys(self.flags + given)),
        )

    def new_job_id(self) -> str:
        """The id of one submission of this job: ``<name>-<6 hex chars>``, new on every call, so
        two runs of one job file never share containers, pods or a Service (the schema bounds
        ``name`` so the id stays a DNS-1123 label of at most 63 characters, RFC 1123)."""
        return f"{self.name}-{secrets.token_hex(3)}"

    @property
    def volumes(self) -> dict[str, Volume]:
        """``{"code"|"data"|"output": Volume}`` for the mounts present, in that order."""
        return {
            k: v
            for k, v in (("code", self.code), ("data", self.data), ("output", self.output))
            if v
        }

    @property
    def model_path(self) -> str:
        """The exported model's path prefix inside the container (``/output/model``)."""
        return posixpath.join(self.output.mount_path, self.model)


def load(path: str | Path | None) -> JobSpec:
    """Read and validate job file ``path``; relative ``path:`` volumes resolve against its folder.

    Raises:
        ConfigError: missing/unreadable file, bad YAML, a schema violation (unknown key with a
            "did you mean"), or an impossible combination (see :func:`check`).
    """
    if not path:
        raise ConfigError(
            "no job file given", "pass --job path/to/train.yaml (example: examples/train.yaml)"
        )
    p = Path(path)
    data = files.read_yaml(
        p,
        what="job file",
        missing_hint="pass --job path/to/train.yaml (example: examples/train.yaml)",
        text_values=True,  # env and args become the process's text: `yes` is no `true` there
    )
    return parse(data, source=str(p), base=p.resolve().parent)


def parse(data: Any, *, source: str = "<memory>", base: Path | None = None) -> JobSpec:
    """Validate a job file already read (``dict``) into a :class:`JobSpec`. Raises ConfigError."""
    validate(data, source)
    _refuse_non_finite(data, source)
    base = base or Path.cwd()
    res = {"cpu": "2", "memory": "4Gi", "gpus": 0, "shm": "1Gi", **data.get("resources", {})}
    output = _volume(data["output"], base)
    spec = JobSpec(
        name=data["name"],
        script=_script(data),
        output=output,
        args=tuple(str(a) for a in data["command"].get("args", ())),
        nodes=data.get("nodes", 1),
        code=_volume(data.get("code"), base, read_only=True),
        data=_volume(data.get("data"), base, read_only=True),
        model=data.get("model", "model"),
        checkpoint=data.get("checkpoint") or posixpath.join(output.mount_path, "checkpoints"),
        resources=Resources(
            cpu=str(res["cpu"]),
            memory=str(res["memory"]),
            gpus=int(res["gpus"]),
            shm=str(res["shm"]),
        ),
        backoff_limit=data.get("backoffLimit", 0),
        active_deadline_seconds=data.get("activeDeadlineSeconds", 86400),
        port=data.get("port", 36543),
        run_as_user=data.get("runAsUser", 1000),
        env=tuple((k, _env_value(v)) for k, v in _own_env(data.get("env", {}), source).items()),
        source=source,
    )
    check_quantities(spec)
    check_paths(spec)
    check_strings(spec)
    return spec


# Linux's MAX_ARG_STRLEN (32 pages, include/uapi/linux/binfmts.h): execve refuses one argument
# or environment string longer than this (E2BIG, "argument list too long"), NUL included.
MAX_ARG_BYTES = 131072


def check_strings(spec: JobSpec) -> None:
    """Refuse what no process can be started with: a NUL byte in an argument or environment
    value (execve's strings end at NUL: the engine answered "invalid argument" after the job's
    network and containers were made), or one longer than :data:`MAX_ARG_BYTES` (a trial: a
    1 MB argument was printed whole in the plan, twice in the error, and failed at exec).

    Raises:
        ConfigError: naming the file, the key and the size, never quoting the value whole.
    """
    named = [(f"command.args[{i}]", a) for i, a in enumerate(spec.args)]
    named += [(f"env {k}", f"{k}={v}") for k, v in spec.env]
    named.append(("command.script", spec.script))
    for key, text in named:
        if "\0" in text:
            raise ConfigError(f"{spec.source}: {key} holds a NUL byte, which no process "
                              "argument or environment value can carry",
                              "remove it (a file path or a value read at run time can)")
        size = len(text.encode()) + 1
        if size > MAX_ARG_BYTES:
            raise ConfigError(f"{spec.source}: {key} is {size} bytes, more than the "
                              f"{MAX_ARG_BYTES} Linux allows one argument or variable "
                              "(MAX_ARG_STRLEN)",
                              "pass large inputs as a file in the code or data folder")


def _refuse_non_finite(data: dict[str, Any], source: str) -> None:
    """Refuse a YAML ``.inf``/``.nan`` (or ``1e400``, read as inf) in ``command.args`` or ``env``:
    the schema's "number" means JSON's, which has neither, and the process would get the string
    ``inf`` (a trial).

    Raises:
        ConfigError: naming the file and the key.
    """
    named = [(f"command.args[{i}]", a) for i, a in enumerate(data["command"].get("args", ()))]
    named += [(f"env {k}", v) for k, v in (data.get("env") or {}).items()]
    for key, value in named:
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{source}: {key} is {value}, not a finite number",
                              "write the number out, or quote it if the text is meant: "
                              f"\"{value}\"")


def _own_env(env: dict[str, Any], source: str) -> dict[str, Any]:
    """The job file's ``env``, refused when it names a variable paddlecd sets
    (:data:`RESERVED_ENV`).

    Raises:
        ConfigError: naming the first such key and the file.
    """
    taken = sorted(set(env) & RESERVED_ENV)
    if taken:
        raise ConfigError(f"{source}: env {taken[0]} is set by paddlecd itself",
                          "drop it from env: a script reads TRAIN_* and PADDLE_* as paddlecd sets "
                          "them (docs/guides/deploy.md)")
    return env


def within_schema(flag: str, value: int | None, *keys: str) -> None:
    """Hold a flag to the schema's ``minimum``/``maximum`` for ``keys`` (the file's own bound:
    ``train.schema.json``, e.g. ``nodes`` 1..512, ``resources.gpus`` 0..16); None passes.

    Raises:
        ConfigError: ``value`` outside the bounds, naming ``flag`` and the bounds.
    """
    if value is None:
        return
    rule = validation.load_schema("train.schema.json")
    for key in keys:
        rule = rule["properties"][key]
    low, high = rule.get("minimum"), rule.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ConfigError(
            f"{flag} {value} is outside {low}..{high} " f"(train.schema.json {'.'.join(keys)})",
            f"pass {flag} between {low} and {high}",
        )


def check_quantities(spec: JobSpec) -> None:
    """Refuse resources the container engine or the Kubernetes API cannot represent.

    Raises:
        ConfigError: cpu under 1m or finer than 1m; memory or shm not a whole number of bytes
            (``512m`` is half a byte); memory under Docker's 6 MiB; any value past int64.
    """
    r, where = spec.resources, spec.source
    cpu = parse_quantity(r.cpu)
    if cpu < Decimal("0.001") or cpu != cpu.quantize(Decimal("0.001")) or cpu * 10**9 > INT64_MAX:
        most = INT64_MAX // 10**9
        raise ConfigError(
            f"{where}: resources.cpu {r.cpu} is not between 1m and {most} cores " "in steps of 1m",
            "e.g. cpu: 2 or cpu: 500m",
        )
    for key, text in (("memory", r.memory), ("shm", r.shm)):
        size = parse_quantity(text)
        if size != int(size) or not 0 < size <= INT64_MAX:
            raise ConfigError(
                f"{where}: resources.{key} {text} is not a whole number of bytes "
                "between 1 and 2^63-1",
                "'m' means 1/1000: write Mi or Gi, e.g. 512Mi" if "m" in str(text) else
                "give a size above 0, e.g. 512Mi or 4Gi",  # a trial: the 'm' hint for a zero
            )
    if parse_quantity(r.memory) < MIN_MEMORY:
        raise ConfigError(
            f"{where}: resources.memory {r.memory} is under the engine's 6Mi minimum",
            "give the job at least 6Mi (Paddle needs far more: e.g. 4Gi)",
        )


# top-level folders of an image a mount may not replace whole (its own files live there; the
# launcher's working folder is /tmp); a folder below them (/mnt/data) is the user's to name
_IMAGE_FOLDERS = ("/tmp", "/root", "/home", "/opt", "/var", "/srv", "/mnt", "/media")


def check_paths(spec: JobSpec) -> None:
    """Refuse paths that leave their mount: a ``..`` in a mountPath, ``model``, ``checkpoint`` or a
    script relative to the code mount, a volume mounted on ``/``, and host folders that are ``/``,
    a system folder or, for the writable output, a top-level folder (files.place_problem).

    Raises:
        ConfigError: naming the key and the path.
    """
    for name, vol in spec.volumes.items():
        if ".." in vol.mount_path.split("/") or posixpath.normpath(vol.mount_path) == "/":
            raise ConfigError(
                f"{spec.source}: {name}.mountPath {vol.mount_path} must name a "
                "folder other than / without '..'",
                f"e.g. mountPath: /{name}",
            )
        # a mount over the image's own system folders (/etc, /usr…) hides what the image needs,
        # and the engine writes hostname, hosts, resolv.conf into a host folder mounted at /etc
        # (a trial: left in the user's output folder beside the model)
        inside = posixpath.normpath(vol.mount_path)
        system = next((f for f in files.SYSTEM_FOLDERS
                       if inside == f or inside.startswith(f + "/")),
                      inside if inside in _IMAGE_FOLDERS else None)
        if system:
            raise ConfigError(
                f"{spec.source}: {name}.mountPath {vol.mount_path} is over the image's "
                f"{system} folder",
                f"mount it at a folder of its own, e.g. mountPath: /{name}",
            )
    for name, vol in spec.volumes.items():
        if vol.path is not None:
            _check_host_folder(spec.source, name, vol)
    paths = {"model": spec.model, "checkpoint": spec.checkpoint, "command.script": spec.script}
    for key, path in paths.items():
        if ".." in path.split("/"):
            raise ConfigError(
                f"{spec.source}: {key} {path} leaves its mount ('..')",
                "give a path inside the mount, without '..'",
            )
    # paddle.jit.save(path) writes <path>.json / .pdiparams: "." or "x/" name no file (a trial:
    # both ranks trained, then the export failed writing /output.json beside the mount)
    leaf = spec.model.rstrip("/").rsplit("/", 1)[-1]
    # …and one the file system takes with its longest suffix (NAME_MAX 255 less
    # ".pdiparams.info": a trial's 300-character model trained, then failed to save)
    if spec.model.endswith("/") or leaf in ("", ".") or len(leaf.encode()) > 200:
        raise ConfigError(
            f"{spec.source}: model {spec.model[:80]!r} names no file under output.mountPath "
            "(a file name of 1..200 bytes)",
            "give the export's file prefix, relative to output.mountPath, e.g. model: model",
        )


def _check_host_folder(source: str, name: str, vol: Volume) -> None:
    """A host folder is never ``/`` or a system folder, and a writable one is at least two levels
    deep (``/home`` or ``/tmp`` whole is never a job's output)."""
    why = files.place_problem(str(vol.path), writable=not vol.read_only)
    if why:
        raise ConfigError(
            f"{source}: {name}.path resolves to {vol.path}, which {why}",
            f"give {name} a folder of its own, e.g. path: ./{name} (relative to the job file)",
        )


def validate(data: Any, source: str) -> None:
    """Check ``data`` against the schema; the first error becomes a one-line ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping at the top level", "see examples/train.yaml"
        )
    validation.check(
        data,
        "train.schema.json",
        source=source,
        messages={"oneOf": "give exactly one of 'path' or 'claim'"},
    )


def check(spec: JobSpec, *, gpu_variant: bool, variant: str) -> None:
    """Reject impossible resources and mounts for a run of ``spec`` on an image of ``variant``.

    Raises:
        ConfigError: GPUs on a CPU variant; shm > memory; fewer than 1 node; checkpoint not under a
            writable mount; two volumes on one mount path.
    """
    r = spec.resources
    if r.gpus and not gpu_variant:
        if "--gpus-per-node" in spec.flags:  # trial 19: the job file (gpus: 0) was named
            raise ConfigError(
                f"--gpus-per-node {r.gpus}: GPUs per node requested on the CPU variant "
                f"'{variant}'", "drop --gpus-per-node, or deploy a GPU release (e.g. 1.4.0-cu126)")
        raise ConfigError(
            f"{spec.source}: {r.gpus} GPUs per node requested on the CPU variant '{variant}'",
            "set resources.gpus to 0, or deploy a GPU release (e.g. 1.4.0-cu126)",
        )
    if parse_quantity(r.shm) > parse_quantity(r.memory):
        raise ConfigError(
            f"{spec.source}: resources.shm {r.shm} is larger than resources.memory {r.memory}",
            "/dev/shm is memory-backed and counts against the memory limit: "
            "lower shm or raise memory",
        )
    if spec.nodes < 1:
        raise ConfigError(
            f"{spec.source}: nodes must be at least 1 (got {spec.nodes})", "pass --nodes 1 or more"
        )
    # normalised: /out/./x and /out/x are one folder (a trial: rendered, then the engine's
    # "Duplicate mount point" at the real run)
    mounts = [posixpath.normpath(v.mount_path) for v in spec.volumes.values()]
    if len(set(mounts)) != len(mounts):
        raise ConfigError(
            f"{spec.source}: two volumes share one mountPath ({', '.join(mounts)})",
            "give each its own mountPath",
        )
    writable = [v.mount_path for v in spec.volumes.values() if not v.read_only]
    if not any(_under(spec.checkpoint, m) for m in writable):
        raise ConfigError(
            f"{spec.source}: checkpoint {spec.checkpoint} is not under a writable mount "
            f"({', '.join(writable)})",
            "put checkpoints under output.mountPath, or they are lost with the container",
        )


def _under(path: str, mount: str) -> bool:
    path, mount = posixpath.normpath(path), posixpath.normpath(mount)
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def _script(data: dict) -> str:
    script = data["command"]["script"]
    leaf = script.rstrip("/").rsplit("/", 1)[-1]
    if script.endswith("/") or leaf in ("", ".", ".."):  # a trial: "/" and "./" planned
        raise ConfigError(f"command.script {script[:120]!r} names a folder, not a script",
                          "give the script's file, e.g. script: train.py")
    if script.startswith("/"):
        return script
    if "code" not in data:
        raise ConfigError(
            f"command.script '{script}' is relative but no code folder is mounted",
            "give the absolute path inside the image, or mount the folder under 'code:'",
        )
    return posixpath.join(data["code"]["mountPath"], script)


def _volume(raw: dict | None, base: Path, *, read_only: bool = False) -> Volume | None:
    if raw is None:
        return None
    path = str((base / raw["path"]).resolve()) if raw.get("path") else None
    return Volume(
        mount_path=raw["mountPath"],
        path=path,
        claim=raw.get("claim"),
        read_only=bool(raw.get("readOnly", read_only)),
    )


def _env_value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)
