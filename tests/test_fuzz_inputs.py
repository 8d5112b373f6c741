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


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
# Bodies shaped like the routes' own (right keys, any values) and anything at all.
FIELDS = [
    "namespace",
    "namespace_prefix",
    "key",
    "value",
    "filter",
    "query",
    "limit",
    "offset",
    "prefix",
    "suffix",
    "max_depth",
    "metadata",
    "thread_id",
    "if_exists",
    "values",
    "as_node",
    "checkpoint",
    "checkpoint_id",
    "before",
    "status",
    "ids",
    "sort_by",
]
BODY = st.one_of(JSON, st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6))
ROUTES = [
    ("PUT", "/store/items"),
    ("DELETE", "/store/items"),
    ("POST", "/store/items/search"),
    ("POST", "/store/namespaces"),
    ("POST", "/threads"),
    ("POST", "/threads/search"),
    ("POST", "/threads/count"),
    ("PATCH", "/threads/known"),
    ("POST", "/threads/known/state"),
    ("POST", "/threads/known/history"),
    ("POST", "/threads/known/copy"),
    ("POST", "/assistants/search"),
    ("POST", "/threads/known/rollback"),
    ("POST", "/threads/known/fork"),
]


@pytest.fixture
def client():  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from app.server.api import create_app

    app = create_app(load_settings())
    return TestClient(app, base_url="http://localhost", raise_server_exceptions=False)


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(route=st.sampled_from(ROUTES), body=BODY)
def test_any_body_on_the_store_and_thread_routes_is_answered_without_a_500(client, route, body):  # type: ignore[no-untyped-def]
    method, path = route
    response = client.request(method, path, json=body)
    assert response.status_code < 500, (method, path, body, response.text)
    if response.status_code >= 400:
        assert response.json()["detail"], response.text


@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    thread=st.text(min_size=1, max_size=70).filter(lambda t: "/" not in t and t not in {".", ".."}),
    key=st.text(max_size=30),
    namespace=st.text(max_size=30),
)
def test_any_id_in_a_path_or_query_is_answered_without_a_500(client, thread, key, namespace):  # type: ignore[no-untyped-def]
    from urllib.parse import quote

    thread = quote(thread, safe="")  # as a client sends it: any character, percent-encoded
    for method, path, params in [
        ("GET", f"/threads/{thread}", None),
        ("GET", f"/threads/{thread}/state", None),
        ("GET", f"/threads/{thread}/timeline", None),
        ("GET", "/store/items", {"key": key, "namespace": namespace}),
        ("GET", f"/threads/known/state/{thread}", None),
    ]:
        response = client.request(method, path, params=params)
        assert response.status_code < 500, (method, path, params, response.text)
