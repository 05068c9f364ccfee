"""House figures of a package folder (default src/paddlecd), measured with ``ast``.

Functions over 60 lines (``def`` to last line, docstring included), public signatures with
``dict[str, Any]`` (public functions and methods of public classes, outside ``_`` modules), and
comments or docstrings citing this project's issue numbers (``issue N``; schemas' JSON too).

Usage: python scripts/house_figures.py [FOLDER] [-v]   (-v lists each one)
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ISSUE = re.compile(r"\b[Ii]ssues? \d+|\(#\d+\)")


def _signature_has_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = fn.args
    anns = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation]
    anns += [x.annotation for x in (a.vararg, a.kwarg) if x and x.annotation]
    anns += [fn.returns] if fn.returns else []
    return any("dict[str, Any]" in ast.unparse(x) for x in anns)


def _walk(node: ast.AST, where: str, prefix: str, public: bool, long: list, anys: list) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = child.end_lineno - child.lineno + 1
            if lines > 60:
                long.append((lines, f"{where}:{prefix}{child.name}"))
            own = public and not child.name.startswith("_")
            if own and isinstance(node, (ast.Module, ast.ClassDef)) and _signature_has_any(child):
                anys.append(f"{where}:{prefix}{child.name}")
            _walk(child, where, f"{prefix}{child.name}.", False, long, anys)
        elif isinstance(child, ast.ClassDef):
            _walk(child, where, f"{prefix}{child.name}.", public and not child.name.startswith("_"),
                  long, anys)


def _issues(path: Path, text: str, where: str) -> list[str]:
    found = [f"{where}:{t.start[0]} comment"
             for t in tokenize.generate_tokens(io.StringIO(text).readline)
             if t.type == tokenize.COMMENT and ISSUE.search(t.string)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and ISSUE.search(doc):
                found.append(f"{where}:{getattr(node, 'lineno', 1)} docstring")
    return found


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "-v"]
    root = Path(args[0] if args else "src/paddlecd")
    long: list[tuple[int, str]] = []
    anys: list[str] = []
    issues: list[str] = []
    for path in sorted(root.rglob("*.py")):
        where = str(path.relative_to(root))
        text = path.read_text()
        parts = path.relative_to(root).parts
        public = not any(p.startswith("_") and p != "__init__.py" for p in parts)
        _walk(ast.parse(text), where, "", public, long, anys)
        issues += _issues(path, text, where)
    for path in sorted(root.rglob("*.json")):
        issues += [f"{path.relative_to(root)}:{i} json"
                   for i, line in enumerate(path.read_text().splitlines(), 1) if ISSUE.search(line)]
    verbose = "-v" in argv
    print(f"functions > 60 lines: {len(long)}")
    for lines, name in sorted(long, reverse=True) if verbose else ():
        print(f"  {lines:4d} {name}")
    print(f"dict[str, Any] in public signatures: {len(anys)}")
    for name in anys if verbose else ():
        print(f"  {name}")
    print(f"issue-number comments/docstrings: {len(issues)}")
    for name in issues if verbose else ():
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
