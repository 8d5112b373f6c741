"""The docs are a map that stays true: every repository path and `file.py::name` symbol they name
exists, every command and option of the CLI has an example in the README, and the two top-level
pages stay short enough to read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from app.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    *sorted((ROOT / "docs").glob("*.md")),  # docs/notes/ is the lead's working material, not docs
]
PATH_PREFIXES = ("app/", "graphs/", "tools/", "bench/", "tests/", "scripts/", "docs/", ".ci/")
ROOT_FILES = {"pyproject.toml", "langgraph.json", "aegra.json", "README.md", "ARCHITECTURE.md"}
LIMITS = {"README.md": 400, "ARCHITECTURE.md": 350}

BACKTICKED = re.compile(r"`([^`\n]+)`")
LINK_TARGET = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
PLACEHOLDER = re.compile(r"[<>*{}\[\]|$]")  # `graphs/<strategy>/`, `tests/test_*.py`: not one path


def named_paths(text: str) -> set[str]:
    """The repository paths (maybe with `::symbol`) a page names in backticks."""
    found = set()
    for quoted in BACKTICKED.findall(text):
        for word in quoted.split():
            word = word.strip(".,;:()'\"")
            path = word.split("::")[0]
            if PLACEHOLDER.search(path.split("::")[0]):
                continue
            if path.startswith(PATH_PREFIXES) or path in ROOT_FILES:
                found.add(word)
    return found


def link_targets(page: Path) -> set[Path]:
    """The local files a page links to, resolved against its own directory."""
    targets = set()
    for target in LINK_TARGET.findall(page.read_text(encoding="utf-8")):
        if "://" not in target and not target.startswith("mailto:"):
            targets.add((page.parent / target).resolve())
    return targets


def is_defined(source: str, name: str) -> bool:
    """Whether `name` is a function, class or module-level name of this Python source."""
    pattern = rf"^\s*(async\s+def|def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]"
    return re.search(pattern, source, re.MULTILINE) is not None


def missing(page: Path) -> list[str]:
    """What `page` names that the repository does not have."""
    problems = []
    for word in sorted(named_paths(page.read_text(encoding="utf-8"))):
        path, _, symbol = word.partition("::")
        file = ROOT / path
        if not symbol and not file.exists() and not path.endswith((".py", "/")):
            module, _, attribute = path.rpartition(".")  # graphs/shared/turns.begins_turn
            if (ROOT / f"{module}.py").is_file():
                file, symbol = ROOT / f"{module}.py", attribute
        if not file.exists():
            problems.append(f"{word}: no such path")
        elif symbol:
            name = symbol.split("[")[0]  # a parametrized test's id
            if not is_defined(file.read_text(encoding="utf-8"), name):
                problems.append(f"{word}: {name} is not defined in {path}")
    problems += [
        f"link {target.relative_to(ROOT)}: no such file"
        for target in sorted(link_targets(page))
        if target.is_relative_to(ROOT) and not target.exists()
    ]
    return problems


@pytest.mark.parametrize("page", DOCS, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_path_and_symbol_the_docs_name_exists(page: Path):
    assert missing(page) == []


def test_the_docs_stay_short():
    lengths = {name: len((ROOT / name).read_text(encoding="utf-8").splitlines()) for name in LIMITS}

    assert {name: n for name, n in lengths.items() if n > LIMITS[name]} == {}


def every_option() -> list[tuple[str, str]]:
    """(command words, long option) for every option of every command, e.g. ("threads prune",
    "--dry-run"); the root's own options have the words ""."""
    found = []

    def walk(command: Any, words: str) -> None:  # typer's own (vendored) click command
        for param in command.params:
            if param.param_type_name == "option":
                found.extend((words, flag) for flag in param.opts if flag.startswith("--"))
        for name, sub in getattr(command, "commands", {}).items():
            found.append((f"{words} {name}".strip(), ""))
            walk(sub, f"{words} {name}".strip())

    walk(get_command(app), "")
    return [(words, flag) for words, flag in found if flag != "--help"]


def test_every_command_and_option_has_an_example_in_the_readme():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()

    def shown(words: str, flag: str) -> bool:
        command = re.compile(
            rf"waypoint (--debug )?{re.escape(words)}(\s|$)" if words else "waypoint "
        )
        given = re.compile(rf"{re.escape(flag)}(?![\w-])")  # --json is not --jsonl
        return any(command.search(line) and given.search(line) for line in lines)

    assert [
        f"waypoint {words} {flag}".strip()
        for words, flag in every_option()
        if not shown(words, flag)
    ] == []


def test_the_checks_catch_a_wrong_path_and_a_missing_symbol(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "`app/no_such_module.py`, `tests/test_docs.py::no_such_test`, "
        "`tests/test_docs.py::is_defined`, `graphs/<strategy>/`, `a/b.py`\n",
        encoding="utf-8",
    )

    assert [problem.split(":")[0] for problem in missing(page)] == [
        "app/no_such_module.py",
        "tests/test_docs.py",
    ]
