"""The package's shape: no import cycle, and no long module without a stated reason.

The modules are flat, one concern each (README, "Architecture"). Two rules keep them so, and
these tests hold the code to them: no two modules import each other, even lazily or for type
checking only; a module over 400 lines says in its docstring why it is one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import s3memory

PACKAGE = Path(s3memory.__file__).parent


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


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (its modules in order, the first repeated last), or ``None``."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in done:
            return None
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        visiting.append(module)
        for imported in sorted(graph[module]):
            cycle = visit(imported)
            if cycle is not None:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    return next((cycle for cycle in map(visit, sorted(graph)) if cycle is not None), None)


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert {"s3memory._layout", "s3memory._paths", "s3memory._crypto.names"} <= graph.keys()
    assert "s3memory._crypto.names" not in graph["s3memory._layout"] | graph["s3memory._paths"]
    assert first_cycle(graph) is None


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check above can fail: modules that import each other, even lazily, are caught."""
    graph = import_graph()
    graph["s3memory._paths"].add("s3memory._crypto.names")  # what _paths did, for type checking, before
    cycle = first_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert {"s3memory._paths", "s3memory._crypto.names"} <= set(cycle)


MAX_LINES = 400
REASONS = ("longer than", "over 400 lines", "kept whole")


def modules_over_the_limit() -> dict[str, str | None]:
    """Each module over :data:`MAX_LINES` lines, with its docstring."""
    found = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        text = file.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES:
            found[str(file.relative_to(PACKAGE))] = ast.get_docstring(ast.parse(text))
    return found


def test_a_long_module_says_why_it_is_one_module() -> None:
    unexplained = [
        name
        for name, docstring in modules_over_the_limit().items()
        if not any(reason in " ".join((docstring or "").split()).lower() for reason in REASONS)
    ]
    assert unexplained == []


@pytest.mark.parametrize("module", ["_core/memory.py", "_crypto/keydocs.py"])
def test_the_size_rule_sees_the_long_modules(module: str) -> None:
    """The rule above can fail: it finds the modules that are long today."""
    assert module in modules_over_the_limit()


def test_the_readme_architecture_names_every_module() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Architecture") :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    modules = {
        str(f.relative_to(PACKAGE).with_suffix(""))
        for f in PACKAGE.rglob("*.py")
        if f.stem not in ("__init__", "__main__") and f.parent.name not in ("stores", "integrations")
    }
    missing = sorted(m for m in modules if f"`{m}`" not in section and f"({m})" not in section)
    assert missing == []
