"""Per-request time of GET /threads/{id} and POST /threads/search: one token vs a users file."""

import statistics
import time
from pathlib import Path

from fastapi.testclient import TestClient

from app.config import load_settings
from app.server.api import create_app
from app.server.tokens import add_user

here = Path.cwd()
token = add_user(here / "users.json", "alice")
modes = {
    "one token": (create_app(load_settings(), api_token="s3cret"), "s3cret"),
    "users file": (create_app(load_settings(users_file=here / "users.json")), token),
}
for name, (app, tok) in modes.items():
    client = TestClient(app, base_url="http://localhost")
    h = {"Authorization": f"Bearer {tok}"}
    client.post("/threads", json={"thread_id": f"t-{name[0]}"}, headers=h)
    for path in (f"/threads/t-{name[0]}", "/threads/search"):
        times = []
        for _ in range(300):
            start = time.perf_counter()
            r = (
                client.get(path, headers=h)
                if "search" not in path
                else client.post(path, json={}, headers=h)
            )
            times.append(time.perf_counter() - start)
            assert r.status_code == 200
        print(
            f"{name:10s} {path.split('/')[-1][:8]:8s} median {statistics.median(times) * 1000:.2f} ms  p90 {sorted(times)[269] * 1000:.2f} ms"
        )
