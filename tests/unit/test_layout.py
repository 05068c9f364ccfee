"""The package layout: folders name the rooms, no two modules and no two rooms import each other,
and each room's docstring names its modules.

Imports inside functions count too: a lazy import that closes a loop still ties two modules (and
two rooms) together; the layout is meant to read one way. A room is a top-level folder of
src/paddlecd; each top-level module (engine.py, config.py, ...) is a room of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import paddlecd

from support import sources

SRC = Path(paddlecd.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _known_modules() -> set[str]:
    return {_module_name(p) for p in SRC.rglob("*.py")}


def _imports(path: Path, known: set[str]) -> set[str]:
    """Modules of paddlecd that ``path`` imports anywhere (``from a import b`` counts as a.b
    when a.b is a module, else as a)."""
    found: set[str] = set()
    for node in ast.walk(sources.tree(path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module not in known:
                continue
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            found.update(subs or {node.module})
    return found


def _graph() -> dict[str, set[str]]:
    known = _known_modules()
    return {_module_name(p): _imports(p, known) - {_module_name(p)} for p in SRC.rglob("*.py")}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle():
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_a_cycle(tmp_path):
    """The checker itself: two modules importing each other (one lazily) are found; a chain is no
    cycle."""
    known = {"paddlecd", "paddlecd.a", "paddlecd.b", "paddlecd.c"}
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from paddlecd import b\n\ndef f():\n    from paddlecd import c\n")
    b.write_text("from paddlecd.a import thing\n")
    graph = {"paddlecd.a": _imports(a, known), "paddlecd.b": _imports(b, known)}
    assert graph == {"paddlecd.a": {"paddlecd.b", "paddlecd.c"}, "paddlecd.b": {"paddlecd.a"}}
    assert _find_cycle(graph) == ["paddlecd.a", "paddlecd.b", "paddlecd.a"]
    assert _find_cycle({"paddlecd.a": {"paddlecd.b"}, "paddlecd.b": set()}) is None


def _room(module: str) -> str:
    """``paddlecd.verify.run`` → ``verify``; a top-level module is its own room."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


# Module imports that close a known room cycle, each with the reason it stands (none stand: push
# and verify both sign with the signing room, below either).
KNOWN_ROOM_CYCLE_EDGES: set[tuple[str, str]] = set()


def _room_graph(graph: dict[str, set[str]],
                skip: set[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for module, deps in graph.items():
        for dep in deps:
            a, b = _room(module), _room(dep)
            if a != b and b != "paddlecd" and (module, dep) not in skip:
                rooms.setdefault(a, set()).add(b)
    return rooms


def test_no_import_cycle_between_rooms():
    graph = _graph()
    cycle = _find_cycle(_room_graph(graph, KNOWN_ROOM_CYCLE_EDGES))
    assert cycle is None, "room cycle: " + " -> ".join(cycle or [])
    stale = {e for e in KNOWN_ROOM_CYCLE_EDGES if e[1] not in graph.get(e[0], set())}
    assert not stale, f"known room-cycle edges that no longer exist (drop them): {stale}"


def test_the_room_check_sees_a_cycle_of_modules_that_is_no_module_cycle():
    """a.x imports b.y, b.z imports a.w: no module cycle, but the rooms a and b loop."""
    graph = {"paddlecd.a.x": {"paddlecd.b.y"}, "paddlecd.b.z": {"paddlecd.a.w"},
             "paddlecd.a.w": set(), "paddlecd.b.y": set()}
    assert _find_cycle(graph) is None
    assert _find_cycle(_room_graph(graph)) == ["a", "b", "a"]
    assert _find_cycle(_room_graph({"paddlecd.a.x": {"paddlecd.b.y"}})) is None


def _room_docstring_gaps() -> dict[str, list[str]]:
    gaps = {}
    for init in sorted(SRC.glob("*/__init__.py")):
        doc = ast.get_docstring(sources.tree(init)) or ""
        names = sorted({p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"}
                       | {p.parent.name for p in init.parent.glob("*/__init__.py")})
        missing = [n for n in names if f":mod:`.{n}`" not in doc]
        if missing:
            gaps[init.parent.name] = missing
    return gaps


def test_each_room_docstring_names_every_module_in_it():
    """A reader finds a module from its room's docstring (:mod:`.name`, STYLE.md §17)."""
    assert _room_docstring_gaps() == {}


def test_every_module_says_what_room_it_is():
    """A module's first docstring line says what it is (STYLE.md §17)."""
    for path in SRC.rglob("*.py"):
        doc = ast.get_docstring(sources.tree(path))
        assert doc and doc.strip(), f"{path.relative_to(SRC)} has no module docstring"


def test_rooms_are_folders():
    """The flow's stages and the external systems each have a subpackage; no flat prefixes
    remain."""
    rooms = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert {"image", "registry", "verify", "release", "artifacts", "pipeline", "cluster"} <= rooms
    flat = [p.name for p in SRC.glob("*.py")]
    prefixed = [n for n in flat if n.split("_")[0] in rooms and n != "__init__.py"]
    assert not prefixed, f"modules named after a room but outside it: {prefixed}"


def test_release_is_downstream_of_verify():
    """Release reads what verify wrote, never the other way round (the attestation took
    ``who()`` from the ledger); the core does not import release either."""
    graph = _graph()
    upstream = [m for m in graph if m.startswith(("paddlecd.verify", "paddlecd.image"))
                or m.count(".") == 1 and not (SRC / m.split(".")[1]).is_dir()]
    reaching = {m: sorted(i for i in graph[m] if i.startswith("paddlecd.release"))
                for m in upstream}
    bad = {m: r for m, r in reaching.items() if r}
    assert not bad, f"modules upstream of release that import it: {bad}"


def test_no_two_test_modules_share_a_basename():
    """pytest (rootdir-relative, no packages under tests/unit and tests/integration) refuses a
    second module of the same basename with "import file mismatch": the whole run errors."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a basename"
        seen[path.name] = path
