"""A run on a thread that exists opens no connection: its thread is checked on the connection the
server keeps for the run records, and its worker thread kept the runtime (checkpoints, memory) of
its last run with the same settings; a run that failed leaves nothing to reuse."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.standard.kept_runtimes import KEPT_HISTORIES, close_kept_runtime, kept_runtime
from tests.app_client import app_client, wait


def until_idle(client: TestClient) -> None:
    """Until the last run's worker thread is idle again (it ends its run, then waits), at most 10 s."""
    workers, pause = client.app.state.runs.workers, threading.Event()
    for _ in range(10_000):
        if workers.idle():
            return
        pause.wait(0.001)


def test_a_run_on_a_thread_that_exists_opens_no_connection(monkeypatch: pytest.MonkeyPatch):
    client = app_client()
    wait(client, "c", "what is 1 plus 1")
    until_idle(client)
    opened: list[str] = []
    connect = sqlite3.connect

    def counted(path, *args, **options):  # type: ignore[no-untyped-def]
        opened.append(str(path))
        return connect(path, *args, **options)

    monkeypatch.setattr(sqlite3, "connect", counted)
    wait(client, "c", "what is 2 plus 2")
    assert opened == []


def test_a_missing_thread_is_still_made_or_refused():
    client = app_client()
    wait(client, "made", "what is 1 plus 1")
    body = {"assistant_id": "waypoint", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    answer = client.post("/threads/missing/runs/wait", json=body)
    assert answer.status_code == 404 and "POST /threads" in answer.json()["detail"]


def test_a_worker_keeps_its_runtime_for_the_same_settings_only():
    settings = load_settings()
    with kept_runtime(settings, "ask") as first:
        pass
    with kept_runtime(settings, "ask") as again:
        assert again is first
    with kept_runtime(settings, "auto") as other:
        assert other is not first
    with kept_runtime(settings.model_copy(update={"user": "bob"}), "auto") as bobs:
        assert bobs is not other and bobs.user == "bob"  # another user's memory, never reused
    close_kept_runtime()


def test_a_run_that_failed_leaves_no_runtime_to_reuse():
    settings = load_settings()
    with pytest.raises(RuntimeError), kept_runtime(settings, "ask") as failed:
        raise RuntimeError("the run failed")
    with kept_runtime(settings, "ask") as next_one:
        assert next_one is not failed
        assert next_one.database.thread_exists("any") is False
    close_kept_runtime()


def test_a_kept_runtime_keeps_fewer_histories_than_a_repls():
    with kept_runtime(load_settings(), "ask") as runtime:
        assert runtime.saver.loaded_histories._histories.entries == KEPT_HISTORIES  # type: ignore[attr-defined]
    close_kept_runtime()
