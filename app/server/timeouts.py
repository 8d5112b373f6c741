"""Connections that send nothing useful are closed: uvicorn times out an idle keep-alive connection
only after a response, so a client that opens a connection and sends half a request (or nothing)
would hold it forever. Here every request must arrive whole within the request timeout."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

P = TypeVar("P")


def timed_protocol(request_timeout: float) -> type[Any]:
    """uvicorn's HTTP protocol closing a connection whose next request (headers and body) has not
    fully arrived `request_timeout` seconds after the connection opened or the last response: the
    httptools one (its parser, llhttp, in C; h11's is pure Python) when httptools is installed,
    else the h11 one."""
    if importlib.util.find_spec("httptools") is not None:
        return timed_httptools_protocol(request_timeout)
    return timed_h11_protocol(request_timeout)


def timed_h11_protocol(request_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the request timeout (see `timed_protocol`)."""
    return _timed(H11Protocol, request_timeout, _h11_waiting)


def timed_httptools_protocol(request_timeout: float) -> type[Any]:
    """uvicorn's httptools protocol with the request timeout (see `timed_protocol`)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return _timed(HttpToolsProtocol, request_timeout, _httptools_waiting)


def _h11_waiting(protocol: Any) -> bool:
    """No request has arrived whole since the last response (or its body is still coming)."""
    return protocol.conn.their_state in (h11.IDLE, h11.SEND_BODY)


def _httptools_waiting(protocol: Any) -> bool:
    """No request has arrived whole and waits for its answer (nor one queued behind it)."""
    cycle = protocol.cycle
    answering = cycle is not None and not cycle.more_body and not cycle.response_complete
    return not answering and not protocol.pipeline


def _timed(base: type[P], request_timeout: float, waiting: Callable[[Any], bool]) -> type[P]:
    """`base` closing a connection still `waiting` for its request `request_timeout` seconds
    after the connection opened or the last response."""

    class Timed(base):  # type: ignore[valid-type,misc]
        _request_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            # uvicorn types it asyncio.Transport; the event loop hands this protocol one
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._request_timer = self.loop.call_later(request_timeout, self._close_if_waiting)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _close_if_waiting(self) -> None:
            if waiting(self) and not self.transport.is_closing():
                self.transport.close()

    Timed.__name__ = Timed.__qualname__ = f"Timed{base.__name__}"
    return Timed
