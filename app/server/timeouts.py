"""Connections that send nothing useful are closed: uvicorn times out an idle keep-alive connection
only after a response, so a client that opens a connection and sends half a request (or nothing)
would hold it forever. Here every request must arrive whole within the request timeout."""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def timed_protocol(request_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose next request (its headers and body) has
    not fully arrived `request_timeout` seconds after the connection opened or the last response."""

    class TimedH11Protocol(H11Protocol):
        _request_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            # uvicorn types it asyncio.Transport; the event loop hands this protocol one
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._request_timer = self.loop.call_later(request_timeout, self._close_if_incomplete)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _close_if_incomplete(self) -> None:
            waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol
