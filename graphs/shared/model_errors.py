"""Sort model-call exceptions into the kinds the graph routes on (transient, fatal, context overflow)."""

from __future__ import annotations

import json
import re

from graphs.state import ErrorKind, LastError

MODEL_ERROR_KINDS = {"model_transient", "model_fatal", "context_overflow"}  # the model's failures
TRANSIENT_STATUS = {408, 409, 429}
FATAL_ADVICE = {
    400: "the endpoint rejected the request as invalid",
    401: "the endpoint rejected the credentials; check OPENAI_API_KEY",
    403: "the key is not allowed to use this model; check the key's permissions",
    404: "the model or URL was not found; check --model and OPENAI_BASE_URL",
}
# What langchain raises (as plain ValueErrors) for a 200 whose body is not a completion: a streamed
# body with no parsable SSE event (langchain-core), a non-JSON body (langchain-openai).
INVALID_RESPONSE_MESSAGES = (
    "No generations found in stream",
    "Unexpected response type from OpenAI-compatible endpoint",
)
# How OpenAI-compatible servers word a prompt that does not fit the model's context, in a 400
# body or in an error event inside a 200 stream (lower case; matched anywhere in the error).
OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI's error code; llama-cpp-python's server
    "maximum context length is",  # OpenAI, vLLM, llama-cpp-python: "This model's maximum ..."
    "exceeds the available context size",  # llama.cpp's llama-server (and Ollama's new runner)
    "exceed_context_size_error",  # llama-server's error type
    "exceed context window of",  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
    "input length exceeds the context length",  # Ollama
    "prompt is too long",  # Anthropic-style gateways
    "reduce the length of the messages",  # OpenAI and vLLM advice
    "longer than the model's context length",  # SGLang
)
# Statuses that are never an overflow even when the body mentions `n_ctx` (auth, routing, rate).
NOT_OVERFLOW_STATUS = {401, 403, 404, 408, 409, 429}
# The window a server states in its overflow error, in the wordings above.
WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d[\d,]*)", re.IGNORECASE),
    re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"\bn_ctx\b[\"']?\s*[:=]\s*(\d+)"),
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"model's context length \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"model's window: (\d[\d,]*) tokens", re.IGNORECASE),
)
# How many tokens the server counted in the refused prompt, in the same wordings: set against
# Waypoint's estimate of that prompt, it says how far the estimate undercounts this server.
PROMPT_PATTERNS = (
    re.compile(r"\((\d[\d,]*) in the messages", re.IGNORECASE),  # llama-cpp-python, vLLM (old)
    re.compile(r"request has (\d[\d,]*) input tokens", re.IGNORECASE),  # vLLM
    re.compile(r"messages resulted in (\d[\d,]*) tokens", re.IGNORECASE),  # OpenAI
    re.compile(r"request \((\d+) tokens\) exceeds", re.IGNORECASE),  # llama-server
    re.compile(r"\bn_prompt_tokens\b[\"']?\s*[:=]\s*(\d+)"),  # llama-server's body
    re.compile(r"Requested tokens \((\d+)\)"),  # llama-cpp-python's own wording
    re.compile(r"the server counted (\d[\d,]*) tokens", re.IGNORECASE),  # ours, below
)
EMPTY_STREAM = "No generations found in stream"
MASKED = re.compile(r"\*{5,}")
# An empty stream is an overflow when the prompt was at least this long: older llama-server builds
# send the overflow as a non-standard `error:` SSE field that clients ignore, and
# llama-cpp-python's server can end a stream without a chunk when the prompt does not fit.
LONG_PROMPT_TOKENS = 2000
LONG_PROMPT_SHARE = 0.6  # of a known window


def classify_model_error(exc: BaseException) -> LastError:
    """One place that decides whether a failed model call is worth retrying."""
    status = _status_code(exc)
    detail = _short(exc)
    if (known := self_classified(exc)) is not None:
        return known
    if _is_context_overflow(exc):
        return _error(
            "context_overflow",
            f"the conversation is too long for the model: {detail}{_counts_restated(exc, detail)}",
        )
    if status is not None:
        if status in TRANSIENT_STATUS or status >= 500:
            return _error("model_transient", f"HTTP {status}: {detail}", _retry_after(exc))
        advice = FATAL_ADVICE.get(status, "the endpoint refused the request")
        return _error("model_fatal", f"HTTP {status}: {advice} ({detail})")
    if is_invalid_response(exc):
        return _error("model_transient", f"invalid response from endpoint: {_what_came(exc)}")
    if is_timeout(exc):
        return _error("model_transient", f"the model endpoint did not answer in time: {detail}")
    if _is_network_error(exc):
        return _error("model_transient", f"could not reach the model endpoint: {detail}")
    return _error("model_fatal", f"the model call failed: {detail}")


def classify_call_error(
    exc: BaseException, prompt_tokens: int, window_tokens: int | None = None
) -> LastError:
    """`classify_model_error`, plus what only the prompt's size tells: a stream that ended without
    a generation right after a long prompt is a context overflow, not a flaky endpoint."""
    error = classify_model_error(exc)
    empty = error["kind"] == "model_transient" and EMPTY_STREAM in str(exc)
    if empty and is_long_prompt(prompt_tokens, window_tokens):
        return _error(
            "context_overflow",
            "the conversation is too long for the model: the endpoint ended the stream "
            f"without a reply to a prompt of about {prompt_tokens:,} tokens, which is how "
            "some servers report a prompt longer than the model's context window",
        )
    return error


def is_long_prompt(prompt_tokens: int, window_tokens: int | None) -> bool:
    if window_tokens:
        return prompt_tokens >= LONG_PROMPT_SHARE * window_tokens
    return prompt_tokens >= LONG_PROMPT_TOKENS


def window_from_error(exc: BaseException) -> int | None:
    """The context window an overflow error states, from its message or its JSON body."""
    return window_from_text(f"{exc} {_body_text(exc)}")


def window_from_text(text: str) -> int | None:
    return _first_number(WINDOW_PATTERNS, text)


def prompt_count_from_text(text: str) -> int | None:
    """The refused prompt's size by the server's own count, when its error says it."""
    return _first_number(PROMPT_PATTERNS, text)


def _first_number(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        if match := pattern.search(text):
            return int(match.group(1).replace(",", "")) or None
    return None


def _counts_restated(exc: BaseException, detail: str) -> str:
    """The window and the prompt's size the error states (in its message or its JSON body),
    restated so that the *_from_text readers find them in the message (the summarize node and
    the summariser's chunks learn from it); the detail may be cut short."""
    everything = f"{exc} {_body_text(exc)}"
    window, counted = window_from_text(everything), prompt_count_from_text(everything)
    stated = ""
    if window and window_from_text(detail) != window:
        stated += f" (the model's window: {window} tokens)"
    if counted and prompt_count_from_text(detail) != counted:
        stated += f" (the server counted {counted} tokens in the prompt)"
    return stated


def _error(kind: ErrorKind, message: str, retry_after: float | None = None) -> LastError:
    return LastError(kind=kind, message=message, retry_after=retry_after)


def _short(exc: BaseException, limit: int = 600) -> str:
    """The error's text, whole as long as it is reasonable: a masked key in it ("sk-proj-****…",
    160 stars in OpenAI's 401) is shortened rather than the advice after it cut off."""
    text = MASKED.sub("****", str(exc).strip()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _is_context_overflow(exc: BaseException) -> bool:
    if type(exc).__name__ == "ContextOverflowError":
        return True
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        code = code or body.get("code") or (error.get("code") if isinstance(error, dict) else None)
    if code == "context_length_exceeded":
        return True
    text = f"{exc} {_body_text(exc)}".lower()
    if any(marker in text for marker in OVERFLOW_MARKERS):
        return True
    return (
        _status_code(exc) not in NOT_OVERFLOW_STATUS and re.search(r"\bn_ctx\b", text) is not None
    )


def _body_text(exc: BaseException) -> str:
    """The error body as text (a dict from a 400 or from an error event inside a stream)."""
    body = getattr(exc, "body", None)
    if body is None:
        return ""
    try:
        return json.dumps(body, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(body)


def is_invalid_response(exc: BaseException) -> bool:
    """A 200 whose body was no completion (an empty stream, empty `choices`, not JSON)."""
    if isinstance(exc, json.JSONDecodeError | IndexError):
        return True
    return isinstance(exc, ValueError) and any(m in str(exc) for m in INVALID_RESPONSE_MESSAGES)


def _what_came(exc: BaseException) -> str:
    """An invalid response in the user's words: what the endpoint sent, not the parser's
    complaint ("list index out of range")."""
    if isinstance(exc, IndexError):
        return "the reply held no completion (its `choices` were empty)"
    if isinstance(exc, json.JSONDecodeError):
        return f"the reply was not JSON ({_short(exc, 200)})"
    return _short(exc)


def is_timeout(exc: BaseException) -> bool:
    """The request ran out of time (its own timeout, or the turn's deadline)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return isinstance(exc, TimeoutError) or bool(names & {"APITimeoutError", "TimeoutException"})


def _is_network_error(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names & {"APIConnectionError", "APITimeoutError", "TimeoutException", "TransportError"}
    )


# What servers answer when they cannot take tools at all (vLLM started without
# --enable-auto-tool-choice, llama-server without --jinja, models without tool support in Ollama).
TOOLS_REFUSED_MARKERS = (
    "tool choice requires --enable-auto-tool-choice",
    "--tool-call-parser",
    "tools param requires --jinja",
    "does not support tools",
    "tool calling is not supported",
    "tools are not supported",
)
TOOLS_REFUSED_ADVICE = (
    "the endpoint does not accept tool calls; use --tool-protocol react (or enable tool calling on "
    "the server)"
)


def refuses_tools(exc: BaseException) -> bool:
    """The endpoint rejected the request because it carried tools."""
    text = str(exc).lower()
    return any(marker.lower() in text for marker in TOOLS_REFUSED_MARKERS)


def self_classified(exc: BaseException) -> LastError | None:
    """Errors whose kind is known whatever the status code: one that says which kind it is
    (`error_kind`, e.g. a reply stopped for repeating itself), and a refusal of tools, which
    llama-server sends as a 500 but which no retry can cure."""
    kind = getattr(exc, "error_kind", None)
    if kind in {"model_transient", "model_fatal"}:
        return _error(kind, _short(exc))
    if refuses_tools(exc):
        status = _status_code(exc)
        prefix = f"HTTP {status}: " if status is not None else ""
        return _error("model_fatal", f"{prefix}{TOOLS_REFUSED_ADVICE} ({_short(exc)})")
    return None
