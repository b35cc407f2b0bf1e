"""The package's shape: rooms that import only what lies below them, and no import cycle.

The package is a house of rooms (README, "Architecture"): each folder under ``s3memory/``
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
- nothing below the faces (``cli``, ``mcp_server``, ``integrations``, ``testing``, the package
  face) imports a face, or ``_admin``;
- no two rooms import each other, and no two modules either, even lazily or for type
  checking only.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import pytest

import s3memory

PACKAGE = Path(s3memory.__file__).parent

VOCABULARY = frozenset({"_errors", "_telemetry", "_paths", "_identity", "_layout", "_render", "_roundtrip"})
FACES = frozenset({"s3memory", "__main__", "cli", "mcp_server", "integrations", "testing"})
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


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports: at the top, in
    a function (lazily) or for type checking only, so that no cycle hides in any of them."""
    modules = {}
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = file
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, file in modules.items():
        package = name if file.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
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
    return graph


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


# -- each rule can fail ----------------------------------------------------------------------
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


# -- the map in the README -------------------------------------------------------------------
def test_the_readme_architecture_names_every_room() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Architecture") :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    rooms = {r for r in room_graph(import_graph()) if r not in ("s3memory", "__main__")}
    missing = sorted(r for r in rooms if f"`{r}/`" not in section and f"`{r}`" not in section)
    assert missing == []
