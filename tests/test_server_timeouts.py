"""The request timeout of both HTTP protocols serve may run (httptools, else h11): a half-sent
request is closed, a whole request being answered is not, however long it takes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn

from app.server.timeouts import timed_h11_protocol, timed_httptools_protocol, timed_protocol

TIMEOUT = 0.2  # seconds: the request timeout of these servers
PROTOCOLS = [timed_h11_protocol, timed_httptools_protocol]


class SlowApp:
    """Answers every request once `release` is set; `entered` says a request reached it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.entered.set()
        while not self.release.is_set():  # polled: the test's thread sets it
            await asyncio.sleep(0.01)
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]}
        )
        await send({"type": "http.response.body", "body": b"done"})


@contextlib.contextmanager
def serving(app: SlowApp, protocol: Callable[[float], type]) -> Iterator[tuple[str, int]]:
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, http=protocol(TIMEOUT), lifespan="off", log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(1000):  # bounded: the server's own start-up
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.01)
        assert server.started, "the server did not start"
        yield server.servers[0].sockets[0].getsockname()[:2]
    finally:
        app.release.set()
        server.should_exit = True
        thread.join(timeout=30)


def closed_by_server(connection: socket.socket) -> bool:
    connection.settimeout(30)  # bounds the test; the server closes it after TIMEOUT
    return connection.recv(1024) == b""


def answer_of(connection: socket.socket) -> bytes:
    connection.settimeout(30)
    answer = b""
    while not answer.endswith(b"done"):  # bounded by the timeout and the 4-byte body
        part = connection.recv(1024)
        if not part:
            break
        answer += part
    return answer


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["h11", "httptools"])
def test_a_half_sent_request_is_closed(protocol: Callable[[float], type]):
    app = SlowApp()
    with serving(app, protocol) as address:
        with socket.create_connection(address) as connection:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n")  # no blank line
            assert closed_by_server(connection)
        with socket.create_connection(address) as connection:
            headers = b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n"
            connection.sendall(headers + b"12345")  # half its body
            assert closed_by_server(connection)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["h11", "httptools"])
def test_a_whole_request_is_answered_however_long_it_takes(protocol: Callable[[float], type]):
    app = SlowApp()
    with serving(app, protocol) as address:
        with socket.create_connection(address) as whole:
            whole.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert app.entered.wait(30)
            # A connection opened after the whole request arrived is closed after TIMEOUT, so the
            # first connection's timer (armed earlier) has fired by then.
            with socket.create_connection(address) as idle:
                assert closed_by_server(idle)
            app.release.set()
            answer = answer_of(whole)
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"done")


def test_serve_runs_httptools_when_it_is_installed():
    assert timed_protocol(1.0).__name__ == "TimedHttpToolsProtocol"
