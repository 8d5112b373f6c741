"""Import layering: tools/ imports nothing of graphs/, app/ or bench/; graphs/ nothing of app/ or
bench/; app/ nothing of bench/; below the front ends nothing imports app.cli or app.server (no
arrow back up); the services (app/service/) import no front end; the server imports nothing of the
CLI; each CLI command module imports no other (app/cli/main.py assembles them) and only
app/cli/database.py opens the database; and there is no import cycle anywhere — counting imports
made inside functions and for type checking, which hide cycles."""

from __future__ import annotations

import ast
from pathlib import Path

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


PACKAGES = ("app", "graphs", "tools", "bench")


def import_graph(*packages: str) -> dict[str, set[str]]:
    """Each module of `packages` and the project modules it imports."""
    known = modules(*packages)
    return {name: imports(path, known) - {name} for name, path in known.items()}


def test_no_import_cycle():
    assert cycle(import_graph(*PACKAGES)) is None


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle(graph) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def importers_of(layer: str, *above: str) -> dict[str, set[str]]:
    """The modules of `layer` that import any of `above`, with what they import of it."""
    found = {}
    for name, targets in import_graph(*PACKAGES).items():
        if name == layer or name.startswith(f"{layer}."):
            wrong = {t for t in targets if t.startswith(above)}
            if wrong:
                found[name] = wrong
    return found


def test_the_tools_import_nothing_of_the_graphs_the_application_or_the_benchmarks():
    assert importers_of("tools", "graphs", "app", "bench") == {}


def test_the_graphs_import_nothing_from_the_application():
    assert importers_of("graphs", "app", "bench") == {}


def test_the_application_imports_nothing_of_the_benchmarks():
    assert importers_of("app", "bench") == {}


def test_below_the_front_ends_nothing_imports_them():
    """app.config, app.service, app.db, … serve every front end: none of them imports one."""
    for name, targets in app_imports().items():
        if not name.startswith((*FRONT_ENDS, "app.__main__")):
            assert not {t for t in targets if t.startswith(FRONT_ENDS)}, name


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


def test_the_cli_opens_the_database_through_one_helper():
    """app/cli/database.py (`opened`, `database_of`) is the CLI's one caller of open_database."""
    callers = set()
    for name, path in modules("app.cli").items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "open_database":
                callers.add(name)
    assert callers == {"app.cli.database"}
