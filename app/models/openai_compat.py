"""`CompatibleChatOpenAI`: ChatOpenAI as the OpenAI-compatible servers people run need to be spoken to,
and the repairs their streamed replies need. Each rule below is a server's documented or observed
behaviour (see README, "Which servers").
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import httpx
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr

from graphs.shared.deadline import TurnTimeSpentError, model_deadline, seconds_left
from graphs.shared.model_errors import (
    EMPTY_STREAM,
    classify_model_error,
    is_invalid_response,
    is_timeout,
)

# How much repetition ends a reply: the same text at least MIN_REPEATS times in a row, covering
# at least MIN_SPAN characters, with a repeated unit of at most MAX_PERIOD characters.
MIN_REPEATS = 4
MIN_SPAN = 400
MAX_PERIOD = 1000
CHECK_EVERY = 64  # characters of new text between two checks
PROBE = 32  # characters at the end of the text looked for earlier on


class RepeatedOutputError(ValueError):
    """A streamed reply that kept repeating the same text was stopped (a small model in a loop).
    Not retried: the same request tends to loop the same way."""

    error_kind = "model_fatal"


# How a request sent on a connection the server had already closed fails: reset, or closed, before
# any response (a new connection that cannot be made is httpx.ConnectError, not one of these).
DEAD_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
DEAD_CONNECTIONS_SKIPPED = 3  # the pool may hold several (the server also closes idle ones)


class EmptyStreamError(ValueError):
    """A streamed step brought nothing, and asking again unstreamed did not help."""


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI plus what makes tools and budgets work on llama.cpp's llama-server,
    llama-cpp-python, Ollama, vLLM and LM Studio as well as on OpenAI:

    - bound tools go with `tool_choice: "auto"`: llama-cpp-python reads a missing tool_choice as
      "none" and leaves the tools out of the prompt;
    - an assistant message never has `content: null` (it becomes ""): llama-server, llama-cpp-python,
      Ollama and LM Studio reject null content next to tool calls;
    - a streamed step that brings neither text nor a tool call is asked once more without
      streaming: llama-cpp-python answers a streamed request with automatic tool choice with
      an empty stream (after evaluating the whole prompt), and the same request unstreamed with
      the tool calls; once an endpoint has done that, its later steps with tools go unstreamed
      at once (`_tool_streams_empty`);
    - a tool-call chunk that repeats its call's name (llama-cpp-python sends name and id in every
      chunk) loses the repeat, so the merged name is "Plan", not "PlanPlanPlan";
    - `compatible_server`: the output limit goes as `max_tokens`, the name every compatible server
      reads (llama-cpp-python and older llama-server ignore `max_completion_tokens`);
    - the request timeout never outlasts the turn's time budget (graphs/shared/deadline.py), and a reply
      that keeps repeating itself is stopped (RepeatedOutputError).
    """

    compatible_server: bool = False
    # Set when a streamed step with tools came back empty and the same step unstreamed answered:
    # the endpoint cannot stream tool steps, and each such stream cost a whole prompt evaluation.
    _tool_streams_empty: bool = PrivateAttr(default=False)

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: dict | str | bool | None = None,
        **kwargs: Any,
    ) -> Any:
        if tools and tool_choice is None:
            tool_choice = "auto"
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)

    def _get_request_payload(
        self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages", []):
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        if self.compatible_server and "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        left = seconds_left()
        if left is not None:
            if left <= 0:
                raise TurnTimeSpentError("the turn's time budget ran out before the model answered")
            configured = self.request_timeout
            bounded = isinstance(configured, int | float) and configured < left
            payload["timeout"] = configured if bounded else left
        return payload

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        offers_tools = bool(kwargs.get("tools"))
        if offers_tools and self._tool_streams_empty:
            yield self._unstreamed_on_a_live_connection(messages, stop, run_manager, **kwargs)
            return
        named: dict[int, str] = {}
        detector = RepetitionDetector()
        answered = False
        stream = super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs)
        try:
            while (chunk := self._next_in_time(stream)) is not None:
                chunk = without_repeated_names(chunk, named)
                answered = answered or has_output(chunk.message)
                yield chunk
                if unit := detector.feed(chunk.text):
                    raise RepeatedOutputError(
                        f"the model's reply kept repeating itself ({unit[:60]!r} over and over), "
                        f"so it was stopped after {detector.total:,} characters; a larger model or "
                        "a rephrased request usually helps"
                    )
                left = seconds_left()
                if left is not None and left <= 0:
                    raise TurnTimeSpentError("the turn's time budget ran out during the reply")
        finally:
            if isinstance(stream, Generator):  # as langchain-openai's is
                stream.close()  # stops reading: the HTTP response is closed
        if not answered:
            chunk = self._unstreamed_after_empty(messages, stop, run_manager, **kwargs)
            if offers_tools and has_output(chunk.message):
                self._tool_streams_empty = True
            yield chunk

    def _next_in_time(self, stream: Iterator[ChatGenerationChunk]) -> ChatGenerationChunk | None:
        """The stream's next chunk (None at its end), waited for at most the request timeout and
        never past the turn's deadline. Socket reads alone would wait for ever on a server that
        sends only keep-alive comments (`: ping`): each comment starts their timeout again."""
        try:
            with model_deadline(self._timeout_seconds()):
                return next(stream, None)
        except Exception as exc:
            if quiet := _own_timeout(exc, self._timeout_seconds()):
                raise quiet from exc
            raise

    def _timeout_seconds(self) -> float | None:
        timeout = self.request_timeout
        return float(timeout) if isinstance(timeout, int | float) else None

    def _unstreamed_after_empty(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | None,
        **kwargs: Any,
    ) -> ChatGenerationChunk:
        """The empty stream's step asked again unstreamed. A retry that fails is named by what
        happened to it: a timeout stays a timeout, an HTTP error (an overflow the server names
        included) that error. Only a retry that brought no completion either is still an empty
        stream, which the graph judges by the prompt's size (after a long prompt it is how some
        servers say the context is full)."""
        try:
            return self._unstreamed_on_a_live_connection(messages, stop, run_manager, **kwargs)
        except Exception as exc:
            if (
                not is_invalid_response(exc)
                or classify_model_error(exc)["kind"] != "model_transient"
            ):
                raise
            # The user reads this: what the endpoint sent, not the parser's exception class.
            detail = "its `choices` were empty" if isinstance(exc, IndexError) else str(exc)[:200]
            raise EmptyStreamError(
                f"{EMPTY_STREAM}, and the same request unstreamed brought no reply either ({detail})"
            ) from exc

    def _unstreamed_on_a_live_connection(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | None,
        **kwargs: Any,
    ) -> ChatGenerationChunk:
        """`_unstreamed`, sent again (a few times at most) while the connection it went out on was
        one the server had already closed. A server that breaks off a stream (llama-cpp-python's
        "Automatic streaming tool choice is not supported") closes that connection after it, and
        the pool may hand it out again at once: a request sent on it gets no response at all, so
        sending it again is safe (each dead connection is dropped from the pool)."""
        for _ in range(DEAD_CONNECTIONS_SKIPPED):
            try:
                return self._unstreamed(messages, stop, run_manager, **kwargs)
            except Exception as exc:
                if not went_out_on_a_dead_connection(exc):
                    raise
        return self._unstreamed(messages, stop, run_manager, **kwargs)

    def _unstreamed(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | None,
        **kwargs: Any,
    ) -> ChatGenerationChunk:
        """The same step once more as a plain request, as one chunk."""
        kwargs.pop("stream_usage", None)
        try:
            with model_deadline(self._timeout_seconds()):  # the whole reply, pings or not
                result = super()._generate(messages, stop=stop, **{**kwargs, "stream": False})
        except Exception as exc:
            if quiet := _own_timeout(exc, self._timeout_seconds()):
                raise quiet from exc
            raise
        generation = result.generations[0]
        chunk = ChatGenerationChunk(
            message=as_chunk(generation.message), generation_info=generation.generation_info
        )
        if run_manager:
            run_manager.on_llm_new_token(chunk.text, chunk=chunk)
        return chunk


def went_out_on_a_dead_connection(exc: BaseException) -> bool:
    """Whether `exc` (openai's, or langchain-openai's around it) was caused by a connection the
    server had closed, before any response."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, DEAD_CONNECTION):
            return True
        cause = cause.__cause__
    return False


class QuietEndpointError(TimeoutError):
    """The endpoint sent no reply within the request timeout (nothing, or keep-alive comments
    only), while the turn still had time: a timeout, retried like one."""


def _own_timeout(exc: Exception, timeout: float | None) -> QuietEndpointError | None:
    """For a request that ran out of its own time (not the turn's), a timeout that says so: the
    socket's error would speak of a turn budget that is not spent."""
    left = seconds_left()
    if timeout is None or not is_timeout(exc) or (left is not None and left <= 0):
        return None
    return QuietEndpointError(
        f"no reply within {timeout:g} s (the request timeout; keep-alive comments do not count)"
    )


def without_repeated_names(
    chunk: ChatGenerationChunk, named: dict[int, str]
) -> ChatGenerationChunk:
    """`chunk` without the name of a tool call whose name an earlier chunk already gave (and
    without the legacy `function_call` copy of the calls, which would be joined the same way)."""
    message = chunk.message
    if not isinstance(message, AIMessageChunk) or not message.tool_call_chunks:
        return chunk
    repaired = []
    for call in message.tool_call_chunks:
        index, name = call.get("index"), call.get("name")
        if isinstance(index, int) and name:
            if index in named:
                call = {**call, "name": None}
            else:
                named[index] = name
        repaired.append(call)
    extra = {k: v for k, v in message.additional_kwargs.items() if k != "function_call"}
    fixed = message.model_copy(update={"tool_call_chunks": repaired, "additional_kwargs": extra})
    return ChatGenerationChunk(message=fixed, generation_info=chunk.generation_info)


def has_output(message: BaseMessage) -> bool:
    if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
        return True
    return bool(str(message.content).strip())


def as_chunk(message: BaseMessage) -> AIMessageChunk:
    """An unstreamed reply as the one chunk a stream would have merged into."""
    if not isinstance(message, AIMessage):
        return AIMessageChunk(content=message.content, id=message.id)
    calls = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
        for i, c in enumerate(message.tool_calls)
    ]
    calls += [
        {"name": c.get("name"), "args": c.get("args"), "id": c.get("id"), "index": len(calls) + i}
        for i, c in enumerate(message.invalid_tool_calls)
    ]
    return AIMessageChunk(
        content=message.content,
        id=message.id,
        additional_kwargs=message.additional_kwargs,
        response_metadata=message.response_metadata,
        usage_metadata=message.usage_metadata,
        tool_call_chunks=[{**c, "type": "tool_call_chunk"} for c in calls],
    )


class RepetitionDetector:
    """Watches a reply's text as it streams; `feed` returns the repeated unit once the end of the
    text is the same unit at least MIN_REPEATS times over at least MIN_SPAN characters."""

    def __init__(self) -> None:
        self.tail = ""
        self.total = 0
        self._unchecked = 0

    def feed(self, text: str) -> str | None:
        if not text:
            return None
        self.total += len(text)
        self.tail = (self.tail + text)[-(MAX_PERIOD * MIN_REPEATS + CHECK_EVERY) :]
        self._unchecked += len(text)
        if self._unchecked < CHECK_EVERY or len(self.tail) < MIN_SPAN:
            return None
        self._unchecked = 0
        return repeated_unit(self.tail)


def repeated_unit(text: str) -> str | None:
    """The unit that `text` ends by repeating (see RepetitionDetector), or None. Candidate units
    come from earlier occurrences of the text's last PROBE characters."""
    probe = text[-PROBE:]
    start = len(text) - len(probe)
    position = text.rfind(probe, 0, len(text) - 1)
    while position != -1:
        period = start - position
        if period > MAX_PERIOD:
            return None
        repeats = max(MIN_REPEATS, -(-MIN_SPAN // period))
        span = period * repeats
        if span <= len(text) and text[-span:] == text[-period:] * repeats:
            return text[-period:]
        position = text.rfind(probe, 0, position + len(probe) - 1)
    return None
