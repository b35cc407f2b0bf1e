"""The package's shape: rooms that import only what lies below them, and no import cycle.

The package is a house of rooms (docs/design/architecture.md): each folder under ``s3memory/``
is one room, and so is each module at its root. The rules between rooms are what keeps
the layout meaningful, so each is a test here, and each has a second test that plants a
forbidden import in the graph and sees the rule catch it. From the bottom up:

- the vocabulary at the root (errors, telemetry, paths, layout, the contract's text, round
  trips, identity) imports only itself;
- ``_aws`` (the clients s3memory builds, the table of AWS errors, the awscrt client) imports
  only the errors and telemetry;
- ``stores/`` sees bytes and keys, never memory rules: the errors, ``_aws``, telemetry;
- ``_screening`` is pure, text in and findings out: the errors only;
- ``_crypto`` sits on the vocabulary, ``_aws`` and the stores;
- ``_history`` and ``_search`` sit below the memory's rules (``_core``): on ``_crypto``,
  the stores and the vocabulary;
- nothing below the faces (``cli``, ``mcp_server``, ``serve``, ``integrations``, ``testing``, the package
  face) imports a face, or ``_admin``;
- no two rooms import each other, and no two modules either, even lazily or for type
  checking only;
- no module reaches into another's private names (an underscore name imported, or read
  as an attribute of an object the module does not define it for), except the third-party
  internals listed in ``FOREIGN_REACHES`` with the reason for each;
- the house stays small enough to read: at most 28 rooms on 12 floors, at most 12 private
  modules at the root, no class over 400 lines and no module over 900 (the pattern tables
  excepted: they are data).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Collection
from pathlib import Path

import pytest

import s3memory

PACKAGE = Path(s3memory.__file__).parent

VOCABULARY = frozenset(
    {"_errors", "_telemetry", "_paths", "_identity", "_layout", "_render", "_roundtrip", "_tool_words"}
)
FACES = frozenset({"s3memory", "__main__", "cli", "mcp_server", "serve", "integrations", "testing"})
#: Each room listed, and what it may import besides itself.
MAY_IMPORT: dict[str, frozenset[str]] = {
    **{module: VOCABULARY for module in VOCABULARY},
    "_aws": frozenset({"_errors", "_telemetry"}),
    "stores": frozenset({"_errors", "_aws", "_telemetry"}),
    "_screening": frozenset({"_errors"}),
    "_crypto": VOCABULARY | {"_aws", "stores"},
    "_history": VOCABULARY | {"_aws", "stores", "_crypto"},
    "_search": VOCABULARY | {"_aws", "stores", "_crypto"},
}


#: Modules that are data, not code: tables of patterns, exempt from the size rule.
DATA_TABLES = frozenset({"s3memory._screening.instruction_patterns", "s3memory._screening.secret_patterns"})
#: Private names of other libraries read on purpose: (module, name) -> why.
FOREIGN_REACHES: dict[tuple[str, str], str] = {
    ("s3memory._aws.crt", "_emitter"): "botocore offers no public way to list a client's event handlers",
    ("s3memory._aws.crt", "_handlers"): "botocore offers no public way to list a client's event handlers",
    ("s3memory._aws.crt", "_lookup_cache"): "botocore's own cache of those handlers per event, read per request",
    ("s3memory.mcp_server", "_lowlevel_server"): "the MCP SDK's server exposes its low-level server only so",
    ("s3memory.integrations.deepagents", "_route_for_path"): "routes as deepagents' CompositeBackend does",
    ("s3memory.integrations.deepagents", "_get_backend_read_file_type"): "reads a file's type as deepagents does",
}


def sources() -> dict[str, str]:
    """Each module of the package by name, and its source."""
    return dict(_read_sources())


@functools.cache
def _read_sources() -> tuple[tuple[str, str], ...]:
    found = {}
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file.read_text(encoding="utf-8")
    return tuple(sorted(found.items()))


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports: at the top, in
    a function (lazily) or for type checking only, so that no cycle hides in any of them."""
    return {name: set(imported) for name, imported in _read_import_graph()}


@functools.cache
def _read_import_graph() -> tuple[tuple[str, frozenset[str]], ...]:
    modules = dict(_read_sources())
    packages = {name for name in modules if any(other.startswith(name + ".") for other in modules)}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, source in modules.items():
        package = name if name in packages or name == "s3memory" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    imported = submodule if submodule in modules else target
                    if imported in modules and imported != name:
                        graph[name].add(imported)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules and a.name != name)
    return tuple((name, frozenset(imported)) for name, imported in sorted(graph.items()))


def room(module: str) -> str:
    """The room of a module: its folder under ``s3memory/``, or itself at the root."""
    parts = module.split(".")
    return "s3memory" if len(parts) == 1 else parts[1]


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {room(module): set() for module in graph}
    for module, imported in graph.items():
        rooms[room(module)].update(room(other) for other in imported if room(other) != room(module))
    return rooms


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (its nodes in order, the first repeated last), or ``None``."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        if node in done:
            return None
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        visiting.append(node)
        for imported in sorted(graph[node]):
            cycle = visit(imported)
            if cycle is not None:
                return cycle
        visiting.pop()
        done.add(node)
        return None

    return next((cycle for cycle in map(visit, sorted(graph)) if cycle is not None), None)


def outside(graph: dict[str, set[str]], rooms: Collection[str], allowed: Collection[str]) -> list[tuple[str, str]]:
    """The imports of modules in ``rooms`` that reach a room neither theirs nor ``allowed``."""
    return sorted(
        (module, other)
        for module, imported in graph.items()
        if room(module) in rooms
        for other in imported
        if room(other) != room(module) and room(other) not in allowed
    )


def into_faces(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports of a face, or of ``_admin``, by a module below the faces."""
    return sorted(
        (module, other)
        for module, imported in graph.items()
        if room(module) not in FACES
        for other in imported
        if room(other) != room(module) and (room(other) in FACES or room(other) == "_admin")
    )


def floors(graph: dict[str, set[str]]) -> int:
    """How many floors the rooms stand on: the longest chain of imports, counted in rooms."""
    rooms = room_graph(graph)
    height: dict[str, int] = {}

    def of(node: str) -> int:
        if node not in height:
            height[node] = 1 + max((of(other) for other in rooms[node]), default=0)
        return height[node]

    return max(map(of, rooms))


def oversized(modules: dict[str, str]) -> list[str]:
    """Classes over 400 lines and modules over 900 (but the data tables), as ``module[:Class] (lines)``."""
    found = []
    for name, source in sorted(modules.items()):
        if name not in DATA_TABLES and len(source.splitlines()) > 900:
            found.append(f"{name} ({len(source.splitlines())})")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > 400:
                    found.append(f"{name}:{node.name} ({lines})")
    return found


def private_reaches(modules: dict[str, str], only: str | None = None) -> list[tuple[str, str]]:
    """(module, name) for each private name of another module that ``module`` uses: imported
    from a module of the package, or read as an attribute of something other than ``self``
    or ``cls`` when the module itself defines no such name (method, attribute or function).
    ``only``: the reaches of that one module (a planted one), not of all."""
    found = set()
    for name, source in modules.items():
        if only is not None and name != only:
            continue
        tree = ast.parse(source)
        own = (
            {
                node.name
                for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            }
            | {
                target.attr
                for node in ast.walk(tree)
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Attribute)
            }
            | {
                target.id
                for node in ast.walk(tree)
                if isinstance(node, (ast.Assign, ast.AnnAssign))
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)
            }
        )
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if _private(alias.name) and not _a_module(modules, name, node, alias.name):
                        found.add((name, alias.name))
            elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.add((name, node.attr))
    return sorted(reach for reach in found if reach not in FOREIGN_REACHES)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _a_module(modules: dict[str, str], importer: str, node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from ... import name`` in ``importer`` imports a module (a room's private
    module is imported by name, as ``from .. import _telemetry``)."""
    if node.level:
        package = importer if importer in _packages(modules) else importer.rsplit(".", 1)[0]
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return f"{base}.{name}" in modules


def _packages(modules: dict[str, str]) -> set[str]:
    return {name for name in modules if any(other.startswith(name + ".") for other in modules)}


# -- the rules -------------------------------------------------------------------------------
def test_every_room_named_in_the_rules_exists() -> None:
    assert set(MAY_IMPORT) <= set(room_graph(import_graph()))


@pytest.mark.parametrize("listed", sorted(MAY_IMPORT))
def test_a_room_imports_only_what_lies_below_it(listed: str) -> None:
    assert outside(import_graph(), {listed}, MAY_IMPORT[listed]) == []


def test_nothing_below_the_faces_imports_a_face_or_admin() -> None:
    assert into_faces(import_graph()) == []


def test_no_two_rooms_import_each_other() -> None:
    assert first_cycle(room_graph(import_graph())) is None


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert {"s3memory._layout", "s3memory._paths", "s3memory._crypto.names"} <= graph.keys()
    assert "s3memory._crypto.names" not in graph["s3memory._layout"] | graph["s3memory._paths"]
    assert first_cycle(graph) is None


def test_no_module_reaches_into_another_modules_private_names() -> None:
    assert private_reaches(sources()) == []


def test_the_house_has_at_most_28_rooms_on_12_floors() -> None:
    graph = import_graph()
    assert len(room_graph(graph)) <= 28
    assert floors(graph) <= 12


def test_at_most_12_private_modules_at_the_root() -> None:
    root = sorted(file.stem for file in PACKAGE.glob("_*.py") if not file.stem.startswith("__"))
    assert len(root) <= 12, root


def test_no_class_over_400_lines_and_no_module_over_900() -> None:
    assert oversized(sources()) == []


# -- each rule can fail ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "reach"),
    [
        ("from .._core.memory import _not_a_public_name\n", "_not_a_public_name"),
        ("def f(memory):\n    return memory._writable('x', 'y')\n", "_writable"),
        ("from s3memory._crypto.keyfile import _hidden\n", "_hidden"),
    ],
)
def test_the_private_reach_check_catches_a_reach(source: str, reach: str) -> None:
    modules = sources()
    modules["s3memory._admin.planted"] = source
    assert private_reaches(modules, only="s3memory._admin.planted") == [("s3memory._admin.planted", reach)]


def test_the_private_reach_check_allows_own_names_and_room_modules() -> None:
    planted = (
        "from .. import _telemetry\n"  # a module, by name
        "class A:\n    def _own(self):\n        return self._x\n"
        "def f(a):\n    return a._own()\n"  # a name this module defines
    )
    modules = sources()
    modules["s3memory._admin.planted"] = planted
    assert private_reaches(modules, only="s3memory._admin.planted") == []


def test_the_size_check_catches_a_long_class_and_a_long_module() -> None:
    long_class = "class Big:\n" + "    x = 1\n" * 400
    long_module = "x = 1\n" * 901
    assert oversized({"s3memory.big": long_class}) == ["s3memory.big:Big (401)"]
    assert oversized({"s3memory.long": long_module}) == ["s3memory.long (901)"]
    assert oversized({"s3memory._screening.instruction_patterns": long_module}) == []


def test_the_floor_count_counts_the_longest_chain() -> None:
    graph = {"s3memory.a": {"s3memory.b"}, "s3memory.b": {"s3memory.c"}, "s3memory.c": set(), "s3memory.d": set()}
    assert floors(graph) == 3


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("s3memory._paths", "s3memory._crypto.names"),  # what _paths did, for type checking, before
        ("s3memory._aws.crt", "s3memory.stores._s3"),
        ("s3memory.stores._s3", "s3memory._core.memory"),  # a store that knew memory rules
        ("s3memory._screening.secrets", "s3memory._paths"),  # a screen that knew paths
        ("s3memory._crypto.files", "s3memory._history.records"),
        ("s3memory._history.versions", "s3memory._core.quarantine"),  # what redaction did, before
        ("s3memory._search.index", "s3memory._core.memory"),
    ],
)
def test_the_room_rule_catches_a_forbidden_import(importer: str, imported: str) -> None:
    graph = import_graph()
    assert imported not in graph[importer]
    graph[importer].add(imported)
    assert outside(graph, {room(importer)}, MAY_IMPORT[room(importer)]) == [(importer, imported)]


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("s3memory._core.memory", "s3memory.mcp_server"),
        ("s3memory._history.listing", "s3memory.cli.output"),
        ("s3memory._factory", "s3memory.integrations.anthropic"),
        ("s3memory._core.mounts", "s3memory._admin.manage"),
    ],
)
def test_the_faces_rule_catches_an_import_from_below(importer: str, imported: str) -> None:
    graph = import_graph()
    graph[importer].add(imported)
    assert into_faces(graph) == [(importer, imported)]


def test_the_room_cycle_check_finds_a_cycle() -> None:
    graph = import_graph()
    graph["s3memory._crypto.keyring"].add("s3memory._core.memory")  # _core imports _crypto
    cycle = first_cycle(room_graph(graph))
    assert cycle is not None and cycle[0] == cycle[-1] and {"_crypto", "_core"} <= set(cycle)


def test_the_module_cycle_check_finds_a_cycle() -> None:
    graph = import_graph()
    graph["s3memory._paths"].add("s3memory._crypto.names")
    cycle = first_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert {"s3memory._paths", "s3memory._crypto.names"} <= set(cycle)


# -- the map in the docs ---------------------------------------------------------------------
def test_the_architecture_page_names_every_room() -> None:
    section = (PACKAGE.parent / "docs" / "design" / "architecture.md").read_text(encoding="utf-8")
    rooms = {r for r in room_graph(import_graph()) if r not in ("s3memory", "__main__")}
    missing = sorted(r for r in rooms if f"`{r}/`" not in section and f"`{r}`" not in section)
    assert missing == []
