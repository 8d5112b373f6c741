"""One source per name: every list of strategies (the CLI's choices, the settings, the assistants, the
portable graphs, the web page) is the registry's; tests/test_aegra.py checks the deployment files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.cli.options import Strategy as StrategyChoice
from graphs.catalog import DEFAULT_STRATEGY, STRATEGY_NAMES, Strategy
from graphs.strategies import STRATEGIES

ROOT = Path(__file__).resolve().parents[1]


def test_the_catalog_names_the_strategies_the_registry_loads_default_first():
    assert list(STRATEGIES) == list(STRATEGY_NAMES)
    assert STRATEGY_NAMES[0] == DEFAULT_STRATEGY
    assert all(strategy.name == name for name, strategy in STRATEGIES.items())


def test_the_cli_offers_the_registered_strategies():
    assert [choice.value for choice in StrategyChoice] == list(STRATEGIES)


def test_the_server_has_one_assistant_per_strategy_default_first():
    from app.server.standard.assistants import ASSISTANTS

    assert [(a.strategy, a.graph_id) for a in ASSISTANTS] == [
        (s.name, s.graph_id) for s in STRATEGIES.values()
    ]


def test_the_portable_module_serves_each_strategy_under_its_name():
    from app import portable

    assert set(portable.GRAPHS) == set(STRATEGIES)
    for name in STRATEGIES:
        assert getattr(portable, name) is portable.GRAPHS[name]


def test_the_web_page_takes_the_strategies_and_the_default_from_the_server():
    """The menu is filled from `POST /assistants/search` (its first is the default strategy)."""
    static = ROOT / "app/server/static"
    menu = re.search(
        r'<select id="strategy".*?</select>', (static / "index.html").read_text(), re.S
    )
    assert menu is not None and menu.group().count("<option") == 1  # "thread's strategy" only
    assert not re.search(rf"[\"'`]{DEFAULT_STRATEGY}[\"'`]", (static / "app.js").read_text())


def test_a_strategy_is_described_by_keyword():
    with pytest.raises(TypeError):
        Strategy("x", "waypoint-x", "a summary", lambda checkpointer: None)  # type: ignore[misc]
