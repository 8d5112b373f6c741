"""A real OpenAI-compatible HTTP server on 127.0.0.1 that plays a per-test script of replies and faults,
and records every request it received (the `openai_server` fixture, or `with OpenAIServer() as s`)."""

from __future__ import annotations

import contextlib
import itertools
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

COMPLETIONS_PATH = "/v1/chat/completions"
EXHAUSTED = "script exhausted"
JOIN_TIMEOUT = 5.0


@dataclass(frozen=True)
class Reply:
    """One scripted response. Build it with the helpers below, not directly."""

    kind: str  # message | error | raw | empty_choices | hang | sse | pings | broken_stream
    content: str = ""
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments JSON text)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    chunks: int = 3
    status: int = 200
    body: str = ""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    every: float = 0.0  # streamed: seconds between two events (a slow model, a keep-alive ping)


def text(
    content: str,
    *,
    finish_reason: str = "stop",
    usage: dict[str, int] | None = None,
    chunks: int = 3,
) -> Reply:
    """An assistant answer; streamed as `chunks` content deltas when the request asks for a stream."""
    return Reply(
        "message", content=content, finish_reason=finish_reason, usage=usage, chunks=chunks
    )


def tool_call(name: str, arguments: dict | str, call_id: str = "call_1") -> tuple[str, str, str]:
    """One call for `tool_calls`; `arguments` as a string is sent verbatim (e.g. broken JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return (call_id, name, raw)


def tool_calls(
    *calls: tuple[str, str, str],
    content: str = "",
    finish_reason: str = "tool_calls",
    usage: dict[str, int] | None = None,
    chunks: int = 3,
) -> Reply:
    """Assistant tool calls; streamed with each call's arguments split across `chunks` deltas."""
    return Reply(
        "message",
        content=content,
        tool_calls=calls,
        finish_reason=finish_reason,
        usage=usage,
        chunks=chunks,
    )


def error(
    status: int,
    message: str,
    *,
    type: str = "api_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An HTTP error with an OpenAI-style body: {"error": {"message", "type", "code"}}."""
    body = json.dumps({"error": {"message": message, "type": type, "param": None, "code": code}})
    return Reply("error", status=status, body=body, headers=headers or {})


def raw(
    status: int,
    body: str,
    content_type: str = "text/html",
    headers: dict[str, str] | None = None,
) -> Reply:
    """Any body with any status and content type (an HTML 503 page, a non-JSON 200)."""
    return Reply("raw", status=status, body=body, content_type=content_type, headers=headers or {})


def empty_choices() -> Reply:
    """A well-formed completion whose `choices` list is empty (streamed: chunks without choices)."""
    return Reply("empty_choices")


def sse(body: str) -> Reply:
    """A 200 event stream whose body is `body` verbatim (error events, an empty stream, ...)."""
    return Reply("sse", body=body, content_type="text/event-stream")


def pings(seconds: float = 60.0, every: float = 0.2) -> Reply:
    """A 200 event stream of `: ping` comments only, one every `every` seconds for `seconds` (or
    until the client hangs up): llama-cpp-python's server sends one every 15 s while a request
    waits for the model."""
    return Reply("pings", seconds=seconds, every=every)


def slow_text(content: str, every: float, chunks: int) -> Reply:
    """`text` streamed as `chunks` deltas with `every` seconds before each (a slow model)."""
    return Reply("message", content=content, finish_reason="stop", chunks=chunks, every=every)


def broken_stream() -> Reply:
    """Streamed: a 200 whose stream ends without a chunk, on a connection the server then drops
    (llama-cpp-python when the prompt does not fit: the error is raised inside its stream)."""
    return Reply("broken_stream")


def hang(seconds: float = 30.0) -> Reply:
    """Accept the request and answer nothing for `seconds` (or until the server stops or the
    client hangs up)."""
    return Reply("hang", seconds=seconds)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or the raw text when it is not JSON
    outcome: str  # kind of the scripted reply that answered it, or "exhausted" / "not_found"
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


class OpenAIServer:
    """Serves `POST /v1/chat/completions` from `script` (a queue) and records every request."""

    def __init__(
        self, script: list[Reply] | None = None, quirks: frozenset[str] = frozenset()
    ) -> None:
        """`quirks`: real servers' behaviours to reproduce (QUIRKS, e.g. LLAMA_CPP_PYTHON)."""
        self.script: list[Reply] = list(script or [])
        self.quirks = frozenset(quirks)
        assert self.quirks <= QUIRKS, f"unknown quirks {self.quirks - QUIRKS}"
        self.requests: list[Recorded] = []
        # Other routes (GET /v1/models, /props, POST /api/show, ...): (method, path) -> (status, JSON)
        self.routes: dict[tuple[str, str], tuple[int, Any]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.hung_up = threading.Event()  # a client closed a connection this server still served
        # closes_after_empty_stream: a request came on a connection the server had broken off
        self.dropped_a_request = threading.Event()
        self._handlers: list[threading.Thread] = []
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- script and record ------------------------------------------------------------------

    def add(self, *replies: Reply) -> OpenAIServer:
        with self._lock:
            self.script.extend(replies)
        return self

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def completions(self) -> list[Recorded]:
        """Requests to the completions endpoint: one per HTTP attempt of the client."""
        return [r for r in self.requests if r.path == COMPLETIONS_PATH]

    @property
    def exhausted(self) -> list[Recorded]:
        return [r for r in self.requests if r.outcome == "exhausted"]

    def assert_done(self) -> None:
        """Every scripted reply was used and no request found the script empty."""
        assert not self.exhausted, (
            f"{len(self.exhausted)} request(s) arrived after the script ran dry"
        )
        assert not self.script, f"{len(self.script)} scripted replies were never requested"

    def route(self, method: str, path: str, body: Any, status: int = 200) -> OpenAIServer:
        """Answer `method path` (any request but chat completions) with `body` as JSON, always."""
        with self._lock:
            self.routes[(method, path)] = (status, body)
        return self

    def discard_unused(self) -> list[Reply]:
        """Take back the replies nobody asked for (e.g. a success scripted after a fatal error)."""
        with self._lock:
            unused, self.script = self.script, []
        return unused

    def _next(self, recorded: dict) -> Reply | None:
        with self._lock:
            reply = self.script.pop(0) if self.script else None
            outcome = reply.kind if reply else "exhausted"
            self.requests.append(Recorded(**recorded, outcome=outcome, reply=reply))
            return reply

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True  # never keeps the interpreter alive; joined in stop()
        self._httpd.block_on_close = False
        self._httpd.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake hanging handlers, stop accepting, and wait (bounded) for every thread to end."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        deadline = time.monotonic() + JOIN_TIMEOUT
        for thread in [self._thread, *self._handlers]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in [self._thread, *self._handlers] if t is not None and t.is_alive()]
        self._httpd = None
        assert not alive, f"server threads still running after stop: {alive}"

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # a client that stops reading cannot pin a handler thread

    @property
    def owner(self) -> OpenAIServer:
        return self.server.owner  # type: ignore[attr-defined]

    def handle(self) -> None:
        with self.owner._lock:
            self.owner._handlers.append(threading.current_thread())
        # The client may give up (timeout, cancelled stream): then there is nothing left to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._record_other()

    def do_POST(self) -> None:
        if getattr(self, "drop_next_request", False):
            # llama-cpp-python closes the connection it broke a stream off on, without saying so:
            # the next request a client's pool sends on it gets no response at all.
            self.owner.dropped_a_request.set()
            self.close_connection = True
            return
        if self.path != COMPLETIONS_PATH:
            self._record_other()
            return
        length = int(self.headers.get("content-length") or 0)
        raw_body = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw_body)
        except ValueError:
            body = raw_body
        recorded = {
            "method": "POST",
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        if self.owner.quirks and _play_quirk(self, body, recorded):
            return
        reply = self.owner._next(recorded)
        if reply is not None and _drops_tools(self.owner.quirks, body):
            reply = _without_tools(reply)
        if reply is None:
            message = f"{EXHAUSTED}: request {len(self.owner.requests)} had no scripted reply"
            self._send(500, _error_body(message, "server_error", EXHAUSTED))
            return
        stream = isinstance(body, dict) and bool(body.get("stream"))
        include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))
        self._play(reply, stream, include_usage, str(body.get("model", "")))

    def _record_other(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw_body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        with self.owner._lock:
            routed = self.owner.routes.get((self.command, self.path))
            self.owner.requests.append(
                Recorded(
                    self.command,
                    self.path,
                    dict(self.headers),
                    raw_body or None,
                    "route" if routed else "not_found",
                )
            )
        if routed:
            self._send(routed[0], json.dumps(routed[1]))
            return
        message = f"no route for {self.command} {self.path}"
        self._send(404, _error_body(message, "invalid_request_error", "not_found"))

    def _hang(self, seconds: float) -> None:
        """Answer nothing for `seconds`, until the server stops or the client hangs up (a client
        that timed out closes its connection: then nobody waits for this handler any more)."""
        self._client_gone(seconds)

    def _client_gone(self, seconds: float) -> bool:
        """Wait up to `seconds` (less when the server stops); True, and recorded in `hung_up`, when
        the client closed the connection meanwhile."""
        end = time.monotonic() + seconds
        while not self.owner._stopping.is_set() and (left := end - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(0.05, left))
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                self.owner.hung_up.set()
                return True
        return False

    def _ping(self, reply: Reply) -> None:
        """Keep-alive comments only, never an event (see `pings`)."""
        self._start_stream()
        end = time.monotonic() + reply.seconds
        while time.monotonic() < end and not self.owner._stopping.is_set():
            if self._client_gone(reply.every) or not self._write_chunk(b": ping\n\n"):
                return
        self._end_stream()

    def _play(self, reply: Reply, stream: bool, include_usage: bool, model: str) -> None:
        completion_id = f"chatcmpl-{next(self.owner._ids)}"
        if reply.kind == "hang":
            self._hang(reply.seconds)
            self.close_connection = True  # no response at all: the client must time out
            return
        if reply.kind == "pings":
            self._ping(reply)
            return
        if reply.kind == "broken_stream":
            self._send_stream_keeping_the_connection([])  # not even [DONE]
            self.drop_next_request = True
            return
        if reply.kind in {"error", "raw", "sse"}:
            self._send(reply.status, reply.body, reply.content_type, reply.headers)
        elif stream:
            chunks = _repeating_name_chunks if "repeat_name" in self.owner.quirks else _chunks
            events = chunks(reply, completion_id, model, include_usage)
            self._send_stream([*(json.dumps(e) for e in events), "[DONE]"], reply.every)
        elif reply.kind == "empty_choices":
            self._send(200, json.dumps(_completion(completion_id, model, [], None)))
        else:
            choice = {
                "index": 0,
                "message": _message(reply),
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
            self._send(200, json.dumps(_completion(completion_id, model, [choice], reply.usage)))

    def _send(
        self,
        status: int,
        body: str,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _send_stream(self, events: list[str], every: float = 0.0) -> None:
        """`events` as SSE `data:` lines, `every` seconds apart (ended early if the client hangs
        up)."""
        self._start_stream()
        for event in events:
            if every and self._client_gone(every):
                return
            if not self._write_chunk(f"data: {event}\n\n".encode()):
                return
        self._end_stream()

    def _send_stream_keeping_the_connection(self, events: list[str]) -> None:
        """`events` as one SSE stream, without `Connection: close` (so a client keeps it)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self._write_chunk(f"data: {event}\n\n".encode())
        self._end_stream()
        self.close_connection = False

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True

    def _write_chunk(self, data: bytes) -> bool:
        """One HTTP chunk; False (recorded in `hung_up`) when the client has hung up."""
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.owner.hung_up.set()
            return False
        return True

    def _end_stream(self) -> None:
        self._write_chunk(b"")


def _error_body(message: str, type_: str, code: str) -> str:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


def _completion(completion_id: str, model: str, choices: list, usage: dict | None) -> dict:
    body = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    return body | ({"usage": _usage(usage)} if usage else {})


def _usage(usage: dict[str, int]) -> dict[str, int]:
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion} | {
        "total_tokens": usage.get("total_tokens", prompt + completion)
    }


def _message(reply: Reply) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in reply.tool_calls
        ]
    return message


def _chunks(reply: Reply, completion_id: str, model: str, include_usage: bool) -> Iterator[dict]:
    """The SSE events of one reply, shaped like OpenAI's: role first, deltas, finish, usage."""

    def chunk(choices: list, **extra: Any) -> dict:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
        } | extra

    def delta(fields: dict, finish_reason: str | None = None) -> list:
        return [{"index": 0, "delta": fields, "finish_reason": finish_reason, "logprobs": None}]

    if reply.kind == "empty_choices":
        yield chunk([])
        return
    yield chunk(delta({"role": "assistant", "content": ""}))
    for piece in _split(reply.content, reply.chunks):
        yield chunk(delta({"content": piece}))
    for index, (call_id, name, args) in enumerate(reply.tool_calls):
        opening = {"index": index, "id": call_id, "type": "function"}
        yield chunk(
            delta({"tool_calls": [opening | {"function": {"name": name, "arguments": ""}}]})
        )
        for piece in _split(args, reply.chunks):
            yield chunk(delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    usage = _usage(reply.usage) if reply.usage else None
    if usage and not include_usage:
        yield chunk(delta({}, reply.finish_reason), usage=usage)  # vLLM-style: usage on the last
        return
    yield chunk(delta({}, reply.finish_reason))
    if usage:
        yield chunk([], usage=usage)


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A running server; the test fails at teardown if any request found the script empty."""
    with OpenAIServer() as server:
        yield server
        assert not server.exhausted, (
            f"{len(server.exhausted)} request(s) arrived after the script ran dry: "
            + "; ".join(str(r.messages[-1:]) for r in server.exhausted)
        )


# --- real servers' quirks -----------------------------------------------------------------------
# Each is what a server does, from its source or its issue tracker (README, "Which servers"):
# - null_content_rejected: an assistant message with `content: null` is refused (llama-server since
#   b5331 answers 500 "Expected 'content' to be a string or an array"; llama-cpp-python's chat
#   templates concatenate the content and fail; Ollama and LM Studio answer 400).
# - tools_need_tool_choice: without `tool_choice` the tools are left out of the prompt
#   (llama-cpp-python's function-calling handlers treat a missing tool_choice like "none"), so the
#   model answers in text, whatever it makes up.
# - auto_stream_empty: a streamed request with tools and tool_choice "auto" gets a 200 with an
#   empty stream (llama-cpp-python: automatic tool choice is not supported when streaming).
# - repeat_name: streamed tool calls repeat the call's id and name in every chunk, with a
#   `function_call` copy (llama-cpp-python's streamed function-call chunks).
QUIRKS = frozenset(
    {
        "null_content_rejected",
        "tools_need_tool_choice",
        "auto_stream_empty",
        "closes_after_empty_stream",
        "repeat_name",
    }
)
LLAMA_CPP_PYTHON = QUIRKS
NULL_CONTENT_ERROR = "Expected 'content' to be a string or an array"
INVENTED_ANSWER = "The answer is probably 20."


def _play_quirk(handler: _Handler, body: Any, recorded: dict) -> bool:
    """Answer the request the way the quirky server would, before the script is consulted; True
    when it was answered (the script is left as it was)."""
    quirks = handler.owner.quirks
    if not isinstance(body, dict):
        return False
    messages = body.get("messages") or []
    if "null_content_rejected" in quirks and any(m.get("content", "") is None for m in messages):
        _record(handler.owner, recorded, "null_content_rejected")
        handler._send(
            500,
            json.dumps(
                {"error": {"code": 500, "message": NULL_CONTENT_ERROR, "type": "server_error"}}
            ),
        )
        return True
    automatic = body.get("tools") and body.get("tool_choice") == "auto"
    if "auto_stream_empty" in quirks and body.get("stream") and automatic:
        _record(handler.owner, recorded, "empty_stream")
        if "closes_after_empty_stream" in quirks:
            handler._send_stream_keeping_the_connection([])  # broken off: not even [DONE]
            handler.drop_next_request = True
        else:
            handler._send_stream(["[DONE]"])
        return True
    return False


def _record(server: OpenAIServer, recorded: dict, outcome: str) -> None:
    with server._lock:
        server.requests.append(Recorded(**recorded, outcome=outcome))


def _drops_tools(quirks: frozenset[str], body: Any) -> bool:
    return (
        "tools_need_tool_choice" in quirks
        and isinstance(body, dict)
        and bool(body.get("tools"))
        and "tool_choice" not in body
    )


def _without_tools(reply: Reply) -> Reply:
    """What a model that never saw the tools says instead of the scripted calls."""
    if not reply.tool_calls:
        return reply
    return text(reply.content or INVENTED_ANSWER, usage=reply.usage, chunks=reply.chunks)


def _repeating_name_chunks(
    reply: Reply, completion_id: str, model: str, include_usage: bool
) -> Iterator[dict]:
    """`_chunks`, except that every tool-call delta repeats the call's id and name and carries a
    `function_call` copy, as llama-cpp-python streams them."""
    for event in _chunks(reply, completion_id, model, include_usage):
        for choice in event.get("choices", []):
            for delta_call in choice.get("delta", {}).get("tool_calls") or []:
                call_id, name, _ = reply.tool_calls[delta_call["index"]]
                function = delta_call.setdefault("function", {})
                function["name"] = name
                delta_call |= {"id": call_id, "type": "function"}
                choice["delta"]["function_call"] = {
                    "name": name,
                    "arguments": function.get("arguments", ""),
                }
        yield event
