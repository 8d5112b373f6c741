"""The `serve` command: the HTTP API and web page over uvicorn. FastAPI is imported only when it runs."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.cli.io import Invocation, load_settings
from app.cli.options import (
    ApproveOption,
    DbOption,
    ModelOption,
    WorkspaceOption,
    command_group,
    examples,
)
from app.errors import ConfigError
from app.hosts import WILDCARD_ADDRESSES, allowed_hosts

if TYPE_CHECKING:
    from app.config import Settings

commands = command_group()


@commands.command(
    epilog=examples(
        "serve",
        "serve --host 0.0.0.0 --port 8080 --allowed-host waypoint.lan",
        "APP_API_TOKEN=s3cret waypoint serve --approve auto",
        "serve --access-log",
    )
)
def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Interface to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, metavar="PORT", help="Port (0: pick a free one)."),
    ] = 8000,
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    model: ModelOption = None,
    approve: ApproveOption = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help=(
                "Another Host name this server answers to, besides localhost, 127.0.0.1, [::1] "
                "and the --host address; repeatable (env APP_ALLOWED_HOSTS, comma-separated). "
                "Requests for any other name get 400 (DNS rebinding)."
            ),
        ),
    ] = None,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log/--no-access-log",
            help="Log a line per request on stderr (off by default, as in `langgraph dev`).",
        ),
    ] = False,
) -> None:
    """Serve the HTTP API and the web page (at /).

    The LangGraph Server API (the official SDKs drive it); runs stream as Server-Sent Events."""
    io: Invocation = ctx.obj
    try:
        import uvicorn

        from app.server.api import create_app
        from app.server.timeouts import timed_protocol
        from app.service.runtime import settle_process
    except ImportError as exc:
        raise ConfigError(
            f"the server needs the serve extra ({exc.name} is missing): pip install -e '.[serve]'"
        ) from None
    settings = load_settings(
        db=db,
        workspace=workspace,
        model=model,
        approval=approve,
        allowed_hosts=allowed_host or None,
    )
    try:
        hosts = allowed_hosts(host, settings.allowed_hosts)
    except ValueError as exc:
        raise ConfigError(f"--host: {exc}") from None
    token = settings.api_token.get_secret_value() if settings.api_token else None
    settings = _with_users(settings, token)
    if host not in {"127.0.0.1", "localhost", "::1"} and not token and not settings.users_file:
        io.err.print(
            f"[yellow]listening on {host} without APP_API_TOKEN or users: anyone who can reach "
            "it can run the agent[/yellow]"
        )
    if host in WILDCARD_ADDRESSES and not settings.allowed_hosts:
        io.err.print(
            f"[yellow]listening on {host}: only requests for localhost, 127.0.0.1 or [::1] are "
            "answered; name this machine with --allowed-host NAME[/yellow]"
        )
    config = uvicorn.Config(
        create_app(settings, api_token=token, hosts=hosts),
        host=host,
        port=port,
        log_level="info",
        # A line per request was ~2.5 % of serve's CPU at 8 clients; errors are logged either way
        access_log=access_log,
        http=timed_protocol(settings.request_timeout),
        timeout_keep_alive=max(1, round(settings.idle_timeout)),
    )
    settle_process()
    _announced_server(config, lambda url: _announce(io, settings, url)).run()


def _with_users(settings: Settings, token: str | None) -> Settings:
    """The settings with the users file the server uses: APP_USERS_FILE, else the default one
    when it exists and no APP_API_TOKEN asks for one-token mode."""
    from app.config import default_users_file

    if settings.users_file is not None or token:
        return settings
    found = default_users_file()
    return settings.model_copy(update={"users_file": found}) if found.exists() else settings


def _announce(io: Invocation, settings: Settings, url: str) -> None:
    from app.cli.place import place_grid

    io.err.print(place_grid(settings, "serving the API and the web page", open=url))
    if settings.users_file is not None:
        io.err.print(
            f"users from {settings.users_file}: each sees only their own threads and memory",
            markup=False,
        )


def page_url(host: str, port: int) -> str:
    """The address to open: a wildcard host is reached as 127.0.0.1; an IPv6 one in brackets."""
    shown = "127.0.0.1" if host in WILDCARD_ADDRESSES else host
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def _announced_server(config: Any, announce: Callable[[str], None]) -> Any:
    """uvicorn's server, which says where it is once it listens (with --port 0 the port is known
    only then). Made here: uvicorn is imported only when `serve` runs."""
    import uvicorn

    class AnnouncedServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers and self.servers[0].sockets:
                port = self.servers[0].sockets[0].getsockname()[1]
                announce(page_url(self.config.host, port))

    return AnnouncedServer(config)
