"""Time stamps, the actor, JSON and YAML files, paddlecd's own environment variables: small
helpers every room that records shares.

Records written here are read by other processes (a resumed pipeline, promotion on another machine),
so writes are atomic: a temp file in the same folder, then a rename (POSIX ``rename(2)``), and a
reader never sees half a record.
"""

from __future__ import annotations

import datetime as dt
import errno
import getpass
import json
import os
import re
import socket
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

from paddlecd.errors import ConfigError, PaddlecdError, quoted

Timespec = Literal["seconds", "milliseconds"]

# libyaml's loader where PyYAML was built with it (the PyPI wheels are): the same documents and
# errors as yaml.SafeLoader, ~8x faster on images/variants.yaml (8 ms -> 1 ms; read twice per
# build+push: benchmarks/bench_build_push.py --profile).
_YAML_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _YAML_LOADER(_YAML_BASE):  # noqa: N801 (a loader class, named as the constant it replaces)
    """The safe loader, refusing a mapping that repeats a key: YAML 1.2 §3.2.1.1 says keys are
    unique, and PyYAML silently keeps the last one (yaml/pyyaml#41)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:bool" and not _YAML_12_BOOL.fullmatch(
                    key_node.value):  # a key `on:` is text, as YAML 1.2 (and GitHub) read it
                key_node.tag = "tag:yaml.org,2002:str"
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` then overrides: allowed
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if repeated:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"duplicate key '{key}'",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """A whole number written in decimal; YAML 1.1's other forms are refused (a trial: job
        args ``[0x1F, 1_0, 017, 12:30:00]`` reached the process as ``31 10 15 45000``): YAML 1.2
        reads ``017`` as 17 and the rest as text, PyYAML as hex, octal, base 60."""
        _decimal_only(node, _DECIMAL_INT, "whole number")
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        """A decimal number (or ``.inf``/``.nan``); YAML 1.1's ``1_000.5`` and ``1:30.5`` are
        refused as :meth:`construct_yaml_int` says."""
        _decimal_only(node, _DECIMAL_FLOAT, "number")
        return super().construct_yaml_float(node)


_YAML_12_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_DECIMAL_FLOAT = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?"
                            r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


def _decimal_only(node: yaml.ScalarNode, form: re.Pattern[str], what: str) -> None:
    if not form.fullmatch(node.value):
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value[:40]!r} is a {what} in YAML 1.1's hex, octal, base-60 or "
            "'_' form, which tools read differently: write it in decimal, or quote it for the "
            "text", node.start_mark)


_YAML_LOADER.add_constructor("tag:yaml.org,2002:int", _YAML_LOADER.construct_yaml_int)
_YAML_LOADER.add_constructor("tag:yaml.org,2002:float", _YAML_LOADER.construct_yaml_float)


class _TEXT_LOADER(_YAML_LOADER):  # noqa: N801 (as _YAML_LOADER)
    """:class:`_YAML_LOADER` for files whose values become text (a job file's ``env`` and
    ``args``): YAML 1.1's ``yes``/``no``/``on``/``off`` as a value are refused (a trial: job env
    ``FLAG: yes`` reached the process as ``true``), and a number's ``str()`` is its text as
    written (``0.10`` stays ``0.10``). Settings keep ``yes``: ``keep: yes`` is a switch, meant
    as one."""

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        """``true`` or ``false``; ``yes``, ``on``… refused as the class says."""
        if not _YAML_12_BOOL.fullmatch(node.value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value[:40]!r} is true or false in YAML 1.1, which tools read "
                "differently: write true or false, or quote it for the text", node.start_mark)
        return super().construct_yaml_bool(node)


    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """A whole number whose ``str()`` is the text as written (``+5`` stays ``+5``)."""
        return _written(super().construct_yaml_int(node), node.value, _WrittenInt)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        """A number whose ``str()`` is the text as written (a trial: job args ``[--lr, 0.10]``
        and ``1.0e-3`` reached the script as ``0.1`` and ``0.001``)."""
        return _written(super().construct_yaml_float(node), node.value, _WrittenFloat)


class _WrittenInt(int):
    """An int read from a job file, printed as the file wrote it (``str``); a number otherwise."""

    text: str

    def __str__(self) -> str:
        return self.text


class _WrittenFloat(float):
    """A float read from a job file, printed as the file wrote it (``str``); a number otherwise."""

    text: str

    def __str__(self) -> str:
        return self.text


def _written(number: Any, text: str, kind: type) -> Any:
    """``number`` as is when ``str()`` already gives ``text``, else as ``kind`` remembering it."""
    if str(number) == text:
        return number
    out = kind(number)
    out.text = text
    return out


_TEXT_LOADER.add_constructor("tag:yaml.org,2002:bool", _TEXT_LOADER.construct_yaml_bool)
_TEXT_LOADER.add_constructor("tag:yaml.org,2002:int", _TEXT_LOADER.construct_yaml_int)
_TEXT_LOADER.add_constructor("tag:yaml.org,2002:float", _TEXT_LOADER.construct_yaml_float)


def expanded_size(doc: Any, cap: int) -> int:
    """About how many bytes ``doc`` takes written out with every alias expanded (each scalar's
    text, each key, 1 per container), counted until past ``cap``: PyYAML makes an alias the same
    object, so a small file can stand for a huge document (a trial: 82 KB of job file printed
    40 MB of manifests; "billion laughs"). At most ``cap`` visits: bounded time."""
    total, todo = 0, [doc]
    while todo and total <= cap:
        item = todo.pop()
        total += 1
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
        elif isinstance(item, (str, bytes)):
            total += len(item)
        else:
            total += 8
    return total


def load_yaml(text: str, *, text_values: bool = False) -> Any:
    """``yaml.safe_load(text)`` through libyaml when available (see ``_YAML_LOADER``); with
    ``text_values`` YAML 1.1's ``yes``/``on``… are refused too (``_TEXT_LOADER``).

    Raises:
        yaml.YAMLError: as ``yaml.safe_load`` (``MarkedYAMLError`` carries ``problem_mark``).
    """
    return yaml.load(text, Loader=_TEXT_LOADER if text_values else _YAML_LOADER)


class _BlockDumper(yaml.SafeDumper):
    """The safe dumper, with multi-line strings (PEM keys, scripts) as ``|`` blocks."""


_BlockDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def dump_yaml(doc: Any) -> str:
    """``doc`` as YAML in its own key order, multi-line strings as literal blocks (a PEM key reads
    as it does in a .pub file)."""
    return yaml.dump(doc, Dumper=_BlockDumper, sort_keys=False)


# Folders of the operating system (FHS 3.0) and the engines' state: nothing paddlecd mounts into a
# container (which runs as root inside) or writes into as a store may be in them. /var's own
# (FHS 3.0 ch. 5): logs, spools (cron, mail), backups, and the package managers', init
# system's and container runtimes' state in /var/lib (a trial: output.path /var/log and
# /var/spool/cron were accepted; /var/lib as a whole is below, other /var/lib/<program> folders
# are programs' own, as /var/cache/<program> is: Jenkins workspaces live in /var/lib/jenkins).
SYSTEM_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                  "/run", "/sbin", "/sys", "/usr", "/var/run", "/var/lock", "/var/log",
                  "/var/spool", "/var/mail", "/var/backups", "/var/lib/docker",
                  "/var/lib/containers", "/var/lib/containerd", "/var/lib/kubelet",
                  "/var/lib/dpkg", "/var/lib/apt", "/var/lib/systemd")

# Folders of system state whose subfolders belong to programs: refused as a whole (a trial:
# output.path /var/lib wrote the model beside every program's state), fine below.
STATE_FOLDERS = ("/var", "/var/lib")


NO_SPACE = "no space left on the device"  # ENOSPC or EDQUOT, never worded as a permissions problem


def disk_full(e: BaseException | None) -> bool:
    """Whether ``e`` is a write that failed for space: ``ENOSPC`` (the device) or ``EDQUOT`` (the
    user's quota), which every room words the same way (:data:`NO_SPACE`, :func:`free_space`)."""
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


def free_space(path: str | Path) -> str:
    """The hint for a full disk at ``path``: where to look (``df -h`` of ``path``, or of its
    nearest folder that exists: trial 21's hint named a file the failed write had removed, and
    the df it printed failed), and that a re-run completes."""
    there = next((p for p in (Path(path), *Path(path).parents) if p.exists()), Path("/"))
    return f"free space there (df -h {there}), then re-run"


def os_error_text(e: OSError) -> tuple[str, str]:
    """``(cause, hint)`` for a file operation that failed: the path, and what to do for the
    usual reasons (a full disk is not a permissions problem)."""
    where = f": {e.filename}" if e.filename else ""
    if disk_full(e):
        # no file named: "df -h ." pointed at the working folder, which had room (a trial)
        return f"{NO_SPACE}{where}", (free_space(e.filename) if e.filename else
                                      "free space on the full disk (df -h lists them), then re-run")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{e.strerror}{where}", "check the path and its permissions"
    if e.filename and e.errno in (errno.EEXIST, errno.ENOTDIR):
        # a folder was to be made where a file is, or below one: name the file (a trial: "File
        # exists: /tmp/x/sub.yaml" for a sub.yaml that does not exist, /tmp/x being a file)
        blocker = next((p for p in (Path(e.filename), *Path(e.filename).parents)
                        if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            return (f"{blocker} is a file, not a folder (in the path {e.filename})",
                    "give a path whose folders are folders, or move the file")
    return f"{e.strerror or e}{where}", "check the path"


# Folders that hold users' keys and credentials (~/.docker/config.json, ~/.ssh): never a job's
# folder as a whole, read-only or not (a trial: code.path: /root handed every rank root's keys).
HOME_FOLDERS = ("/root", "/home")

# The credential folders of a home (OpenSSH, GnuPG, the Docker CLI, the AWS CLI, kubectl, the
# Azure CLI, gcloud): never a job's folder, a store or a state folder, nor anything inside them
# (a trial: output.path /root/.ssh, file:///root/.docker/m and PADDLECD_STATE_DIR=/root/.ssh
# were accepted).
CREDENTIAL_FOLDERS = (".ssh", ".gnupg", ".docker", ".aws", ".kube", ".azure", ".config/gcloud")


def _credential_folder(path: PurePosixPath) -> str | None:
    """The credential folder of a home that ``path`` is or is inside (``/root/.ssh``,
    ``/home/ada/.aws``), or None."""
    parts = path.parts
    homes = [PurePosixPath(*parts[:2])] if parts[1:2] == ("root",) else []
    if parts[1:2] == ("home",) and len(parts) > 2:
        homes.append(PurePosixPath(*parts[:3]))
    for home in homes:
        for name in CREDENTIAL_FOLDERS:
            if path.is_relative_to(home / name):
                return str(home / name)
    return None


def place_problem(path: str, *, writable: bool) -> str | None:
    """Why absolute ``path`` is no place for a job's folder or a store, or None when it is fine:
    ``/`` itself, a system folder (:data:`SYSTEM_FOLDERS`) or one inside it, ``/var`` or
    ``/var/lib`` as a whole (:data:`STATE_FOLDERS`), a home folder as a whole
    (:data:`HOME_FOLDERS`), a home's credential folder or one inside it
    (:data:`CREDENTIAL_FOLDERS`), and when paddlecd writes there (``writable``) any top-level
    folder as a whole (``/tmp``, ``/srv``)."""
    pure = PurePosixPath(path)
    parts = pure.parts
    system = next((f for f in SYSTEM_FOLDERS if pure.is_relative_to(f)), None)
    if len(parts) < 2:
        return "is the root folder"
    if system:
        return f"is inside the system folder {system}"
    if str(pure) in STATE_FOLDERS:
        return "is a folder of system state as a whole (other programs' files)"
    if str(pure) in HOME_FOLDERS:
        return "is a home folder as a whole (users' keys and credentials)"
    credentials = _credential_folder(pure)
    if credentials:
        return f"is inside the credential folder {credentials}"
    if writable and len(parts) < 3:
        return "is a top-level folder"
    return None


def refuse_foreign_file(path: str | Path, flag: str, *, ours: Callable[[bytes], bool],
                        what: str) -> None:
    """Refuse to replace a file at ``path`` that this command did not write before: ``ours``
    judges its first 4 KiB (a trial: ``release.policy --out <the private signing key>``
    replaced the key with a policy, exit 0). A missing path, or a file ``ours`` accepts (the
    last run's output), passes.

    Raises:
        ConfigError: naming ``flag``, the path and ``what`` would be written there.
    """
    target = Path(path)
    if target.exists() and not target.is_file() and not target.is_dir():  # a trial: a FIFO at
        raise ConfigError(f"{flag} {target} is {kind_of(target)}, not a file",  # --out, replaced
                          f"give another path: paddlecd replaces only a {what} it wrote before")
    if not target.is_file():
        return
    try:
        with open(target, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return  # the write names it
    if not ours(head):
        raise ConfigError(f"{flag} {target} exists and is no {what}",
                          f"give another path, or remove the file: paddlecd replaces only a {what} "
                          "it wrote before")


def refuse_control(path: str | Path, flag: str) -> None:
    """Refuse an output path holding a control character (a trial: an ESC in --out made such a
    file and reached the terminal of whoever listed it).

    Raises:
        ConfigError: naming ``flag`` and the character (escaped).
    """
    from paddlecd.errors import ConfigError

    control = next((c for c in str(path) if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise ConfigError(f"{flag} holds the control character {control!r}",
                          "name the output without control characters")


def refuse_output_place(path: str | Path, flag: str, *, folder: bool,
                        example: str | None = None) -> None:
    """Refuse an output the user named (``--out``) that lands on ``/``, in a system folder
    (:data:`SYSTEM_FOLDERS`) or, for a whole ``folder`` paddlecd fills, a top-level folder; the
    rule :func:`place_problem` applies to job folders and stores. A file is judged by the folder
    it goes in (``/tmp/policy.yaml`` is fine, ``/etc/policy.yaml`` is not).

    Raises:
        ConfigError: naming ``flag``, the path as resolved (symlinks and ``..`` followed) and why;
            the hint's ``example`` is the caller's (default ``./out`` or ``./policy.yaml``).
    """
    from paddlecd.errors import ConfigError

    refuse_control(path, flag)
    resolved = Path(os.path.abspath(path)).resolve()
    if not folder and str(path).endswith(("/", "/.")):  # a trial: --out /tmp/new/ wrote a
        raise ConfigError(f"{flag} {path} names a folder (it ends in '/'), not a file",  # file
                          "name the file to write, e.g. " + (example or "./policy.yaml"))
    if not folder and resolved.is_dir():  # a trial: --out /tmp said "/ is the root folder"
        raise ConfigError(f"{flag} {path} is a folder, not a file",
                          "name the file to write, e.g. " + (example or "./policy.yaml"))
    where = resolved if folder else resolved.parent
    why = place_problem(str(where), writable=folder)
    if why:
        raise ConfigError(f"{flag} {path}: {where} {why}",
                          "write it to a folder of the project's or yours, e.g. "
                          + (example or ("./out" if folder else "./policy.yaml")))


def now_iso(timespec: Timespec = "seconds") -> str:
    """The current UTC time as ISO-8601 with a ``Z`` suffix.

    Args:
        timespec: ``"seconds"`` (``2025-01-31T12:00:00Z``: evidence, candidates, builds, locks) or
            ``"milliseconds"`` (``2025-01-31T12:00:00.123Z``: ledger records, which sort by time).
    """
    now = dt.datetime.now(dt.timezone.utc)
    return now.isoformat(timespec=timespec).replace("+00:00", "Z")


def who() -> str:
    """The actor: ``$GITHUB_ACTOR`` in GitHub Actions, else ``user@hostname``.

    Recorded as ``who`` in ledger records and in an attestation's verifier.
    """
    if os.environ.get("GITHUB_ACTOR"):
        return f"{os.environ['GITHUB_ACTOR']} (github run {os.environ.get('GITHUB_RUN_ID', '?')})"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def kind_of(path: Path) -> str:
    """What ``path`` is when it is not a regular file: ``a symbolic link (to …)``, ``a folder``,
    ``a named pipe``…"""
    if path.is_symlink():
        return f"a symbolic link (to {str(os.readlink(path))[:200]})"
    return ("a folder" if path.is_dir() else "a named pipe" if path.is_fifo()
            else "a socket" if path.is_socket() else "a device" if path.is_block_device()
            or path.is_char_device() else "missing" if not path.exists() else "not a file")


def regular_file(path: Path, what: str, *, error: type[PaddlecdError] = ConfigError) -> bool:
    """Whether ``path`` is a regular file (False when nothing is there).

    ``Path.is_file()`` is False for a named pipe or a folder too, so a state key or record that
    became one was taken for absent (a trial: signing silently stopped); and opening a named
    pipe to read it waits for a writer forever (a trial: push, promote, release.list hung on a
    FIFO key, config.json, kubeconfig or CA file).

    Raises:
        error: something other than a regular file is at ``path``, named with ``what``.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    if not stat.S_ISREG(mode):
        raise error(f"{what} {path} is {kind_of(path)}, not a regular file",
                    f"put the {what} itself at {path}, or remove what is there")
    return True


def read_regular(path: Path, what: str, *, error: type[PaddlecdError] = ConfigError) -> bytes:
    """The bytes of the regular file ``path``; never opens a named pipe or a device.

    Raises:
        FileNotFoundError: nothing at ``path`` (the caller names what is missing).
        error: ``path`` is no regular file (:func:`regular_file`).
        OSError: it cannot be read.
    """
    if not regular_file(path, what, error=error):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    return path.read_bytes()


YAML_MAX_BYTES = 1 << 20  # the project's YAML files are a few kB; 1 MiB is no settings file


def read_yaml(
    path: Path,
    *,
    error: type[PaddlecdError] = ConfigError,
    what: str = "file",
    missing_hint: str | None = None,
    text_values: bool = False,
) -> Any:
    """The YAML document in ``path`` (``None`` for an empty file), parsed by :func:`load_yaml`
    (``text_values`` passed on).

    Args:
        path: the file (variants file, job file, pipeline file, project settings).
        error: the typed error to raise (``ConfigError``, ``PipelineError``...).
        what: the file's role in the not-found message (``"job file"``).
        missing_hint: the hint for a missing file; without one ``FileNotFoundError`` propagates
            (for callers that checked existence or treat a missing file themselves).

    Raises:
        error: the file is missing (with ``missing_hint``), is not a regular file, is larger
            than :data:`YAML_MAX_BYTES` (on disk, or written out with its aliases expanded:
            :func:`expanded_size`), or is not valid YAML; the cause names the file and the
            line of the first problem (YAML marks count lines from 0).
    """
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # /dev/zero, a FIFO: read_text() never ends
            raise error(f"{path}: not a regular file", f"pass the {what} itself")
        if info.st_size > YAML_MAX_BYTES:
            raise error(f"{path}: {info.st_size} bytes, more than a {what} holds "
                        f"({YAML_MAX_BYTES} at most)", f"check that {path} is the {what}")
        doc = load_yaml(path.read_text(), text_values=text_values)
        if expanded_size(doc, YAML_MAX_BYTES) > YAML_MAX_BYTES:  # what the file cap cannot see
            raise error(f"{path}: expands to more than {YAML_MAX_BYTES} bytes through its YAML "
                        f"aliases (*name repeats what &name marks)",
                        f"write the values out; a {what} is small")
        return doc
    except FileNotFoundError as e:
        if missing_hint is None:
            raise
        raise error(f"{what} not found: {path}", missing_hint) from e
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start})", "save it as UTF-8") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise error(f"{path}: not valid YAML{where}: {problem}", "fix the syntax") from e


def json_problem(e: ValueError) -> str:
    """What is wrong with a file ``json.loads`` refused, in paddlecd's words rather than the
    library's: ``empty``, ``not UTF-8 text (byte N)``, ``not JSON: <what> at line L, column C``
    (``json.JSONDecodeError``'s own parts), or the first line of another ValueError (a key given
    twice: :func:`unique_keys`). Trial 19: "Expecting value: line 1 column 1 (char 0)" for an
    empty metrics file, "'utf-8' codec can't decode byte 0xe0 in position 0" for a manifest.
    """
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start})"
    if isinstance(e, json.JSONDecodeError):
        if not e.doc.strip():
            return "empty"
        start = len(e.doc) - len(e.doc.lstrip())
        if e.pos <= start:  # an HTML page, a text: named by its first character
            return f"not JSON (it starts with {e.doc[start]!r})"
        if e.pos >= len(e.doc.rstrip()) or e.msg.startswith("Unterminated"):
            return f"not JSON: it ends mid-document at line {e.lineno} (cut short?)"
        return f"not JSON: {e.msg.lower()} at line {e.lineno}, column {e.colno}"
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique, as ``json.loads(…, object_pairs_hook=unique_keys)``
    (RFC 8259 §4: names SHOULD be unique; Python keeps the last silently, a trial:
    ``{"a": 1, "a": 2}`` stored 2, and a candidate record's second digest was promoted).

    Raises:
        ValueError: naming the first key given twice (a ValueError, as a JSON error is).
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {quoted(key)} is given twice")
        out[key] = value
    return out


def write_json(path: Path, data: Any) -> Path:
    """Atomically write ``data`` as indented, key-sorted JSON to ``path`` (parents created).

    Returns:
        ``path``.

    Raises:
        OSError: the folder cannot be created or written; ``TypeError``: ``data`` is not JSON-able
            (the target file is left as it was in both cases).
    """
    return write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s\"']*@")


def hide_userinfo(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it as ``***@`` (a proxy URL in an
    error message: a trial printed its password)."""
    return _URL_USERINFO.sub(r"\1***@", text)


def sweep_killed(folder: Path, name: str) -> None:
    """Remove the temp files and folders ``.<name>.<pid>.…`` beside ``folder/<name>`` whose
    writer (``pid``) is gone: what a kill -9 between writing and renaming left (a trial: every
    later run kept them, and ``kubectl apply -R`` would have applied a second Job)."""
    import glob
    import shutil

    from paddlecd import proc

    for old in folder.glob(f".{glob.escape(name)}.*"):
        pid = old.name[len(name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not proc.running(int(pid)):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)


def staging_folder(target: Path, suffix: str) -> Path:
    """A new empty folder ``.<name>.<pid>.XXXX<suffix>`` beside ``target`` that becomes
    ``target`` once whole (:func:`publish_folder`); a killed writer's are swept first
    (:func:`sweep_killed`). ``target``'s folder is created.

    Raises:
        OSError: the folder cannot be made; it names ``target`` (a trial: "Read-only file
            system: /tmp/ro/.r.zbw3m48r.render" named the temp folder, not --out).
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep_killed(target.parent, target.name)
        return Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=suffix,
                                     dir=target.parent))
    except OSError as e:
        e.filename = str(target)
        raise


def publish_folder(stage: Path, target: Path, flag: str) -> None:
    """Rename the whole folder ``stage`` to ``target``, which is missing or an empty folder.

    Raises:
        ConfigError: ``target`` gained files meanwhile (another run wrote it: a trial's second of
            two downloads into one folder printed "Directory not empty"), named with ``flag``.
        OSError: the rename failed otherwise.
    """
    try:
        if target.exists():
            target.rmdir()
        stage.rename(target)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            raise
        raise ConfigError(f"{flag} {target} is not an empty folder any more: another run wrote "
                          "it meanwhile", "pick a new folder, or remove that one") from None


def write_text(path: Path, text: str | bytes) -> Path:
    """Atomically write ``text`` (or bytes) to ``path`` (parents created): a temp file in the
    same folder, then a rename, so a reader never sees half of it, and a full disk leaves the
    file as it was (a trial: a 0-byte PNG the re-run then refused as foreign).

    Raises:
        OSError: ``path`` is a folder, or its folder cannot be created or written (``path`` is
            left as it was); the error names ``path``, never the temp file (a trial: "Is a
            directory: /tmp/.x.i0grya_q").
    """
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_killed(path.parent, path.name)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.")
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from e
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def environ_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of paddlecd's own environment variable ``name`` that is no setting
    (``PADDLECD_ROOT``, ``PADDLECD_SIGNING_KEY``, ``PADDLECD_REGISTRY_USERNAME``…), None when it
    is unset. Settings given as ``PADDLECD_*`` go through :func:`paddlecd.config.load`, which
    refuses an empty one the same way.

    Raises:
        ConfigError: set but empty or only spaces: a GitHub secret that is not set expands to "",
            and that must not fall back to a default (another key, another root, config.json).
    """
    value = (os.environ if environ is None else environ).get(name)
    if value is not None and not value.strip():
        raise ConfigError(f"${name} is set but empty",
                          f"give it a value, or unset it (unset {name}) to use the default")
    return value
