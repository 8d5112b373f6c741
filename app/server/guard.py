"""RequestGuard: what a request must look like before any route sees it. A server on loopback is
reachable from any web page through DNS rebinding and cross-site requests, so it checks `Host`,
`Origin` on state-changing methods, a JSON content type on POST/PUT/PATCH, and the body size."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.hosts import parse_host, same_origin, shown
from app.server.errors import ERROR_KINDS

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class RequestGuard:
    """ASGI middleware; refusals are JSON `{"detail", "error"}` like every other error."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str], max_body_bytes: int) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope["method"], headers)
        if refusal is None and "content-length" not in headers:
            # A chunked body: read at most the cap, then hand the app the bytes already read.
            body = await _read_capped(receive, self.max_body_bytes)
            if body is None:
                refusal = self._too_large()
            else:
                receive = _replay(body, receive)
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
        if method in WITH_BODY and not _json_or_bodyless(headers):
            given = headers.get("content-type")
            return _error(
                415,
                f"send Content-Type: application/json (got {given!r}); every {method} with a body "
                "or a content type needs it",
            )
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return _error(400, f"invalid Content-Length {length!r}")
            if int(length) > self.max_body_bytes:
                return self._too_large()
        return None

    def _host_problem(self, host: str, parsed: tuple[str, int | None] | None) -> str:
        names = ", ".join(shown(n) for n in sorted(self.allowed_hosts))
        if parsed is None:
            return f"invalid Host header {host!r}; this server answers to {names}"
        return (
            f"Host {parsed[0]!r} is not served here (this server answers to {names}); "
            f"if it names this server, start it with --allowed-host {shown(parsed[0])}"
        )

    def _too_large(self) -> JSONResponse:
        return _error(
            413,
            f"request body over {self.max_body_bytes} bytes (APP_MAX_BODY_BYTES); "
            "send less, e.g. a shorter message",
        )


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "error": ERROR_KINDS[status]}, status)


def _json_or_bodyless(headers: Headers) -> bool:
    """JSON, or no body and no content type at all (the SDKs' `runs.cancel`): a browser sends a
    cross-site request of either kind only with an Origin, which was checked before."""
    if _media_type(headers) == "application/json":
        return True
    bodyless = headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers
    return bodyless and "content-type" not in headers


def _media_type(headers: Headers) -> str:
    return headers.get("content-type", "").partition(";")[0].strip().lower()


async def _read_capped(receive: Receive, limit: int) -> Message | None:
    """The whole body as one message, or None once it passes `limit` (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return message  # the client left: the app sees the disconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


def _replay(first: Message, receive: Receive) -> Receive:
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
