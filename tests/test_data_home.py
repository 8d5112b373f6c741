"""One place for data: without --db or --workspace, Waypoint finds the project's `checkpoints/` the way
git finds `.git` (this directory or a parent), else uses the user's data directory; `doctor` and the
REPL banner say which database and workspace are in use, and a listing creates no database."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import load_settings
from tests.conftest import run_cli


@pytest.fixture
def no_explicit_places(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> Path:
    """No APP_DB / APP_WORKSPACE, and a user data directory inside the test's directory."""
    monkeypatch.delenv("APP_DB")
    monkeypatch.delenv("APP_WORKSPACE")
    monkeypatch.setenv("XDG_DATA_HOME", str(isolated / "xdg"))
    return isolated


def test_a_parent_with_checkpoints_is_the_project_home(no_explicit_places: Path, monkeypatch):
    project = no_explicit_places / "project"
    (project / "checkpoints").mkdir(parents=True)
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)

    settings = load_settings()

    assert settings.database.path == project / "checkpoints" / "agent.sqlite"
    assert settings.workspace == project / "workspace"
    assert settings.origin("db") == f"the project at {project}"


def test_elsewhere_the_user_data_directory_is_used(no_explicit_places: Path, monkeypatch):
    elsewhere = no_explicit_places / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    settings = load_settings()

    user_dir = no_explicit_places / "xdg" / "waypoint"
    assert settings.database.path == user_dir / "agent.sqlite"
    assert settings.workspace == user_dir / "workspace"
    assert settings.origin("workspace").startswith("the user data directory")


def test_explicit_places_win_and_say_so(no_explicit_places: Path):
    settings = load_settings(db=str(no_explicit_places / "mine.sqlite"))
    assert settings.database.path == no_explicit_places / "mine.sqlite"
    assert settings.origin("db") == "--db or APP_DB"


def test_threads_list_elsewhere_creates_nothing_and_names_the_database(
    no_explicit_places: Path, monkeypatch
):
    elsewhere = no_explicit_places / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    result = run_cli("threads", "list")

    assert result.returncode == 0
    user_db = no_explicit_places / "xdg" / "waypoint" / "agent.sqlite"
    assert (
        result.stdout.decode().split()
        == (
            f"no threads yet: {user_db} does not exist yet; start one with: waypoint chat "
            "--thread demo"
        ).split()
    )
    assert not user_db.exists() and not (elsewhere / "checkpoints").exists()


def test_a_chat_from_a_subdirectory_lands_in_the_project(no_explicit_places: Path, monkeypatch):
    project = no_explicit_places / "project"
    (project / "checkpoints").mkdir(parents=True)
    monkeypatch.chdir(project)
    assert run_cli("chat", "-t", "demo", "-m", "what is 1 plus 1").returncode == 0
    sub = project / "notes"
    sub.mkdir()
    monkeypatch.chdir(sub)

    listing = run_cli("threads", "list").stdout.decode()

    assert "demo" in listing
    assert not (sub / "checkpoints").exists()


def test_doctor_names_the_database_and_workspace_and_where_they_come_from(
    no_explicit_places: Path, monkeypatch
):
    project = no_explicit_places / "project"
    (project / "checkpoints").mkdir(parents=True)
    monkeypatch.chdir(project)

    out = " ".join(run_cli("doctor").stdout.decode().split())  # long values wrap

    assert f"{project / 'checkpoints' / 'agent.sqlite'}" in out
    assert f"{project / 'workspace'}" in out
    assert f"the project at {project}" in out
