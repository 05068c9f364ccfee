"""The closed boundaries: subprocess only in proc.py, print only in the CLI layer,
docker-py options only in engine.py, ``import paddlecd.cluster`` without the client libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import paddlecd

from support import sources

SRC = Path(paddlecd.__file__).parent
MODULES = sorted(SRC.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_walk_sees_the_package():
    names = {_rel(p) for p in MODULES}
    assert {"proc.py", "engine.py", "cluster/local.py", "verify/run.py"} <= names


def test_only_proc_imports_subprocess():
    """STYLE §11: one subprocess helper: every command is echoed, timed out and checked alike."""
    offenders = [_rel(p) for p in MODULES if "subprocess" in _imports(sources.tree(p))]
    assert offenders == ["proc.py"]


def test_library_code_never_prints():
    """STYLE §13: output belongs to the CLI layer (src/paddlecd/cli/, tasks.py); the library reports
    through callbacks and return values."""
    offenders = []
    for path in MODULES:
        if _rel(path).startswith("cli/"):
            continue
        for node in ast.walk(sources.tree(path)):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            if call and node.func.id == "print":
                offenders.append(f"{_rel(path)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize("option", ["device_requests", "networking_config", "nano_cpus",
                                    "mem_limit", "ipc_mode", "DeviceRequest", "EndpointConfig"])
def test_only_the_engine_builds_docker_options(option):
    """Callers describe containers with engine.ContainerSpec; docker-py keywords stay inside."""
    assert [_rel(p) for p in MODULES if option in p.read_text()] == ["engine.py"]


def _fresh_import(module: str) -> set[str]:
    """Top-level packages that ``import module`` loads in a fresh interpreter (this one has all)."""
    code = f"import sys, {module}; print(' '.join({{m.split('.')[0] for m in sys.modules}}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC.parent), "PATH": "/usr/bin:/bin"})
    return set(out.stdout.split())


@pytest.mark.parametrize("module,forbidden", [
    ("paddlecd.cluster", {"kubernetes", "docker"}),
    ("paddlecd.cluster.jobfile", {"kubernetes", "docker"}),
    ("paddlecd", {"kubernetes", "docker", "boto3"}),
])
def test_importing_does_not_load_client_libraries(module, forbidden):
    loaded = _fresh_import(module)
    assert "paddlecd" in loaded and loaded & forbidden == set()
