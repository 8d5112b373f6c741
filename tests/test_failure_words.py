"""Failures told in words (issue 34): a plan whose call does not fit its form says which field was
wrong and what came, not pydantic's error codes and links, to the user and to the model asked to
correct it; and it is named a plan that could not be used, not tool calls that kept failing."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.openai_server import OpenAIServer, tool_call, tool_calls
from tests.openai_server import openai_server as openai_server  # the fixture

UNFIT_PLAN = tool_calls(tool_call("Plan", {"steps": "calculator 2+2"}))  # a string, not a list


def test_a_plan_that_does_not_fit_its_form_says_which_field_in_words(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    openai_server.add(*[UNFIT_PLAN] * 3)  # the first attempt and two retries

    result = run_cli(
        "chat", "-t", "plan", "--model", "openai:m", "--strategy", "plan", "--max-retries", "2",
        "-m", "what is 2+2",
    )  # fmt: skip

    panel = " ".join(line.strip("│ ") for line in result.stderr.decode().splitlines())
    assert result.returncode == 1, panel
    assert "The model's plan could not be used after 3 attempts" in panel
    assert "steps: Input should be a valid list (got 'calculator 2+2')" in panel
    for jargon in ("validation error", "type=list_type", "errors.pydantic.dev", "kept failing"):
        assert jargon not in panel, jargon
    # the model, asked for a corrected plan, reads the same words
    retry = openai_server.completions[1].messages[-1]["content"]
    assert "steps: Input should be a valid list" in retry and "pydantic" not in retry
    openai_server.assert_done()
