"""The code base is lint-clean (ruff, configured in pyproject.toml) — the same check ci.yml runs."""

import shutil
import subprocess
import sys
from pathlib import Path

from support import ROOT


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a pinned test dependency (pyproject.toml [test])"
    result = subprocess.run(
        [ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_one_alias_for_a_line_callback():
    """``Callable[[str], None]`` is spelled once, as ``paddlecd.types.Echo`` (STYLE.md §18)."""
    src = ROOT / "src" / "paddlecd"
    spelled = {p.relative_to(src).as_posix() for p in src.rglob("*.py")
               if "Callable[[str], None]" in p.read_text()}
    assert spelled == {"types.py"}
