"""Learn the model's context window by asking the endpoint, once per process per base URL and model;
a window only an overflow could teach is kept in the database (app/db/windows.py) for later processes.

Each server says it somewhere else (shapes checked against their sources and documentation):
- vLLM: `GET /v1/models` → `data[].max_model_len` (the running limit).
- llama.cpp's llama-server: `GET /props` → `default_generation_settings.n_ctx` (the running slot's
  window); `GET /v1/models` → `data[].meta.n_ctx_train` is only the training maximum.
- Ollama: `GET /api/ps` → `models[].context_length` (what a loaded model was given); `POST /api/show`
  → `parameters` "num_ctx N" (the Modelfile's setting), `model_info["<arch>.context_length"]` (the
  training maximum only: Ollama runs with a smaller default unless told otherwise).
- LM Studio: `GET /api/v0/models/{model}` → `loaded_context_length`, else `max_context_length`.
- llama-cpp-python's server reports no window: its overflow errors state it (graphs/shared/window.py).
Every probe is short and silent: a failure leaves the window unknown and the configured budget holds.
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any, TypeVar

from app.db.location import DatabaseLocation
from app.db.windows import LearnedWindow, forget_window, load_window, save_window
from app.errors import AppError
from graphs.shared.window import ContextWindow
from tools import clock

log = logging.getLogger(__name__)
T = TypeVar("T")

PROBE_TIMEOUT = 2.0  # seconds per request
PROBE_DEADLINE = 5.0  # seconds for the whole discovery
_CACHE: dict[tuple[str, str, str], ContextWindow] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Reading:
    tokens: int
    source: str
    exact: bool  # the running window, not a training maximum


def endpoint_window(
    base_url: str,
    model: str,
    api_key: str | None = None,
    reply_tokens: int | None = None,
    database: DatabaseLocation | None = None,
) -> ContextWindow:
    """The shared window record of this endpoint and model, found on first use in this process:
    what the endpoint reports, else what an overflow taught any process using `database` (kept
    there again whenever an overflow teaches it something)."""
    base = base_url.rstrip("/")
    key = (base, model, database.label if database else "")
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = _known_window(base, model, api_key, database)
        window = _CACHE[key]
    if reply_tokens:
        window.reply_tokens = reply_tokens
    return window


def forget_windows() -> None:
    """Drop every cached window (tests; a server restarted with another context size)."""
    with _LOCK:
        _CACHE.clear()


def _known_window(
    base_url: str, model: str, api_key: str | None, database: DatabaseLocation | None
) -> ContextWindow:
    """The endpoint's own running window wins (a stored one that differs is stale: forgotten);
    without one, the learned window stored for it, else what discovery found."""
    found = discover_window(base_url, model, api_key)
    if database is None:
        return found
    stored = _stored(database, base_url, model)
    if found.exact:
        if stored is not None and stored.tokens != found.tokens:
            _quietly(forget_window, database, base_url, model)
    elif stored is not None:
        found = ContextWindow(
            tokens=stored.tokens,
            source=stored.source,
            exact=stored.exact,
            proven=True,
            margin=stored.margin,
            learned_at=stored.learned_at,
        )
    found.on_learn = functools.partial(_keep, database, base_url, model)
    return found


def _stored(database: DatabaseLocation, base_url: str, model: str) -> LearnedWindow | None:
    return _quietly(load_window, database, base_url, model)


def _keep(database: DatabaseLocation, base_url: str, model: str, window: ContextWindow) -> None:
    """Store what an overflow taught, with when, for every later process."""
    if window.tokens is None:
        return
    window.learned_at = clock.now().astimezone(UTC).isoformat(timespec="seconds")
    learned = LearnedWindow(
        window.tokens, window.source, window.exact, window.margin, window.learned_at
    )
    _quietly(save_window, database, base_url, model, learned)


def _quietly(action: Callable[..., T], database: DatabaseLocation, *args: Any) -> T | None:
    """A stored window is an aid: a database that cannot be read or written now (busy, read-only,
    down) leaves the window to this process; it does not fail the turn or `doctor`."""
    try:
        return action(database, *args)
    except _database_errors(database) as exc:
        log.warning("context window not read or kept in the database: %s", exc)
        return None


def _database_errors(database: DatabaseLocation) -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (AppError, sqlite3.Error, OSError)
    if database.is_postgres:
        import psycopg

        errors += (psycopg.Error,)
    return errors


def discover_window(base_url: str, model: str, api_key: str | None = None) -> ContextWindow:
    """Ask the endpoint; the first running window wins, else the smallest training maximum."""
    ceilings: list[Reading] = []
    for reading in _readings(base_url, model, api_key):
        if reading.exact:
            return ContextWindow(tokens=reading.tokens, source=reading.source, exact=True)
        ceilings.append(reading)
    if ceilings:
        low = min(ceilings, key=lambda r: r.tokens)
        return ContextWindow(tokens=low.tokens, source=low.source, exact=False)
    return ContextWindow()


def _readings(base_url: str, model: str, api_key: str | None) -> Iterator[Reading]:
    import httpx

    base = base_url.rstrip("/")
    root = re.sub(r"/v1$", "", base)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + PROBE_DEADLINE
    with httpx.Client(headers=headers, follow_redirects=False) as client:

        def ask(method: str, url: str, body: dict | None = None) -> Any:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                response = client.request(method, url, json=body, timeout=min(PROBE_TIMEOUT, left))
                return response.json() if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                return None

        yield from _from_models(ask("GET", f"{base}/models"), model)
        yield from _from_props(ask("GET", f"{root}/props"))
        show = ask("POST", f"{root}/api/show", {"model": model})
        if show is not None:
            yield from _from_ollama_ps(ask("GET", f"{root}/api/ps"), model)
            yield from _from_ollama_show(show)
        yield from _from_lmstudio(ask("GET", f"{root}/api/v0/models/{model}"))


def _from_models(listing: Any, model: str) -> Iterator[Reading]:
    """`GET /v1/models`: vLLM's max_model_len, llama.cpp's meta, others' context lengths."""
    entry = _entry(listing, model)
    if entry is None:
        return
    meta = entry.get("meta")
    if not isinstance(meta, dict):
        meta = {}
    for value, source, exact in (
        (entry.get("max_model_len"), "max_model_len on /v1/models", True),
        (meta.get("n_ctx"), "meta.n_ctx on /v1/models", True),
        (entry.get("loaded_context_length"), "loaded_context_length on /v1/models", True),
        (entry.get("context_length"), "context_length on /v1/models", True),
        (meta.get("n_ctx_train"), "the training context (meta.n_ctx_train on /v1/models)", False),
        (entry.get("max_context_length"), "max_context_length on /v1/models", False),
    ):
        if tokens := _positive(value):
            yield Reading(tokens, source, exact)


def _entry(listing: Any, model: str) -> dict | None:
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    named = [e for e in entries if e.get("id") == model]
    if not named:
        named = [e for e in entries if str(e.get("id", "")).split(":")[0] == model.split(":")[0]]
    candidates = named or (entries if len(entries) == 1 else [])
    return candidates[0] if candidates else None


def _from_props(props: Any) -> Iterator[Reading]:
    """llama-server's `GET /props`: the running slot's n_ctx."""
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    if isinstance(settings, dict) and (tokens := _positive(settings.get("n_ctx"))):
        yield Reading(tokens, "llama.cpp /props", True)


def _from_ollama_ps(ps: Any, model: str) -> Iterator[Reading]:
    """Ollama's `GET /api/ps`: the context a loaded model was given."""
    models = ps.get("models") if isinstance(ps, dict) else None
    for entry in models if isinstance(models, list) else []:
        names = {str(entry.get("name", "")), str(entry.get("model", ""))}
        tokens = _positive(entry.get("context_length"))
        if tokens and (model in names or f"{model}:latest" in names):
            yield Reading(tokens, "Ollama /api/ps", True)


def _from_ollama_show(show: Any) -> Iterator[Reading]:
    """Ollama's `POST /api/show`: num_ctx in the parameters, the training maximum in model_info."""
    if not isinstance(show, dict):
        return
    parameters = show.get("parameters")
    if isinstance(parameters, str) and (match := re.search(r"^num_ctx\s+(\d+)", parameters, re.M)):
        yield Reading(int(match.group(1)), "num_ctx on Ollama /api/show", True)
    info = show.get("model_info")
    for key, value in info.items() if isinstance(info, dict) else []:
        if key.endswith(".context_length") and (tokens := _positive(value)):
            yield Reading(tokens, "the training context (Ollama /api/show model_info)", False)


def _from_lmstudio(entry: Any) -> Iterator[Reading]:
    """LM Studio's `GET /api/v0/models/{model}`."""
    if not isinstance(entry, dict):
        return
    if tokens := _positive(entry.get("loaded_context_length")):
        yield Reading(tokens, "LM Studio /api/v0/models", True)
    if tokens := _positive(entry.get("max_context_length")):
        yield Reading(tokens, "the model's maximum (LM Studio /api/v0/models)", False)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
