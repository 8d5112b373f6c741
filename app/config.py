"""Settings, validated once at the edge: flags > APP_* environment > .env > defaults, and a
run's own choices (graphs/spec.RunSpec) over them with `Settings.with_run`."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.db.location import DatabaseLocation, parse_location
from app.errors import ConfigError
from app.hosts import host_name
from graphs.catalog import DEFAULT_STRATEGY, STRATEGY_NAMES
from graphs.run_settings import ENV_PREFIX, RunSettings, env_name
from graphs.spec import RunSpec

DEFAULT_OPENAI_MODEL = "openai:gpt-4o-mini"
ENV_FILE = ".env"
PROJECT_DATA_DIR = "checkpoints"  # a project's data directory, found the way git finds .git
DATABASE_FILE = "agent.sqlite"
APP_NAME = "waypoint"


@dataclass(frozen=True)
class DataHome:
    """Where the database and the workspace are when neither --db nor --workspace says: the
    nearest directory (the current one or a parent) that has `checkpoints/`, else the user's data
    directory (platformdirs: ~/.local/share/waypoint on Linux)."""

    database: Path
    workspace: Path
    origin: str  # what `doctor` and the REPL banner say about where it came from


def data_home(start: Path | None = None) -> DataHome:
    here = (start or Path.cwd()).absolute()
    for directory in (here, *here.parents):
        if (directory / PROJECT_DATA_DIR).is_dir():
            return DataHome(
                directory / PROJECT_DATA_DIR / DATABASE_FILE,
                directory / "workspace",
                f"the project at {directory}",
            )
    import platformdirs

    user_dir = platformdirs.user_data_path(APP_NAME)
    return DataHome(
        user_dir / DATABASE_FILE,
        user_dir / "workspace",
        f"the user data directory (no {PROJECT_DATA_DIR}/ here or in a parent)",
    )


def default_users_file() -> Path:
    """Where the HTTP server's users are when APP_USERS_FILE does not say: beside the default
    database (the project's `checkpoints/`, else the user data directory)."""
    return data_home().database.parent / "users.json"


class Settings(RunSettings, BaseSettings):
    """The environment's settings: every run setting (graphs/run_settings.py) and the
    process's own (where the database is, the tools' back ends, the server's limits)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_prefix_target="all",  # APP_APPROVE: the prefix goes on the approval's alias too
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="ignore",
        allow_inf_nan=False,  # APP_BACKOFF_CAP=inf would wait forever
    )

    db: str = Field(
        default_factory=lambda: str(data_home().database),
        description="SQLite file or postgresql:// URL",
    )
    corpus_db: Path | None = Field(None, description="SQLite file of the local search corpus")
    workspace: Path = Field(default_factory=lambda: data_home().workspace)
    max_input_chars: int = Field(100_000, ge=100)
    tool_protocol: Literal["native", "react"] = "native"
    mcp_config: Path | None = None
    search_backend: Literal["local", "ddgs", "tavily"] = "local"
    # On an engine whose store API scopes items by authenticated user (Aegra): "user" keeps
    # long-term memory under that scope, ("users", identity, "memories", user), where it is found.
    memory_scope: Literal["none", "user"] = "none"
    weather_backend: Literal["offline", "open-meteo"] = "offline"
    busy_timeout: float = Field(5.0, ge=0, le=3600)
    strategy: str = DEFAULT_STRATEGY
    api_token: SecretStr | None = Field(None, description="bearer token the HTTP server requires")
    users_file: Path | None = Field(
        None, description="the HTTP server's users and their hashed tokens (waypoint users add)"
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Host names the HTTP server answers besides loopback"
    )
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="largest HTTP request body")
    request_timeout: float = Field(
        30.0, gt=0, le=3600, description="seconds a client has to send a whole HTTP request"
    )
    idle_timeout: float = Field(
        15.0, gt=0, le=3600, description="seconds an idle keep-alive HTTP connection stays open"
    )

    def with_run(self, spec: RunSpec) -> Settings:
        """These settings with what a run's context chose; what it left out keeps the
        environment's value. The one way a RunSpec reaches a run (CLI, serve, langgraph.json)."""
        chosen = spec.chosen()
        return self.model_copy(update=chosen) if chosen else self

    run_lease_seconds: float = Field(
        30.0, ge=1, le=3600, description="how long a server's run outlives its silent process"
    )

    @property
    def chosen_strategy(self) -> str | None:
        """The strategy set by a flag, APP_STRATEGY or .env; None lets a thread keep its own."""
        return self.strategy if "strategy" in self.model_fields_set else None

    @property
    def model_spec(self) -> str:
        """The explicit model, else a real endpoint when one is configured, else the offline planner."""
        if self.model:
            return self.model
        if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
            return DEFAULT_OPENAI_MODEL
        return "offline"

    @field_validator("db", mode="before")
    @classmethod
    def _db_as_text(cls, value: object) -> object:
        value = os.fspath(value) if isinstance(value, os.PathLike) else value
        if isinstance(value, str):
            try:
                parse_location(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: object) -> object:
        if isinstance(value, str):  # APP_ALLOWED_HOSTS: comma- or space-separated
            value = value.replace(",", " ").split()
        if isinstance(value, list | tuple):
            return [host_name(str(name)) for name in value]
        return value

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        if value not in STRATEGY_NAMES:
            *others, last = (repr(name) for name in STRATEGY_NAMES)
            listed = f"{', '.join(others)} or {last}" if others else last
            raise ValueError(f"Input should be {listed}")
        return value

    @field_validator("workspace")
    @classmethod
    def _workspace_is_a_directory(cls, value: Path) -> Path:
        """A workspace that exists must be a directory, and one that does not must be creatable
        under a directory (the file tools create it on first use)."""
        for place in (value, *value.absolute().parents):
            try:
                is_dir = place.is_dir()
                exists = is_dir or place.exists() or place.is_symlink()
            except OSError as exc:  # a name too long, a loop of symlinks, no permission to look
                raise ValueError(f"the workspace {value} cannot be used: {exc.strerror}") from None
            if not exists:
                continue
            if is_dir:
                return value
            if place == value:
                kind = "a file, not a directory" if value.is_file() else "not a directory"
                raise ValueError(
                    f"the workspace {value} is {kind}; pass a directory "
                    "(it is created if missing) with --workspace or APP_WORKSPACE"
                )
            raise ValueError(
                f"the workspace {value} cannot be created: {place} is a file, not a directory"
            )
        return value

    @functools.cached_property
    def database(self) -> DatabaseLocation:
        """The parsed --db, parsed once: a SQLite path or a PostgreSQL URL (print its `label`,
        never the URL). Every command opens and locks through it, not through the text."""
        return parse_location(self.db)

    @property
    def corpus_path(self) -> Path:
        """The local corpus: APP_CORPUS_DB, else the SQLite database itself, else
        checkpoints/corpus.sqlite next to a server database."""
        location = self.database
        return self.corpus_db or location.path or location.local_dir / "corpus.sqlite"

    def origin(self, name: str) -> str:
        """Where the value of setting `name` ("db", "workspace") came from, for `doctor` and the
        REPL banner."""
        if name in self.model_fields_set:
            return f"--{name} or APP_{name.upper()}"
        return data_home().origin

    @property
    def chat_history_file(self) -> Path:
        return self.database.local_dir / "chat_history"


def load_settings(**overrides: Any) -> Settings:
    """Settings with the CLI's flags applied on top; flags left unset do not override."""
    check_clock_pin()
    check_env_file()
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])} ({_env_name(str(e['loc'][0]))}): "
            f"{str(e['msg']).removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the settings file {Path(ENV_FILE).absolute()} is not UTF-8 text (byte "
            f"{exc.start}); fix or remove it"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read the settings file {Path(ENV_FILE).absolute()}: {exc.strerror}"
        ) from None


def check_env_file() -> None:
    """A `.env` must be a regular file: reading a FIFO would block every command forever, a
    device would read without end."""
    path = Path(ENV_FILE)
    try:
        if not path.exists() or path.is_file():
            return
    except OSError as exc:
        raise ConfigError(
            f"cannot read the settings file {path.absolute()}: {exc.strerror}"
        ) from None
    raise ConfigError(
        f"the settings file {path.absolute()} is not a regular file (a pipe, device or "
        "directory); replace it with a file of NAME=value lines, or remove it"
    )


def _env_name(name: str) -> str:
    return env_name(name) if name in RunSettings.model_fields else f"{ENV_PREFIX}{name.upper()}"


def check_clock_pin() -> None:
    """A bad APP_NOW (the tools' pinned clock, read from the environment) is a configuration error
    at the edge, not a failure inside a tool call."""
    from tools.clock import PIN_VARIABLE, parse_pin

    pinned = os.environ.get(PIN_VARIABLE)
    if pinned:
        try:
            parse_pin(pinned)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
