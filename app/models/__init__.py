"""Chat-model providers: `offline` (embedded) and `openai:<name>` (any OpenAI-compatible endpoint)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from app.errors import ConfigError

if (
    TYPE_CHECKING
):  # LangChain loads with a model, not with this package (the REPL's banner needs it)
    from langchain_core.language_models import BaseChatModel

TOOL_PROTOCOLS = ("native", "react")


def make_chat_model(
    spec: str,
    *,
    timeout: float = 60.0,
    base_url: str | None = None,
    protocol: str = "native",
    max_output_tokens: int | None = None,
) -> BaseChatModel:
    """Build the chat model named by `spec`; `protocol="react"` drives tools through ReAct text for
    endpoints without native tool calling; `max_output_tokens` caps each reply. Unknown specs are a
    configuration error."""
    if protocol not in TOOL_PROTOCOLS:
        raise ConfigError(f"unknown tool protocol '{protocol}'; use 'native' or 'react'")
    model = _base_model(
        spec, timeout=timeout, base_url=base_url, max_output_tokens=max_output_tokens
    )
    if protocol == "react":
        from app.models.react import wrap_react

        return wrap_react(model)
    return model


def _base_model(
    spec: str, *, timeout: float, base_url: str | None, max_output_tokens: int | None
) -> BaseChatModel:
    if spec == "offline":
        from app.models.offline import OfflineChatModel

        return OfflineChatModel()
    provider, _, name = spec.partition(":")
    if provider == "openai" and name:
        return _openai(
            name, timeout=timeout, base_url=base_url, max_output_tokens=max_output_tokens
        )
    raise ConfigError(
        f"unknown model '{spec}'; use 'offline' or 'openai:<model name>' (e.g. openai:gpt-4o-mini)"
    )


def _openai(
    name: str, *, timeout: float, base_url: str | None, max_output_tokens: int | None
) -> BaseChatModel:
    """ChatOpenAI with its own retries off (the graph's retry node owns retries, visibly), made to
    work with the compatible servers' quirks (app/models/openai_compat.py)."""
    from app.models.openai_compat import CompatibleChatOpenAI
    from app.models.wire import deadline_client

    options: dict = {"model": name, "timeout": timeout, "max_retries": 0, "streaming": True}
    # Every socket operation ends by the turn's deadline, whatever bytes the endpoint keeps sending.
    options["http_client"] = deadline_client()
    if max_output_tokens is not None:
        options["max_tokens"] = max_output_tokens
    base_url = base_url or os.environ.get("OPENAI_BASE_URL")
    if base_url:
        # Compatible servers (Ollama, vLLM, llama.cpp, LM Studio) speak Chat Completions only.
        options |= {"base_url": base_url, "use_responses_api": False, "compatible_server": True}
    if not os.environ.get("OPENAI_API_KEY"):
        if not base_url:
            raise ConfigError(
                f"model openai:{name} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
                "OpenAI-compatible server); or use --model offline"
            )
        options["api_key"] = "not-needed"  # local servers often take no key; the client wants one
    return CompatibleChatOpenAI(**options)
