"""The HTTP client of the OpenAI-compatible models: every connect, write and read on its sockets ends
by the turn's deadline (graphs/shared/deadline.py), so bytes that carry no reply (keep-alive pings, a
slow stream) cannot hold a request past the time budget, and the connection is closed when it ends.
"""

from __future__ import annotations

import functools
from typing import Any

import httpcore
import httpx

from graphs.shared.deadline import seconds_left

BUDGET_SPENT = "the turn's time budget ran out while waiting for the model endpoint"


def bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` shortened to what is left of the current deadline; `error` once nothing is."""
    left = seconds_left()
    if left is None:
        return timeout
    if left <= 0:
        raise error(BUDGET_SPENT)
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every operation waits at most until the deadline. httpcore's own read
    timeout starts again with every byte that arrives, so a `: ping` every 15 s never ends it."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bound = bounded(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, bound))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with its streams wrapped in `DeadlineStream`."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        bound = bounded(timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, bound, local_address, socket_options)
        return DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        bound = bounded(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._backend.connect_unix_socket(path, bound, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class DeadlineClient(httpx.Client):
    """An httpx client whose transports (direct, and through the proxies the environment names)
    use `DeadlineBackend`. httpx offers no public way to choose the network backend, so the pool
    each transport makes gets it here; `with_deadline` checks that the pool has the attribute."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx.BaseTransport:
        return with_deadline(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx.BaseTransport:
        return with_deadline(super()._init_proxy_transport(*args, **kwargs))


def with_deadline(transport: httpx.BaseTransport) -> httpx.BaseTransport:
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:
        raise RuntimeError("this httpx/httpcore version hides its network backend")
    if not isinstance(backend, DeadlineBackend):
        pool._network_backend = DeadlineBackend(backend)  # type: ignore[union-attr]
    return transport


@functools.cache
def deadline_client() -> httpx.Client:
    """The process's one client (its connection pool shared by every model; the deadline is read
    at each operation, so one pool serves turns with different budgets)."""
    return DeadlineClient(follow_redirects=True, limits=httpx.Limits(max_connections=100))
