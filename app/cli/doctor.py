"""`doctor`: the resolved configuration, the database's and workspace's health, and an endpoint ping."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from app.cli.database import database_of
from app.config import Settings
from app.errors import AppError
from tools.sandbox import Sandbox


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def mask(secret: str | None) -> str:
    if not secret:
        return "(not set)"
    return f"{secret[:3]}…{secret[-4:]}" if len(secret) > 10 else "****"


def configuration(settings: Settings) -> list[tuple[str, str]]:
    return [
        ("model", settings.model_spec),
        ("tool protocol", settings.tool_protocol),
        ("OPENAI_BASE_URL", os.environ.get("OPENAI_BASE_URL") or "(not set)"),
        ("OPENAI_API_KEY", mask(os.environ.get("OPENAI_API_KEY"))),
        ("database", f"{_database_label(settings)} ({settings.origin('db')})"),
        ("workspace", f"{settings.workspace.resolve()} ({settings.origin('workspace')})"),
        ("max iterations / retries", f"{settings.max_iterations} / {settings.max_retries}"),
        ("backoff base / cap", f"{settings.backoff_base:g} s / {settings.backoff_cap:g} s"),
        ("max Retry-After waited", f"{settings.max_retry_after:g} s"),
        (
            "context budget",
            f"{settings.context_tokens} tokens" if settings.context_tokens else "off",
        ),
        (
            "turn budgets",
            f"time {settings.max_seconds or 'off'}, tokens {settings.max_tokens_per_turn or 'off'}",
        ),
        ("model timeout", f"{settings.model_timeout:g} s"),
        ("max output tokens per reply", str(settings.max_output_tokens)),
        ("run_python sandbox bound", Sandbox().bounds.describe()),
    ]


def _database_label(settings: Settings) -> str:
    location = settings.database
    if location.path is None:
        return f"PostgreSQL {location.label}"
    return str(location.path.resolve())


def check_database(settings: Settings) -> Check:
    location = settings.database
    if location.path is not None and not location.path.exists():
        return Check(
            "database", True, f"{location.path} does not exist yet; the first chat creates it"
        )
    try:
        with database_of(settings) as database:
            health = database.health()
    except AppError as exc:
        return Check("database", False, str(exc))
    return Check("database", health.ok, health.detail)


def check_workspace(settings: Settings) -> Check:
    root = settings.workspace
    if not root.exists():
        return Check("workspace", True, f"{root} does not exist yet; the file tools create it")
    if not root.is_dir():
        return Check("workspace", False, f"{root} is not a directory")
    writable = os.access(root, os.W_OK | os.X_OK)
    return Check("workspace", writable, "writable" if writable else f"{root} is not writable")


PROBE_QUESTION = "What is 6 times 7? Use the calculator tool to work it out."
PROBE_TIMEOUT = 20.0  # seconds per probe request, unless APP_MODEL_TIMEOUT is set
PROBE_OUTPUT_TOKENS = 256
SLOW_ADVICE = (
    "a slow server (a small model on a CPU, or one busy with another request) may need "
    "--tool-protocol react (plain text, streamed), or a longer timeout: "
    "APP_MODEL_TIMEOUT=120 waypoint doctor --ping"
)


def probe_timeout(settings: Settings) -> float:
    """How long one probe request may take: APP_MODEL_TIMEOUT when it is set, else at most
    PROBE_TIMEOUT, so a default doctor run stays short."""
    if "model_timeout" in settings.model_fields_set:
        return settings.model_timeout
    return min(settings.model_timeout, PROBE_TIMEOUT)


def ping(settings: Settings) -> Check:
    """One tiny request through the configured model, with its outcome classified."""
    from langchain_core.messages import HumanMessage

    from app.models import make_chat_model
    from graphs.shared.deadline import model_deadline

    timeout = probe_timeout(settings)
    try:
        model = make_chat_model(
            settings.model_spec, timeout=timeout, max_output_tokens=PROBE_OUTPUT_TOKENS
        )
        started = time.perf_counter()
        with model_deadline(timeout):
            reply = model.invoke([HumanMessage("Reply with the single word: pong")])
    except Exception as exc:  # the outcome of the ping is what doctor reports
        return Check("ping", False, _failure(exc, timeout))
    elapsed = (time.perf_counter() - started) * 1000
    return Check("ping", True, f"answered in {elapsed:.0f} ms: {_gist(reply)!r}")


def probe_tools(settings: Settings) -> Check:
    """A tool-call round trip with the configured tool protocol: the model is offered the
    calculator and asked to use it, the result goes back, and the model answers. An endpoint that
    answers in text instead ignores tools (many local servers drop them silently)."""
    from langchain_core.messages import HumanMessage

    from app.models import make_chat_model
    from graphs.shared.deadline import model_deadline
    from graphs.shared.tool_calls import run_tool_calls
    from tools.calculator import calculator

    protocol = settings.tool_protocol
    question = [HumanMessage(PROBE_QUESTION)]
    timeout = probe_timeout(settings)
    try:
        model = make_chat_model(
            settings.model_spec,
            timeout=timeout,
            protocol=protocol,
            max_output_tokens=PROBE_OUTPUT_TOKENS,
        ).bind_tools([calculator])
        with model_deadline(timeout):
            reply = model.invoke(question)
        if not reply.tool_calls:
            return Check("tools", False, _ignored_tools(protocol, reply))
        results = run_tool_calls(reply, {calculator.name: calculator}, lambda event: None, 2000)
        with model_deadline(timeout):
            answer = model.invoke([*question, reply, *results])
    except Exception as exc:  # the outcome of the probe is what doctor reports
        return Check("tools", False, _failure(exc, timeout))
    call = reply.tool_calls[0]
    return Check(
        "tools",
        True,
        f"{protocol} tool calls work: {call['name']}({call['args']}) → "
        f"{results[0].content!r}, then {_gist(answer)!r}",
    )


def _ignored_tools(protocol: str, reply: object) -> str:
    said = f"; it said {_gist(reply)!r}"
    if protocol == "react":
        return f"the model did not follow the ReAct format to call the offered tool{said}"
    return (
        "the endpoint answered in text instead of calling the offered tool: it ignores tools, or "
        f"the model does not use them. Use --tool-protocol react (APP_TOOL_PROTOCOL=react){said}"
    )


def _failure(exc: Exception, timeout: float) -> str:
    """What failed, and for a request that ran out of time, what to try next. The request was
    given up on at `timeout`: its connection is closed, so the server can stop working on it."""
    from graphs.shared.model_errors import classify_model_error, is_timeout

    if isinstance(exc, AppError):
        return str(exc)
    if is_timeout(exc):
        return f"the endpoint did not answer within {timeout:g} s, so the request was closed; {SLOW_ADVICE}"
    error = classify_model_error(exc)
    return f"{error['kind']}: {error['message']}"


def _gist(reply: object) -> str:
    return str(getattr(reply, "content", reply)).strip().replace("\n", " ")[:60]


def check_window(settings: Settings) -> Check:
    """The model's context window as the endpoint reports it, and the budget Waypoint derives."""
    from app.service.context import model_window
    from graphs.shared.window import window_budget

    window = model_window(settings)
    configured = settings.context_tokens
    if window is None or window.tokens is None:
        where = "the offline model has none" if window is None else "the endpoint does not say"
        budget = f"{configured:,} tokens" if configured else "off"
        return Check("context window", True, f"unknown ({where}); context budget {budget}")
    fit = window_budget(window, 0)
    explicit = "context_tokens" in settings.model_fields_set
    if explicit:
        note = f"the context budget is APP_CONTEXT_TOKENS={configured:,}"
    else:
        note = f"about {fit:,} tokens for the prompt, the tools and the conversation"
    return Check("context window", True, f"{window.describe()}; {note}")
