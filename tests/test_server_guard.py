"""What the server refuses before any route runs (issue 16, item 3): other Host names (DNS
rebinding), cross-origin state changes, non-JSON POSTs, bodies over the cap; no CDN-loaded /docs."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.errors import ConfigError
from app.server.api import create_app

JSON = {"content-type": "application/json"}
MiB = 1024 * 1024


def local_client(**settings: object) -> TestClient:
    return TestClient(create_app(load_settings(**settings)), base_url="http://localhost:8000")


def thread_ids(client: TestClient) -> list[str]:
    return sorted(t["thread_id"] for t in client.post("/threads/search", json={}).json())


def run_body(message: str, **extra: object) -> dict:
    return {
        "assistant_id": "waypoint",
        "input": {"messages": [{"role": "user", "content": message}]},
        **extra,
    }


# --- Host -----------------------------------------------------------------------------------


def test_a_request_for_another_host_name_is_refused_before_any_route_runs():
    rebound = TestClient(create_app(load_settings()), base_url="http://attacker.example:8000")
    listed = rebound.post("/threads/search", json={})
    assert listed.status_code == 400
    assert listed.json() == {
        "detail": "Host 'attacker.example' is not served here (this server answers to "
        "127.0.0.1, [::1], localhost); if it names this server, start it with "
        "--allowed-host attacker.example",
        "error": "bad_request",
    }
    created = rebound.post("/threads", json={"thread_id": "pwned"})
    assert created.status_code == 400
    ran = rebound.post("/threads/pwned/runs/stream", json=run_body("hi", if_not_exists="create"))
    assert ran.status_code == 400
    for path in ("/", "/health", "/static/app.js", "/graph"):
        assert rebound.get(path).status_code == 400, path
    assert thread_ids(local_client()) == []


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:8000", "LOCALHOST"],
)
def test_loopback_names_are_served_with_or_without_a_port(host: str):
    client = local_client()
    assert client.get("/health", headers={"host": host}).status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "",
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
        "attacker.example@localhost",
        "localhost:8000@attacker.example",
        "localhost/x",
        "[::2]",
        "[::1",
        "localhost:99999",
        "0.0.0.0",
    ],
)
def test_lookalike_and_malformed_hosts_are_refused(host: str):
    response = local_client().get("/health", headers={"host": host})
    assert response.status_code == 400 and response.json()["error"] == "bad_request"


def test_allowed_hosts_come_from_the_option_the_environment_and_the_bound_address(
    monkeypatch: pytest.MonkeyPatch,
):
    from app.hosts import allowed_hosts

    assert allowed_hosts("127.0.0.1") == {"localhost", "127.0.0.1", "::1"}
    assert allowed_hosts("0.0.0.0", ["Waypoint.LAN"]) == {
        "localhost",
        "127.0.0.1",
        "::1",
        "waypoint.lan",
    }
    assert allowed_hosts("::") == allowed_hosts("127.0.0.1")
    assert "192.168.1.5" in allowed_hosts("192.168.1.5")
    assert "fe80::1" in allowed_hosts("[fe80::1]")

    monkeypatch.setenv("APP_ALLOWED_HOSTS", "waypoint.lan, [fe80::1] 10.0.0.2")
    assert load_settings().allowed_hosts == ["waypoint.lan", "fe80::1", "10.0.0.2"]
    client = local_client()
    for host in ("waypoint.lan", "waypoint.lan:8000", "[fe80::1]:8000", "10.0.0.2"):
        assert client.get("/health", headers={"host": host}).status_code == 200, host
    assert client.get("/health", headers={"host": "10.0.0.3"}).status_code == 400

    for bad in ("http://waypoint.lan", "waypoint.lan:8000", "a/b", "a b"):
        with pytest.raises(ConfigError, match="is not a host name"):
            load_settings(allowed_hosts=[bad])


def test_serve_answers_its_bound_address_and_allowed_hosts(monkeypatch: pytest.MonkeyPatch):
    import uvicorn

    from app.cli.main import app as cli

    started = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: started.append(self))
    args = ["serve", "--host", "192.168.1.5", "--allowed-host", "waypoint.lan"]
    cli([*args, "--allowed-host", "wp.example"], standalone_mode=False)
    client = TestClient(started[0].config.app)
    for host in ("192.168.1.5:8000", "waypoint.lan", "wp.example:80", "localhost:8000"):
        assert client.get("/health", headers={"host": host}).status_code == 200, host
    assert client.get("/health", headers={"host": "attacker.example"}).status_code == 400

    with pytest.raises(ConfigError, match="'http://x' is not a host name"):
        cli(["serve", "--allowed-host", "http://x"], standalone_mode=False)


# --- Origin ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "http://attacker.example",
        "http://localhost:3000",
        "http://localhost",
        "null",
        "file://",
        "http://localhost:8000.attacker.example",
    ],
)
def test_a_state_change_from_another_origin_is_refused(origin: str):
    client = local_client()
    created = client.post("/threads", json={"thread_id": "x"}, headers={"origin": origin})
    assert created.status_code == 403 and created.json()["error"] == "forbidden"
    assert "cross-origin request refused" in created.json()["detail"]
    assert thread_ids(client) == []
    assert client.post("/threads", json={"thread_id": "x"}).status_code == 200
    for method, path, extra in [
        ("DELETE", "/threads/x", {}),
        ("POST", "/threads/x/runs/r/cancel", {}),
        ("POST", "/threads/x/runs/stream", {"json": run_body("hi")}),
        ("POST", "/threads/x/fork", {"json": {"to": "y"}}),
        ("PATCH", "/threads/x", {"json": {"metadata": {"a": 1}}}),
        ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": {}}}),
    ]:
        response = client.request(method, path, headers={"origin": origin}, **extra)
        assert response.status_code == 403, (method, path)
    assert thread_ids(client) == ["x"]
    # Reading is not a state change; the browser keeps a foreign page from reading the answer.
    assert client.get("/threads/x", headers={"origin": origin}).status_code == 200


def test_the_servers_own_origin_and_clients_without_origin_may_change_state():
    client = local_client()
    own = {"origin": "http://localhost:8000"}
    assert client.post("/threads", json={"thread_id": "a"}, headers=own).status_code == 200
    assert client.post("/threads", json={"thread_id": "b"}).status_code == 200
    assert client.delete("/threads/a", headers=own).status_code == 204

    from app.hosts import same_origin

    assert same_origin("http://[::1]:8000", "[::1]:8000")
    assert same_origin("https://waypoint.lan", "waypoint.lan")  # behind a TLS proxy
    assert same_origin("http://waypoint.lan", "waypoint.lan:80")
    assert not same_origin("https://waypoint.lan", "waypoint.lan:80")
    assert not same_origin("http://waypoint.lan/path", "waypoint.lan")


# --- JSON content type ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_posts_need_a_json_content_type_even_without_a_body(content_type: str | None):
    client = local_client()
    headers = {"content-type": content_type} if content_type else {}
    # What a cross-site form or "simple" fetch can send without a CORS preflight.
    created = client.post("/threads", content=b'{"thread_id": "x"}', headers=headers)
    assert created.status_code == 415 and created.json()["error"] == "unsupported_media_type"
    assert "send Content-Type: application/json" in created.json()["detail"]
    assert thread_ids(client) == []
    if content_type is not None:  # a type other than JSON is refused even without a body
        cancel = client.post("/threads/x/runs/r/cancel", headers=headers)
        assert cancel.status_code == 415


def test_a_bodyless_post_without_a_content_type_is_accepted_from_this_server_only():
    """The SDKs' runs.cancel sends neither a body nor a content type; a browser sends such a
    request cross-site only with an Origin, which is refused."""
    client = local_client()
    own = client.post("/threads/x/runs/r/cancel")
    assert own.status_code == 404 and own.json()["error"] == "not_found"
    other = client.post("/threads/x/runs/r/cancel", headers={"origin": "http://evil.example"})
    assert other.status_code == 403


def test_json_with_a_charset_is_accepted():
    client = local_client()
    for n, content_type in enumerate(["application/json; charset=utf-8", "Application/JSON"]):
        body = f'{{"thread_id": "t{n}"}}'.encode()
        response = client.post("/threads", content=body, headers={"content-type": content_type})
        assert response.status_code == 200, response.text
    cancel = client.post("/threads/x/runs/r/cancel", headers=JSON)
    assert cancel.status_code == 404  # body-less, JSON type: reaches the route


# --- body size ------------------------------------------------------------------------------


def test_a_body_over_the_cap_is_refused_with_413():
    client = local_client()
    message = "x" * (MiB + 1)
    response = client.post("/threads/t/runs/stream", json=run_body(message))
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert "over 1048576 bytes" in response.json()["detail"]
    chunked = client.post("/threads", content=iter([b"{" + b" " * MiB, b"}"]), headers=JSON)
    assert chunked.status_code == 413
    assert (
        client.post("/threads", content=b" " * (MiB - 20) + b"{}", headers=JSON).status_code == 200
    )


def test_the_cap_is_configurable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("APP_MAX_BODY_BYTES", "2048")
    client = local_client()
    assert client.post("/threads", json={"thread_id": "t", "x": "y" * 2048}).status_code == 413
    assert (
        "over 2048 bytes"
        in client.post("/threads", content=b"{" + b" " * 2048 + b"}", headers=JSON).json()["detail"]
    )


class Body:
    """An ASGI `receive` that hands out a body in 64 KiB chunks and counts what was taken."""

    def __init__(self, total: int) -> None:
        self.total, self.taken = total, 0

    async def __call__(self) -> dict:
        size = min(64 * 1024, self.total - self.taken)
        self.taken += size
        return {"type": "http.request", "body": b" " * size, "more_body": self.taken < self.total}


def asgi_post(body: Body, headers: list[tuple[bytes, bytes]]) -> int:
    """POST /threads straight into the ASGI app; the response status."""
    app = create_app(load_settings())
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/threads",
        "raw_path": b"/threads",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost:8000"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, body, send))
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_a_declared_large_body_is_refused_before_a_byte_of_it_is_read():
    fifty_mb = Body(50 * MiB)
    assert asgi_post(fifty_mb, [(b"content-length", str(50 * MiB).encode())]) == 413
    assert fifty_mb.taken == 0


def test_a_chunked_body_is_read_only_up_to_the_cap():
    fifty_mb = Body(50 * MiB)
    assert asgi_post(fifty_mb, [(b"transfer-encoding", b"chunked")]) == 413
    assert MiB < fifty_mb.taken <= MiB + 64 * 1024


# --- docs and schema ------------------------------------------------------------------------


def test_no_docs_page_loads_a_cdn_and_the_schema_needs_the_token():
    client = local_client()
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert client.get(path).status_code == 404, path
    assert (
        "/threads/{thread_id}/runs/{run_id}/cancel" in client.get("/openapi.json").json()["paths"]
    )
    for path in ("/", "/static/app.js", "/static/style.css", "/static/index.html"):
        assert "cdn" not in client.get(path).text.lower(), path

    guarded = TestClient(
        create_app(load_settings(), api_token="s3cret"), base_url="http://localhost"
    )
    assert guarded.get("/openapi.json").status_code == 401
    schema = guarded.get("/openapi.json", headers={"authorization": "Bearer s3cret"})
    assert schema.status_code == 200 and "/threads" in schema.json()["paths"]


def test_a_connection_that_never_finishes_its_request_is_closed(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """A half-sent request (slowloris) holds no connection past APP_REQUEST_TIMEOUT; a whole request
    on another connection is answered meanwhile."""
    import socket
    from urllib.parse import urlsplit

    import httpx

    from tests.server_process import running_server

    monkeypatch.setenv("APP_REQUEST_TIMEOUT", "1")
    with running_server(tmp_path) as base:
        address = urlsplit(base)
        half_open = [socket.create_connection((address.hostname, address.port)) for _ in range(5)]
        for connection in half_open:
            connection.sendall(b"GET /ok HTTP/1.1\r\nHost: localhost\r\n")  # no blank line
        assert httpx.get(f"{base}/ok").json() == {"ok": True}
        for connection in half_open:
            connection.settimeout(60)  # bounds the test; the server closes it after about 1 s
            assert connection.recv(1024) == b""  # closed by the server, nothing answered
            connection.close()
