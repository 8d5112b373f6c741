"""Fuzzed inputs at the edges: any value of any setting is either taken or refused with one line
(ConfigError, exit 3); any thread id or checkpoint reference is either found or refused (exit 2 or
3). Never an internal error. Hypothesis runs derandomised, so CI sees the same cases every time."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.config import RunSettings, Settings, env_name, load_settings
from app.errors import ConfigError
from tests.conftest import run_cli

SETTINGS = sorted(
    env_name(name) if name in RunSettings.model_fields else f"APP_{name.upper()}"
    for name in Settings.model_fields
)
TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["inf", "-inf", "nan", "1e308", "-1", "0", "", " ", "postgresql://[::1"]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)
FUZZ = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(name=st.sampled_from(SETTINGS), value=TEXT)
def test_any_value_of_any_setting_is_taken_or_refused_in_one_line(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
):
    if "\x00" in value:
        return  # an environment variable cannot hold NUL
    with monkeypatch.context() as patched:
        patched.setenv(name, value)
        try:
            load_settings()
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    thread=st.text(max_size=80).filter(lambda t: "\x00" not in t and not t.startswith("-")),
    checkpoint=st.text(max_size=40).filter(lambda t: "\x00" not in t and not t.startswith("-")),
)
def test_any_thread_id_or_checkpoint_is_found_or_refused(thread: str, checkpoint: str):
    for command in (
        ["history", "-t", thread],
        ["show", "-t", thread, "-c", checkpoint],
        ["diff", "-t", "known", checkpoint, checkpoint],
    ):
        result = run_cli(*command)
        assert result.returncode in (0, 2, 3), (command, result.stderr.decode())
        assert "internal error" not in result.stderr.decode()


@pytest.fixture(autouse=True)
def _a_known_thread() -> None:
    assert run_cli("chat", "-t", "known", "-m", "what is 1 plus 1").returncode == 0
