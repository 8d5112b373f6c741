"""Issue 31's "smaller things", each with the test that pins it: a test here fails when one of them
loses its test (renamed or deleted), so the list stays a checklist of running tests."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

SMALLER_THINGS = {
    "each weather card takes 10 lines and repeats its arguments": [
        "tests/test_render.py::test_a_weather_card_takes_five_lines_at_80_columns_and_never_splits_a_field",
        "tests/test_render.py::test_a_json_result_is_shown_as_fields_without_repeating_the_arguments",
    ],
    "the REPL prints Markdown raw (pipes and fences)": [
        "tests/test_terminal_width.py::test_a_markdown_answer_streams_its_table_and_code_as_rendered_blocks",
        "tests/test_terminal_width.py::test_a_whole_markdown_answer_is_rendered_on_a_terminal_and_kept_raw_when_piped",
    ],
    "/new mythread ignores the name": [
        "tests/test_repl_commands.py::test_new_with_a_name_starts_that_thread_and_refuses_one_that_exists",
    ],
    "/threads titles wrap to 6 lines": [
        "tests/test_repl_commands.py::test_threads_shows_each_title_on_one_line",
    ],
    "after /compact the recap says 12 earlier turns then 1 earlier turn not shown": [
        "tests/test_repl_commands.py::test_after_compact_the_recap_counts_every_earlier_turn",
    ],
    "/undo names a checkpoint id /history does not show": [
        "tests/test_repl_commands.py::test_undo_names_the_checkpoint_that_history_then_shows",
    ],
    "answering n to threads delete exits 1 and prints nothing": [
        "tests/test_terminal_prompts.py::test_answering_no_to_delete_says_nothing_was_deleted_and_exits_0",
    ],
    "chat -m '' mentions /exit": [
        "tests/test_terminal_prompts.py::test_an_empty_message_is_not_sent_and_the_error_says_so",
    ],
    "serve does not print which database and workspace it uses or the URL to open": [
        "tests/test_terminal_prompts.py::test_serve_says_where_its_data_is_and_which_url_to_open",
        "tests/test_readme_examples.py::test_the_serve_examples_start_a_server_that_answers",
    ],
    "the README's chain example, in a fresh thread and after a recall": [
        "tests/test_saved_comparisons.py::test_the_readme_chain_saves_the_difference_naming_the_warmer_city",
        "tests/test_offline_requests.py::test_the_chain_example_after_a_recall_saves_the_difference_not_the_recall",
    ],
    "--strategy plan's saved file never says which city is warmer": [
        "tests/test_saved_comparisons.py::test_the_saved_file_names_the_winner_as_the_answer_does",
    ],
}


@pytest.mark.parametrize("thing", sorted(SMALLER_THINGS))
def test_each_smaller_thing_has_a_test(thing: str) -> None:
    for named in SMALLER_THINGS[thing]:
        path, _, name = named.partition("::")
        source = (REPO / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, re.MULTILINE), named
