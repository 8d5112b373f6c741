"""Chat-model providers: `offline` (embedded) and `openai:<name>` (any OpenAI-compatible endpoint)."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from app.errors import ConfigError


def make_chat_model(
    spec: str, *, timeout: float = 60.0, base_url: str | None = None
) -> BaseChatModel:
    """Build the chat model named by `spec`; unknown specs are a configuration error."""
    if spec == "offline":
        from app.models.offline import OfflineChatModel

        return OfflineChatModel()
    provider, _, name = spec.partition(":")
    if provider == "openai" and name:
        return _openai(name, timeout=timeout, base_url=base_url)
    raise ConfigError(
        f"unknown model '{spec}'; use 'offline' or 'openai:<model name>' (e.g. openai:gpt-4o-mini)"
    )


def _openai(name: str, *, timeout: float, base_url: str | None) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    options: dict = {"model": name, "timeout": timeout, "max_retries": 0, "streaming": True}
    if base_url:
        options |= {"base_url": base_url, "use_responses_api": False}
    return ChatOpenAI(**options)
