"""RequestGuard: what a request must look like before any route sees it. A server on loopback is
reachable from any web page through DNS rebinding and cross-site requests, so it checks `Host`, and
`Origin` on state-changing methods."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.errors import ERROR_KINDS
from app.server.hosts import parse_host, same_origin, shown

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class RequestGuard:
    """ASGI middleware; refusals are JSON `{"detail", "error"}` like every other error."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str]) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope["method"], headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, method: str, headers: Headers) -> JSONResponse | None:
        host = headers.get("host", "")
        parsed = parse_host(host)
        if parsed is None or parsed[0] not in self.allowed_hosts:
            return _error(400, self._host_problem(host, parsed))
        origin = headers.get("origin")
        if method in STATE_CHANGING and origin is not None and not same_origin(origin, host):
            return _error(
                403,
                f"cross-origin request refused: Origin {origin!r} is not this server "
                f"(http://{host}); a web page may change threads only from the server's own page",
            )
        return None

    def _host_problem(self, host: str, parsed: tuple[str, int | None] | None) -> str:
        names = ", ".join(shown(n) for n in sorted(self.allowed_hosts))
        if parsed is None:
            return f"invalid Host header {host!r}; this server answers to {names}"
        return (
            f"Host {parsed[0]!r} is not served here (this server answers to {names}); "
            f"if it names this server, start it with --allowed-host {shown(parsed[0])}"
        )


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "error": ERROR_KINDS[status]}, status)
