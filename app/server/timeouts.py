"""Connections that send nothing useful are closed: uvicorn times out an idle keep-alive connection
only after a response, so a client that opens a connection and sends half a request (or nothing)
would hold it forever. Here every request must arrive whole within the request timeout."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def timed_protocol(request_timeout: float) -> type[Any]:
    """uvicorn's HTTP protocol closing a connection whose next request (headers and body) has not
    fully arrived `request_timeout` seconds after the connection opened or the last response: the
    httptools one (llhttp, in C: ~5 % of serve's CPU less than h11's parser in pure Python) when
    httptools is installed, else the h11 one."""
    if importlib.util.find_spec("httptools") is not None:
        return timed_httptools_protocol(request_timeout)
    return timed_h11_protocol(request_timeout)


class _RequestTimer:
    """Arms, re-arms and disarms one connection's timer; `expired` runs when it fires."""

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None

    def arm(self, loop: asyncio.AbstractEventLoop, seconds: float, expired: Any) -> None:
        self.disarm()
        self._handle = loop.call_later(seconds, expired)

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def timed_h11_protocol(request_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the request timeout (see `timed_protocol`)."""

    class TimedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            # uvicorn types it asyncio.Transport; the event loop hands this protocol one
            super().connection_made(transport)  # type: ignore[arg-type]
            self._request_timer = _RequestTimer()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._request_timer.disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self._request_timer.arm(self.loop, request_timeout, self._close_if_incomplete)

        def _close_if_incomplete(self) -> None:
            waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol


def timed_httptools_protocol(request_timeout: float) -> type[Any]:
    """uvicorn's httptools protocol with the request timeout (see `timed_protocol`)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class TimedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._request_timer = _RequestTimer()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._request_timer.disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self._request_timer.arm(self.loop, request_timeout, self._close_if_incomplete)

        def _close_if_incomplete(self) -> None:
            if not self._handling_a_request() and not self.transport.is_closing():
                self.transport.close()

        def _handling_a_request(self) -> bool:
            """A request arrived whole and is not answered yet (or one waits behind it)."""
            cycle = self.cycle
            whole = cycle is not None and not cycle.more_body and not cycle.response_complete
            return whole or bool(self.pipeline)

    return TimedHttpToolsProtocol
