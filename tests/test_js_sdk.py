"""The official LangGraph JS SDK (`@langchain/langgraph-sdk`, pinned in tests/js/package.json) run by
node against a real `python -m app serve`: one streamed turn in values+updates+messages-tuple, then
the thread's history (tests/js/sdk_turn.mjs). The package comes from WAYPOINT_JS_SDK_DIR (a directory
whose node_modules holds it; `.ci/run` makes one) or from `npm ci` in tests/js."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from graphs.strategies import STRATEGIES
from tests.server_process import running_server

JS = Path(__file__).resolve().parent / "js"
PACKAGE = "@langchain/langgraph-sdk"
INSTALL = (
    "run `npm ci --prefix tests/js`, or `npm ci` in a copy of tests/js/package*.json named by "
    "WAYPOINT_JS_SDK_DIR (.ci/run does this)"
)


def pinned_version() -> str:
    return json.loads((JS / "package.json").read_text())["dependencies"][PACKAGE]


def sdk_modules_or_skip() -> Path:
    """The node_modules that holds the pinned SDK; skips (fails with WAYPOINT_REQUIRE_JS_SDK=1) when
    node or the package is missing."""
    modules = Path(os.environ.get("WAYPOINT_JS_SDK_DIR") or JS) / "node_modules"
    manifest = modules / PACKAGE / "package.json"
    reason = None
    if shutil.which("node") is None:
        reason = "node is not installed (apt-get install nodejs npm; .ci/run installs them)"
    elif not manifest.exists():
        reason = f"{PACKAGE} is not in {modules}: {INSTALL}"
    elif (found := json.loads(manifest.read_text())["version"]) != pinned_version():
        reason = f"{modules} has {PACKAGE} {found}, not the pinned {pinned_version()}: {INSTALL}"
    if reason is None:
        return modules
    if os.environ.get("WAYPOINT_REQUIRE_JS_SDK") == "1":
        pytest.fail(f"WAYPOINT_REQUIRE_JS_SDK=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What sdk_turn.mjs saw. Node resolves an ES module's imports from the script's own directory
    (NODE_PATH does not apply), so a copy of the script runs beside a link to the SDK's node_modules."""
    modules = sdk_modules_or_skip()
    tmp = tmp_path_factory.mktemp("js-sdk")
    script = tmp / "client" / "sdk_turn.mjs"
    script.parent.mkdir()
    shutil.copy(JS / "sdk_turn.mjs", script)
    (script.parent / "node_modules").symlink_to(modules, target_is_directory=True)
    args = ("--db", str(tmp / "db" / "agent.sqlite"), "--workspace", str(tmp / "workspace"))
    with running_server(tmp, *args) as base:
        done = subprocess.run(
            ["node", str(script), base], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, f"node exited {done.returncode}:\n{done.stderr}"
    return json.loads(done.stdout)


def test_the_js_sdk_finds_one_assistant_per_strategy(seen: dict):
    assert seen["graphs"] == sorted(strategy.graph_id for strategy in STRATEGIES.values())


def test_a_streamed_turn_carries_every_requested_mode_and_the_answer(seen: dict):
    assert seen["errors"] == []
    assert seen["events"] == ["messages", "metadata", "updates", "values"]
    assert seen["answer"] == "6 * 7 = 42"
    assert seen["streamed"] == "6 * 7 = 42"


def test_updates_name_the_nodes_of_a_tool_using_turn(seen: dict):
    assert {"agent", "tools"} <= set(seen["nodes"])
    assert seen["nodes"].index("agent") < seen["nodes"].index("tools")
    assert seen["nodes"][-1] == "agent"


def test_history_lists_every_step_newest_first(seen: dict):
    # One checkpoint per step the updates showed, plus the input's and the start's.
    assert seen["history_states"] == len(seen["nodes"]) + 2
    assert seen["history_newest_first"] is True
    assert seen["history_head_answer"] == "6 * 7 = 42"
    assert seen["history_head_next"] == []


def test_thread_metadata_round_trips(seen: dict):
    assert seen["created_metadata"] == {"suite": "js-sdk", "kind": "math"}
    assert seen["metadata"] == {"suite": "js-sdk", "kind": "math"}
    assert seen["status"] == "idle"
