"""What the server refuses before any route runs (issue 16, item 3): other Host names (DNS
rebinding) and cross-origin state changes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.config import load_settings
from app.errors import ConfigError
from app.server.api import create_app


def local_client(**settings: object) -> TestClient:
    return TestClient(create_app(load_settings(**settings)), base_url="http://localhost:8000")


def thread_ids(client: TestClient) -> list[str]:
    return [t["thread_id"] for t in client.get("/threads").json()]


# --- Host -----------------------------------------------------------------------------------


def test_a_request_for_another_host_name_is_refused_before_any_route_runs():
    rebound = TestClient(create_app(load_settings()), base_url="http://attacker.example:8000")
    listed = rebound.get("/threads")
    assert listed.status_code == 400
    assert listed.json() == {
        "detail": "Host 'attacker.example' is not served here (this server answers to "
        "127.0.0.1, [::1], localhost); if it names this server, start it with "
        "--allowed-host attacker.example",
        "error": "bad_request",
    }
    created = rebound.post("/threads", json={"thread_id": "pwned"})
    assert created.status_code == 400
    ran = rebound.post(
        "/threads/pwned/runs/stream", json={"message": "hi", "if_not_exists": "create"}
    )
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
    from app.server.hosts import allowed_hosts

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

    from app.cli import app as cli

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
    assert client.post("/threads", json={"thread_id": "x"}).status_code == 201
    for method, path, extra in [
        ("DELETE", "/threads/x", {}),
        ("POST", "/threads/x/runs/cancel", {"json": {}}),
        ("POST", "/threads/x/runs/stream", {"json": {"message": "hi"}}),
        ("POST", "/threads/x/fork", {"json": {"to": "y"}}),
    ]:
        response = client.request(method, path, headers={"origin": origin}, **extra)
        assert response.status_code == 403, (method, path)
    assert thread_ids(client) == ["x"]
    # Reading is not a state change; the browser keeps a foreign page from reading the answer.
    assert client.get("/threads", headers={"origin": origin}).status_code == 200


def test_the_servers_own_origin_and_clients_without_origin_may_change_state():
    client = local_client()
    own = {"origin": "http://localhost:8000"}
    assert client.post("/threads", json={"thread_id": "a"}, headers=own).status_code == 201
    assert client.post("/threads", json={"thread_id": "b"}).status_code == 201
    assert client.delete("/threads/a", headers=own).status_code == 200

    from app.server.hosts import same_origin

    assert same_origin("http://[::1]:8000", "[::1]:8000")
    assert same_origin("https://waypoint.lan", "waypoint.lan")  # behind a TLS proxy
    assert same_origin("http://waypoint.lan", "waypoint.lan:80")
    assert not same_origin("https://waypoint.lan", "waypoint.lan:80")
    assert not same_origin("http://waypoint.lan/path", "waypoint.lan")
