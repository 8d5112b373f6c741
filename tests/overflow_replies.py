"""The exact ways OpenAI-compatible servers say "the prompt does not fit the context window", as
scripted replies for tests/openai_server.py, and the routes where they advertise the window.

Shapes taken from the servers' sources and from reports of real responses:
- llama.cpp's llama-server: 400 {"error": {"code", "message", "type": "exceed_context_size_error",
  "n_prompt_tokens", "n_ctx"}}; older builds answered "the request exceeds the available context size,
  try increasing it"; inside a stream, newer builds send `data: {"error": ...}` and older ones a
  non-standard `error: {...}` SSE field that clients ignore (so the stream looks empty).
- llama-cpp-python's server: 400 with OpenAI's wording and code "context_length_exceeded"; an overflow
  raised inside its stream generator ends the stream without a chunk.
- vLLM: 400 "This model's maximum context length is N tokens. However, ..." with type BadRequestError and
  an integer code; before v0.11 the body was the error object itself ({"object": "error", ...}).
- Ollama (/v1): 400 {"error": {"message": "the input length exceeds the context length",
  "type": "invalid_request_error"}}; inside a stream as a `data:` error event.
- The OpenAI API: 400 with code "context_length_exceeded".
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

from graphs.shared.summarize import SUMMARIZE_INSTRUCTION
from tests.openai_server import OpenAIServer, Recorded, Reply, broken_stream, raw, sse, text


def _json(status: int, body: dict) -> Reply:
    return raw(status, json.dumps(body), "application/json")


def llama_cpp_400(prompt: int, window: int) -> Reply:
    return _json(400, {"error": _llama_cpp_error(prompt, window)})


def llama_cpp_400_old() -> Reply:
    message = "the request exceeds the available context size, try increasing it"
    return _json(400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}})


def llama_cpp_stream_error(prompt: int, window: int) -> Reply:
    return sse(f"data: {json.dumps({'error': _llama_cpp_error(prompt, window)})}\n\n")


def llama_cpp_stream_error_field(prompt: int, window: int) -> Reply:
    """Older llama-server: `error: {...}` is not an SSE field a client reads, so nothing arrives."""
    return sse(f"error: {json.dumps(_llama_cpp_error(prompt, window))}\n\n")


def _llama_cpp_error(prompt: int, window: int) -> dict:
    return {
        "code": 400,
        "message": f"request ({prompt} tokens) exceeds the available context size "
        f"({window} tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": prompt,
        "n_ctx": window,
    }


def llama_cpp_python_400(prompt: int, window: int, completion: int = 0) -> Reply:
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return _json(400, {"error": error})


def empty_stream() -> Reply:
    """A 200 event stream that ends without a single chunk."""
    return sse("data: [DONE]\n\n")


def vllm_400(prompt: int, window: int) -> Reply:
    message = (
        f"This model's maximum context length is {window} tokens. However, your request has "
        f"{prompt} input tokens. Please reduce the length of the input messages."
    )
    error = {"message": message, "type": "BadRequestError", "param": None, "code": 400}
    return _json(400, {"error": error})


def vllm_400_legacy(prompt: int, window: int, completion: int = 16) -> Reply:
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    body = {
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    return _json(400, body)


OLLAMA_OVERFLOW = "the input length exceeds the context length"


def ollama_400() -> Reply:
    error = {"message": OLLAMA_OVERFLOW, "type": "invalid_request_error", "param": None}
    return _json(400, {"error": error | {"code": None}})


def ollama_stream_error() -> Reply:
    error = {"message": OLLAMA_OVERFLOW, "type": "api_error", "param": None, "code": None}
    return sse(f"data: {json.dumps({'error': error})}\n\n")


def openai_400(prompt: int, window: int) -> Reply:
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted "
        f"in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return _json(400, {"error": error})


# --- where each server advertises the window ---------------------------------------------------


def advertise_llama_cpp(server: OpenAIServer, model: str, n_ctx: int, n_ctx_train: int) -> None:
    meta = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": n_ctx_train, "n_embd": 576}
    server.route(
        "GET",
        "/v1/models",
        {"object": "list", "data": [{"id": model, "object": "model", "meta": meta}]},
    )
    server.route(
        "GET",
        "/props",
        {"default_generation_settings": {"id": 0, "n_ctx": n_ctx}, "total_slots": 1},
    )


def advertise_vllm(server: OpenAIServer, model: str, max_model_len: int) -> None:
    card = {"id": model, "object": "model", "owned_by": "vllm", "max_model_len": max_model_len}
    server.route("GET", "/v1/models", {"object": "list", "data": [card]})


def advertise_ollama(
    server: OpenAIServer, model: str, training: int, num_ctx: int | None = None
) -> None:
    parameters = 'stop "<|im_end|>"' + (f"\nnum_ctx {num_ctx}" if num_ctx else "")
    info = {"general.architecture": "llama", "llama.context_length": training}
    server.route("POST", "/api/show", {"parameters": parameters, "model_info": info})


def advertise_ollama_loaded(server: OpenAIServer, model: str, context_length: int) -> None:
    entry = {"name": model, "model": model, "context_length": context_length}
    server.route("GET", "/api/ps", {"models": [entry]})


def advertise_lmstudio(server: OpenAIServer, model: str, loaded: int, maximum: int) -> None:
    entry = {"id": model, "state": "loaded", "loaded_context_length": loaded}
    server.route("GET", f"/api/v0/models/{model}", entry | {"max_context_length": maximum})


# --- a server that enforces its window ---------------------------------------------------------

CHARS_PER_TOKEN = 3.5  # the server's "tokenizer" counts more tokens than Waypoint's estimate (4)


def request_tokens(body: Any) -> int:
    """What the fake server counts for a request: every message and tool schema, as JSON."""
    if not isinstance(body, dict):
        return 0
    sent = {"messages": body.get("messages", []), "tools": body.get("tools", [])}
    return int(len(json.dumps(sent, ensure_ascii=False)) / CHARS_PER_TOKEN)


ENTITY = re.compile(r"&#?\w+;")
TOKENS_PER_ENTITY = 4  # "&#34;" is four of SmolLM2's tokens or more


def chatml_escaped_tokens(body: Any) -> int:
    """What llama-cpp-python's `chatml-function-calling` format counts: its template HTML-escapes
    every message (a quote becomes `&#34;`), so JSON schemas in a ReAct prompt cost ~2.3x
    Waypoint's estimate and prose ~0.9x (measured with SmolLM2's tokenizer: 2,533 tokens for a
    ReAct system prompt Waypoint counts as 1,101; 204 for a paragraph it counts as 230)."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    rendered = "".join(
        f"<|im_start|>{m.get('role')}\n{html.escape(str(m.get('content') or ''))}<|im_end|>\n"
        for m in messages
        if isinstance(m, dict)
    )
    entities = len(ENTITY.findall(rendered))
    return int(len(rendered) / 4.4) + TOKENS_PER_ENTITY * entities


class WindowedServer(OpenAIServer):
    """An OpenAIServer with a context window: a request longer than `window` tokens (as `count`
    counts them) gets `overflow(prompt_tokens, window)` (the scripted reply stays queued; with
    `breaks_streams`, a streamed one gets a broken-off empty stream instead), and a
    summarisation request that fits is answered with `summary` (so the script holds only the
    answers to user turns)."""

    def __init__(
        self,
        window: int,
        overflow: Callable[[int, int], Reply],
        summary: str = "Summary: the user sent long notes about their garden and got answers.",
        count: Callable[[Any], int] = request_tokens,
        breaks_streams: bool = False,
    ) -> None:
        super().__init__()
        self.window, self.overflow, self.summary = window, overflow, summary
        self.count = count
        self.breaks_streams = breaks_streams

    @property
    def overflows(self) -> list[Recorded]:
        return [r for r in self.requests if r.outcome == "overflow"]

    @property
    def summaries(self) -> list[Recorded]:
        return [r for r in self.requests if r.outcome == "summary"]

    def _next(self, recorded: dict) -> Reply | None:
        tokens = self.count(recorded["body"])
        messages = (
            recorded["body"].get("messages", []) if isinstance(recorded["body"], dict) else []
        )
        streamed = isinstance(recorded["body"], dict) and bool(recorded["body"].get("stream"))
        if tokens > self.window and streamed and self.breaks_streams:
            reply, outcome = broken_stream(), "overflow_in_stream"
        elif tokens > self.window:
            reply, outcome = self.overflow(tokens, self.window), "overflow"
        elif messages and str(messages[0].get("content")).startswith(SUMMARIZE_INSTRUCTION):
            reply, outcome = text(self.summary), "summary"
        else:
            return super()._next(recorded)
        with self._lock:
            self.requests.append(Recorded(**recorded, outcome=outcome, reply=reply))
        return reply
