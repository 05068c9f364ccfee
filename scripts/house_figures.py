"""House figures of a package folder (default src/paddlecd), measured with ``ast``.

Functions over 60 lines (``def`` to last line, docstring included), public signatures with
``dict[str, Any]`` (public functions and methods of public classes, outside ``_`` modules), and
comments or docstrings citing this project's issue numbers (``issue N``; schemas' JSON too).

A module-level alias of ``dict[str, Any]`` (``Name: TypeAlias = dict[str, Any]``, the way a JSON
document such as a Kubernetes object is named) still is one: a signature that uses it is counted
on a line of its own, with the alias named, so the total never drops by renaming. Signatures
spelled ``dict[str, Any]`` are split into ``to_json``/``from_json`` (where STYLE rule 16 keeps
them) and the rest.

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


ANY = "dict[str, Any]"


def _annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    a = fn.args
    anns = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation]
    anns += [x.annotation for x in (a.vararg, a.kwarg) if x and x.annotation]
    return anns + ([fn.returns] if fn.returns else [])


def _signature_has_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ANY in ast.unparse(x) for x in _annotations(fn))


def _aliases_used(fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: set[str]) -> set[str]:
    """Names of ``dict[str, Any]`` aliases in ``fn``'s signature (``Name`` or ``mod.Name``;
    also inside a string annotation)."""
    used = set()
    for ann in _annotations(fn):
        text = ast.unparse(ann)
        used |= {a for a in aliases if re.search(rf"(?<![\w]){a}(?![\w])", text)}
    return used


def _any_aliases(tree: ast.Module) -> set[str]:
    """Module-level names bound to ``dict[str, Any]`` (``X = …`` or ``X: TypeAlias = …``)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and ast.unparse(value).strip("'\"") == ANY:
            found.add(target.id)
    return found


def _walk(node: ast.AST, where: str, prefix: str, public: bool, long: list, anys: list,
          aliased: list, aliases: set[str] = frozenset()) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = child.end_lineno - child.lineno + 1
            if lines > 60:
                long.append((lines, f"{where}:{prefix}{child.name}"))
            own = public and not child.name.startswith("_")
            if own and isinstance(node, (ast.Module, ast.ClassDef)):
                if _signature_has_any(child):
                    anys.append(f"{where}:{prefix}{child.name}")
                elif used := _aliases_used(child, aliases):
                    aliased.append(f"{where}:{prefix}{child.name} ({', '.join(sorted(used))})")
            _walk(child, where, f"{prefix}{child.name}.", False, long, anys, aliased, aliases)
        elif isinstance(child, ast.ClassDef):
            _walk(child, where, f"{prefix}{child.name}.", public and not child.name.startswith("_"),
                  long, anys, aliased, aliases)


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
    aliased: list[str] = []
    issues: list[str] = []
    paths = sorted(root.rglob("*.py"))
    aliases = set().union(*(_any_aliases(ast.parse(p.read_text())) for p in paths))
    for path in paths:
        where = str(path.relative_to(root))
        text = path.read_text()
        parts = path.relative_to(root).parts
        public = not any(p.startswith("_") and p != "__init__.py" for p in parts)
        _walk(ast.parse(text), where, "", public, long, anys, aliased, aliases)
        issues += _issues(path, text, where)
    for path in sorted(root.rglob("*.json")):
        issues += [f"{path.relative_to(root)}:{i} json"
                   for i, line in enumerate(path.read_text().splitlines(), 1) if ISSUE.search(line)]
    verbose = "-v" in argv
    print(f"functions > 60 lines: {len(long)}")
    for lines, name in sorted(long, reverse=True) if verbose else ():
        print(f"  {lines:4d} {name}")
    records = [n for n in anys if n.endswith((".to_json", ".from_json"))]
    print(f"dict[str, Any] in public signatures: {len(anys)} "
          f"(to_json/from_json {len(records)}, other {len(anys) - len(records)})")
    for name in anys if verbose else ():
        print(f"  {name}")
    print(f"  + through named aliases of dict[str, Any]: {len(aliased)} "
          f"(total {len(anys) + len(aliased)})")
    for name in aliased if verbose else ():
        print(f"    {name}")
    print(f"issue-number comments/docstrings: {len(issues)}")
    for name in issues if verbose else ():
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
