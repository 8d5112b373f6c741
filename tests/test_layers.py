"""Import layering: graphs/ imports nothing from app/; the services (app/service/) import no front
end; the server imports nothing of the CLI; each CLI command module imports no other (app/cli/main.py
assembles them); and nothing in graphs/ or app/ has an import cycle — counting imports made inside
functions, which hide cycles."""

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


@pytest.mark.parametrize("packages", [("graphs",), ("app.models",), ("app",)])
def test_no_import_cycle(packages: tuple[str, ...]):
    known = modules(*packages)
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    assert cycle(graph) is None


def test_the_graphs_import_nothing_from_the_application():
    known = modules("graphs", "app")
    for name, path in modules("graphs").items():
        assert not {m for m in imports(path, known) if m.startswith("app")}, name


FRONT_ENDS = ("app.cli", "app.server")
COMMAND_MODULES = {
    "app.cli.chat",
    "app.cli.corpus",
    "app.cli.info",
    "app.cli.mcp",
    "app.cli.memory",
    "app.cli.serve",
    "app.cli.store",
    "app.cli.threads",
    "app.cli.time_travel",
}


def app_imports() -> dict[str, set[str]]:
    known = modules("app")
    return {name: imports(path, known) - {name} for name, path in known.items()}


def test_the_services_import_no_front_end():
    for name, targets in app_imports().items():
        if name.startswith("app.service"):
            assert not {t for t in targets if t.startswith(FRONT_ENDS)}, name


def test_the_server_imports_nothing_of_the_cli():
    for name, targets in app_imports().items():
        if name.startswith("app.server"):
            assert not {t for t in targets if t.startswith("app.cli")}, name


def test_only_the_cli_root_imports_the_command_modules():
    graph = app_imports()
    assert set(modules("app.cli")) - {"app.cli"} >= COMMAND_MODULES
    for name, targets in graph.items():
        if name != "app.cli.main":
            assert not targets & COMMAND_MODULES, name


def test_a_run_config_is_written_in_one_place():
    """`{"configurable": ...}` is built by app/service/threads.thread_config only."""
    writers = set()
    for name, path in modules("app").items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "configurable" for k in node.keys
            ):
                writers.add(name)
    assert writers == {"app.service.threads"}
