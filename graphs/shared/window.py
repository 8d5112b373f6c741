"""The model's context window and the token budget of the messages sent into it.

A `ContextWindow` is what is known of the window: found by asking the endpoint (app/models/window.py),
stated by an overflow error, or guessed from a prompt that did not fit. Every run of a process against
one endpoint shares it, so what one overflow teaches holds for the next turn. Token counts here are
approximate (`count_tokens_approximately`), hence the safety margin.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from graphs.shared.tokens import message_tokens

DEFAULT_REPLY_TOKENS = 1024  # room kept for the reply when no max_tokens is configured
SAFETY_MARGIN = 0.85  # approximate counts may undercount the server's tokenizer
MIN_MARGIN = 0.3
MIN_BUDGET_SHARE = 8  # the messages always get at least 1/8 of the window
GUESS_SHARE = 0.8  # an overflow that states no window: the window is below this share of the prompt


@dataclass
class ContextWindow:
    """The window in tokens as far as it is known. `exact` is the server's running window; a
    training maximum (llama.cpp's n_ctx_train, Ollama's model_info) is only a ceiling. `proven`
    says an overflow error taught it, which caps even an explicit APP_CONTEXT_TOKENS."""

    tokens: int | None = None
    source: str = "unknown"
    exact: bool = False
    proven: bool = False
    reply_tokens: int | None = None
    margin: float = SAFETY_MARGIN
    learned_at: str | None = None  # when an overflow taught it (ISO 8601, UTC), if one did
    # Told of every window an overflow teaches (app/models/window.py keeps it in the database).
    on_learn: Callable[[ContextWindow], None] | None = field(
        default=None, repr=False, compare=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def learn_from_overflow(
        self, stated: int | None, prompt_tokens: int, counted: int | None = None
    ) -> None:
        """An overflow happened: take the window the server stated, or guess one below the prompt
        that did not fit. `counted`, the server's own count of that prompt, says how far Waypoint's
        estimate (`prompt_tokens`) undercounts this server: the margin takes it in, so a later
        prompt fits by the server's count. Without it, when the estimate said the prompt fitted
        the known window, the margin is only narrowed a step."""
        with self._lock:
            known, was_exact = self.tokens, self.exact
            if stated:
                self.tokens, self.source, self.exact = stated, "stated by the endpoint", True
            elif known is None or (not self.exact and prompt_tokens * GUESS_SHARE < known):
                self.tokens = max(256, int(prompt_tokens * GUESS_SHARE))
                self.source = "estimated from a prompt that did not fit"
            if counted and prompt_tokens > 0:
                self.margin = max(
                    MIN_MARGIN, min(self.margin, SAFETY_MARGIN * prompt_tokens / counted)
                )
            elif known is not None and was_exact and prompt_tokens <= known * self.margin:
                self.margin = max(MIN_MARGIN, self.margin * 0.8)
            self.proven = True
        if self.on_learn is not None:
            self.on_learn(self)

    def counts_more(self) -> float | None:
        """How many of the server's tokens one of Waypoint's estimate has proven to be, when more
        than one (the margin learned from an overflow the server counted)."""
        if self.margin >= SAFETY_MARGIN:
            return None
        return SAFETY_MARGIN / self.margin

    def describe(self) -> str:
        if self.tokens is None:
            return "unknown"
        bound = "" if self.exact else "at most "
        when = f", learned {self.learned_at}" if self.learned_at else ""
        ratio = self.counts_more()
        counts = f"; it counts ~{ratio:.1f}x Waypoint's estimate" if ratio else ""
        return f"{bound}{self.tokens:,} tokens ({self.source}{counts}{when})"


class WindowContext(Protocol):
    """What the budget reads of a run's context (graphs/state.AgentContext, which holds a
    ContextWindow: this module cannot import it back without an import cycle)."""

    @property
    def system_prompt(self) -> str: ...
    @property
    def tools(self) -> Sequence[BaseTool]: ...
    @property
    def context_tokens(self) -> int | None: ...
    @property
    def context_tokens_explicit(self) -> bool: ...
    @property
    def window(self) -> ContextWindow | None: ...


def reply_room(window: ContextWindow) -> int:
    tokens = window.tokens or 0
    return window.reply_tokens or min(DEFAULT_REPLY_TOKENS, tokens // 4)


def overhead_tokens(context: WindowContext) -> int:
    """What every request carries besides the messages: the system prompt and the tool schemas."""
    system = [SystemMessage(context.system_prompt)] if context.system_prompt else []
    return count_tokens_approximately(system) + tool_schema_tokens(context.tools)


def tool_schema_tokens(tools: Sequence[BaseTool]) -> int:
    return sum(_schema_chars(tool) for tool in tools) // 4


# A tool's schema, as sent, is fixed once the tool is made: its length is worked out once per tool
# object, not on every model call (converting a dozen schemas twice a step was a tenth of a turn).
# Keyed by id with the tool kept alive, so an id is never reused while its entry stands; bounded,
# for processes that make tools afresh (MCP servers reconnecting).
_SCHEMA_CHARS: dict[int, tuple[BaseTool, int]] = {}
_SCHEMA_CACHE_LIMIT = 1024


def _schema_chars(tool: BaseTool) -> int:
    known = _SCHEMA_CHARS.get(id(tool))
    if known is not None and known[0] is tool:
        return known[1]
    chars = len(json.dumps(convert_to_openai_tool(tool), ensure_ascii=False))
    if len(_SCHEMA_CHARS) >= _SCHEMA_CACHE_LIMIT:
        _SCHEMA_CHARS.clear()
    _SCHEMA_CHARS[id(tool)] = (tool, chars)
    return chars


def window_budget(window: ContextWindow, overhead: int) -> int | None:
    """Tokens the messages may use in this window: the window less the reply's room, the margin
    and the overhead (never below an eighth of the window)."""
    if not window.tokens:
        return None
    usable = int((window.tokens - reply_room(window)) * window.margin) - overhead
    return max(usable, window.tokens // MIN_BUDGET_SHARE)


def context_budget(context: WindowContext, window: ContextWindow | None = None) -> int | None:
    """The messages' budget. An explicit APP_CONTEXT_TOKENS wins over a detected window; a
    detected running window wins over the default; a ceiling only lowers the default; a window
    proven by an overflow caps them all. `window` defaults to the context's."""
    configured, window = context.context_tokens, window or context.window
    fit = window_budget(window, overhead_tokens(context)) if window else None
    if fit is None or window is None:
        return configured
    if window.proven:
        return min(configured, fit) if configured else fit
    if context.context_tokens_explicit:
        return configured
    if window.exact:
        return fit
    return min(configured, fit) if configured else fit


def prompt_tokens(messages: Sequence[AnyMessage], context: WindowContext) -> int:
    """The approximate size of one request: the messages plus the overhead."""
    return message_tokens(messages) + overhead_tokens(context)
