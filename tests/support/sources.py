"""Source files parsed once per test process: the layout, boundary and isolation checks each walk
every module of src/paddlecd (~1 MB of Python), and a parse is most of what they cost."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def tree(path: Path) -> ast.Module:
    """The syntax tree of ``path`` as it reads now (cached by its text, so an edited file is parsed
    again). Shared between callers: read it, never change it. Raises SyntaxError, OSError."""
    return _parse(path.read_text())


@functools.cache
def _parse(text: str) -> ast.Module:
    return ast.parse(text)
