"""Import layering: graphs/ imports nothing from app/, and neither graphs/ nor the model providers
(app/models/) have an import cycle — counting imports made inside functions, which hide cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def modules(*packages: str) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in (ROOT / package.replace(".", "/")).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules a file imports, at module level or inside functions; `from pkg import
    submodule` counts as importing the submodule."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(known)
            names |= subs | ({node.module} if len(subs) < len(node.names) else set())
    return {_owner(name, known) for name in names} - {None}


def _owner(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


@pytest.mark.parametrize("packages", [("graphs",), ("app.models",)])
def test_no_import_cycle(packages: tuple[str, ...]):
    known = modules(*packages)
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    assert cycle(graph) is None


def test_the_graphs_import_nothing_from_the_application():
    known = modules("graphs", "app")
    for name, path in modules("graphs").items():
        assert not {m for m in imports(path, known) if m.startswith("app")}, name
